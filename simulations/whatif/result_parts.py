"""The parts of a what-if run's figures, as values: a latency quantile and its noise, the
change of one against the baseline's, a failed request's cause, the load a run put on a backup
and its headroom against a limit, and the parts of a candidate's extra cost. A leaf: it reads
no store and imports nothing of the simulator (simulations.whatif.results builds them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile: two-sided 95 %
SUSTAINED_MINUTES = 10  # a scaled run's load is read over its busiest this many minutes
MEASURES = ("requests/min", "input tokens/min", "output tokens/min", "tokens/min")
LIMIT_OF = {"requests/min": "rpm", "input tokens/min": "input_tpm",
            "output tokens/min": "output_tpm", "tokens/min": "tpm"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Quantile:
    """A latency quantile of a run's answered requests with its 95 % interval: the sample's
    values at the ranks n·p ± 1.96·√(n·p·(1−p)), the binomial interval of a quantile from
    order statistics, which assumes nothing about the latency's distribution."""

    ms: float
    low_ms: float
    high_ms: float

    @property
    def noise_ms(self) -> float:
        return (self.high_ms - self.low_ms) / 2


@dataclass(frozen=True, slots=True)
class LatencyChange:
    """A candidate's quantile minus the baseline's. The two runs' latencies are drawn apart,
    so the difference's noise is the root sum of squares of their intervals' half-widths; a
    difference within it is no difference (`ms` None, read "≈ 0"), and one beyond it is
    rounded to the noise's order of magnitude (noise 37 ms: to 10 ms), what the run resolves."""

    ms: float | None
    noise_ms: float

    @classmethod
    def between(cls, run: Quantile, base: Quantile) -> LatencyChange:
        diff = run.ms - base.ms
        noise = math.hypot(run.noise_ms, base.noise_ms)
        if abs(diff) <= noise:
            return cls(None, noise)
        step = 10 ** math.floor(math.log10(noise)) if noise > 0 else 1
        return cls(round(diff / step) * step, noise)


@dataclass(frozen=True, slots=True)
class Cause:
    """Failed requests of a run, by the target their last attempt tried and why it failed."""

    target: str
    error_class: str  # the last attempt's; `all_skipped` when every target was skipped
    detail: str  # why that target was skipped (breaker open, cooling down after a rate limit)
    requests: int

    @property
    def rate_limited(self) -> bool:
        return self.error_class == "rate_limit" or "rate limit" in self.detail


@dataclass(frozen=True, slots=True)
class Load:
    """One measure of the load a run put on a backup, a minute at a time."""

    measure: str  # one of MEASURES
    peak: int  # the busiest minute's
    peak_at: datetime | None
    sustained: float  # the busiest SUSTAINED_MINUTES minutes' mean a minute
    limit: int | None  # the account's limit at full traffic, where the scenario gives one


@dataclass(frozen=True, slots=True)
class BackupLoad:
    target: str
    loads: tuple[Load, ...]  # one per MEASURES
    refused: int  # its 429s that no fault of the scenario made: its own rate limits
    first_refused_at: datetime | None

    def limited(self) -> tuple[Load, ...]:
        return tuple(load for load in self.loads if load.limit is not None)

    def nearest_limit(self) -> Load | None:
        """The limit the load came closest to (or passed by most), at the run's scale."""
        return max(self.limited(), key=lambda load: load.peak / load.limit, default=None)  # type: ignore[operator]


@dataclass(frozen=True, slots=True)
class CostParts:
    """A candidate's extra cost against the baseline, part by part; `total` is their sum."""

    price_difference_usd: Decimal
    cache_loss_usd: Decimal
    rewarm_usd: Decimal
    wasted_usd: Decimal

    @property
    def total(self) -> Decimal:
        return self.price_difference_usd + self.cache_loss_usd + self.rewarm_usd + self.wasted_usd


@dataclass(frozen=True, slots=True)
class Headroom:
    """One measure of a backup's load against its limit, at the run's traffic scale: a full
    run's busiest minute against the limit; a scaled run's busiest SUSTAINED_MINUTES minutes
    (a single minute of a small run is mostly noise) against the limit times the scale. The
    busiest of many windows leans high, so a scaled run errs towards warning."""

    measure: str
    load: float  # a minute, at the run's scale
    limit: int  # the account's, at full traffic
    scale: float

    @classmethod
    def of(cls, load: Load, scale: float) -> Headroom:
        assert load.limit is not None, load
        return cls(load.measure, load.peak if scale >= 1 else load.sustained, load.limit, scale)

    @property
    def scaled_limit(self) -> float:
        """The limit at the run's scale: what its load is compared with."""
        return self.limit * self.scale

    @property
    def full_traffic(self) -> float:
        """What full traffic would put on the backup: the load divided by the scale."""
        return self.load / self.scale

    @property
    def over(self) -> bool:
        return self.load > self.scaled_limit
