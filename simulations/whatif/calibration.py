"""How far a replay is from what really happened: the figures the store recorded over a
window (`Recorded`), and the same window replayed through the chain that really served, with
the recorded faults (`Calibration`). A leaf: values only.

A replay is only worth its comparison if, run with the backups that really served, it gives
back what was recorded. Each measure is compared as a share of the recorded figure, with a
floor so that a count of 3 against 1, or cents against a tenth of a cent, does not read as a
200 % miss: a count below COUNT_FLOOR is compared against COUNT_FLOOR (a handful of requests
timing out apart is the run's own latency draws, not a replay that is off), an amount below
USD_FLOOR against USD_FLOOR. Above TRUSTED the result is not to be trusted, and says which
measure is off and by how much.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

NANO = Decimal("1e-9")  # the scale of the store's DECIMAL(18,9) money columns
TRUSTED = 0.10  # beyond this share off on any measure, the replay does not reproduce the record
COUNT_FLOOR = 50
USD_FLOOR = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the record says of a window: requests (request faults aside), the failed ones,
    those a fallback answered, what it all cost and the prompt cache its fallbacks lost."""

    requests: int
    failed: int
    answered_by_fallback: int
    cost_usd: Decimal
    # None: not measured. The store prices a lost cache with the primary's hit ratio over the
    # day before; in a store's first day there is none, and it recorded $0 for a real loss.
    cache_loss_usd: Decimal | None = Decimal(0)

    @property
    def fallback_rate(self) -> float:
        return self.answered_by_fallback / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class Measure:
    """One figure as recorded and as replayed, and how far apart (a share of the recorded)."""

    name: str
    recorded: float | Decimal
    replayed: float | Decimal
    off: float


@dataclass(frozen=True, slots=True)
class Calibration:
    recorded: Recorded
    measures: tuple[Measure, ...]
    replayed_cache_loss_usd: Decimal = Decimal(0)  # kept when the record has none to compare

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """The measures the record could not be compared on."""
        return () if self.recorded.cache_loss_usd is not None else ("cache loss",)

    @classmethod
    def of(
        cls,
        recorded: Recorded,
        failed: int,
        answered_by_fallback: int,
        cost_usd: Decimal,
        cache_loss_usd: Decimal,
    ) -> Calibration:
        """The replay's figures (run with the chain that really served) against `recorded`."""
        measures = [
            _count("requests failed", recorded.failed, failed),
            _count("answered by a fallback", recorded.answered_by_fallback, answered_by_fallback),
            _usd("cost", recorded.cost_usd, cost_usd),
        ]
        if recorded.cache_loss_usd is not None:
            measures.append(_usd("cache loss", recorded.cache_loss_usd, cache_loss_usd))
        return cls(recorded, tuple(measures), cache_loss_usd)

    @property
    def worst(self) -> Measure:
        return max(self.measures, key=lambda m: m.off)

    @property
    def within(self) -> float:
        """The largest share off over the measures: "reproduces what happened within N %"."""
        return self.worst.off

    @property
    def trusted(self) -> bool:
        return self.within <= TRUSTED

    def as_json(self) -> dict:
        r = self.recorded
        return {
            "requests": r.requests,
            "failed": r.failed,
            "answered_by_fallback": r.answered_by_fallback,
            "cost_usd": str(r.cost_usd),
            "cache_loss_usd": None if r.cache_loss_usd is None else str(r.cache_loss_usd),
            "replayed": {
                **{m.name: _plain(m.replayed) for m in self.measures},
                "cache loss": str(self.replayed_cache_loss_usd),
            },
            "off": {m.name: m.off for m in self.measures},
            "within": self.within,
            "trusted": self.trusted,
        }

    @classmethod
    def from_json(cls, body: dict) -> Calibration:
        recorded = Recorded(
            body["requests"],
            body["failed"],
            body["answered_by_fallback"],
            Decimal(body["cost_usd"]),
            None if body["cache_loss_usd"] is None else Decimal(body["cache_loss_usd"]),
        )
        replayed = body["replayed"]
        return cls.of(
            recorded,
            int(replayed["requests failed"]),
            int(replayed["answered by a fallback"]),
            Decimal(replayed["cost"]),
            Decimal(replayed["cache loss"]),
        )


def _count(name: str, recorded: int, replayed: int) -> Measure:
    return Measure(name, recorded, replayed, abs(replayed - recorded) / max(recorded, COUNT_FLOOR))


def _usd(name: str, recorded: Decimal, replayed: Decimal) -> Measure:
    off = abs(replayed - recorded) / max(recorded, USD_FLOOR)
    return Measure(name, recorded, replayed, float(off))


def _plain(value: float | Decimal) -> float | str | int:
    return str(value) if isinstance(value, Decimal) else value
