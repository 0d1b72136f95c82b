"""What a simulation run found, read from its own results store: the figures of one run
(`RunResult`), the comparison of each backup candidate with the baseline (`Comparison`), and
the comparison as plain JSON and back (a simulation job writes it, the page reads it).

The figures are defined so that they cannot mislead:

- **Extra cost is what the candidate really costs more, in parts that add up.** The baseline
  sends the same seeded requests with nothing failing, so the spend it measures is the
  counterfactual: extra cost = candidate cost − baseline cost, exactly, whenever the candidate
  fails no more requests than the baseline. Its parts are the candidate's rollup sums minus the
  baseline's for the cache loss, the re-warm and the wasted spend, and the price difference is
  what remains (the backups' prices and token counts against the primary's, as charged), so
  `extra = price + cache loss + re-warm + wasted` holds by construction and no candidate can
  save more than the baseline spends. A request nobody answered was never charged: where the
  candidate fails more, the requests it left unanswered are counted at the baseline's cost per
  answered request (`unanswered_usd`), in the price difference, so a failure never reads as a
  saving; cost − baseline cost is then shown beside it with why they differ. Rejected: the
  fallback premium (engine/store/rollup_queries.py), an estimate from the backup's own token
  counts at the primary's prices and hit ratio rather than what the primary was charged for
  the same requests: on a replay it "saved" more than the baseline's whole spend.
- **Failing is not cheap.** A candidate fails when it leaves more requests unanswered than the
  baseline beyond the count's seeded noise, or when its load passes one of its rate limits
  (at full traffic, for a scaled run). `Comparison.ranked` puts the failing ones first and the
  rest by extra cost, so a failing candidate never reads as the cheapest.
- **Headroom at the run's scale.** A run of a share of the traffic (`Scenario.traffic_scale`)
  is compared with the limits times that share, and its sustained load divided by it is what
  full traffic would need: the simulated providers enforce the full limits, so a quick run
  cannot reach them and cannot show the requests they would refuse.
- **Latency within its noise reads ≈ 0** (`LatencyChange`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.core.money import price_difference
from simulations.whatif.calibration import Calibration
from simulations.whatif.result_parts import (
    LIMIT_OF,
    MEASURES,
    SUSTAINED_MINUTES,
    Z95,
    BackupLoad,
    Cause,
    CostParts,
    Headroom,
    LatencyChange,
    Load,
    Quantile,
)
from simulations.whatif.scenario import Limits, Scenario

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "MEASURES",
    "SUSTAINED_MINUTES",
    "BackupLoad",
    "Cause",
    "Comparison",
    "CostParts",
    "Headroom",
    "LatencyChange",
    "Load",
    "Quantile",
    "RunResult",
    "as_json",
    "from_json",
    "results_of",
]


@dataclass
class RunResult:
    label: str  # "baseline" or the backup candidate
    backup: str | None
    requests: int
    answered: int
    failed: int
    answered_by_fallback: int
    cost_usd: Decimal
    fallback_premium_usd: Decimal
    cache_loss_usd: Decimal
    rewarm_usd: Decimal
    wasted_usd: Decimal
    unpriced_attempts: int
    latency_p50: Quantile | None = None
    latency_p99: Quantile | None = None
    load: BackupLoad | None = None
    causes: tuple[Cause, ...] = ()
    incidents: int = 0
    fallback_by_minute: list[tuple[str, float]] = field(default_factory=list)
    start: datetime | None = None  # the scenario's (UTC)
    duration_s: float = 0.0
    traffic_scale: float = 1.0  # the share of the scenario's traffic this run sent
    seconds: float = 0.0  # wall time the run took

    @property
    def fallback_rate(self) -> float:
        return self.answered_by_fallback / self.requests if self.requests else 0.0

    @property
    def price_difference_usd(self) -> Decimal:
        return price_difference(self.fallback_premium_usd, self.cache_loss_usd)

    @property
    def answered_cost_usd(self) -> Decimal:
        """What the answered requests cost: every attempt but those paid for nothing."""
        return self.cost_usd - self.wasted_usd

    @property
    def cost_per_answered_usd(self) -> Decimal:
        return self.answered_cost_usd / self.answered if self.answered else Decimal(0)

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass
class Comparison:
    scenario: str
    baseline: RunResult
    candidates: list[RunResult]
    # A replay's: its run with the chain that really served against what was recorded.
    calibration: Calibration | None = None

    @property
    def scale(self) -> float:
        return self.baseline.traffic_scale

    def parts(self, run: RunResult) -> CostParts:
        """`run`'s extra cost in parts: cache loss, re-warm and wasted spend measured against
        the baseline's, the price difference what remains of the extra cost."""
        base = self.baseline
        cache = run.cache_loss_usd - base.cache_loss_usd
        rewarm = run.rewarm_usd - base.rewarm_usd
        wasted = run.wasted_usd - base.wasted_usd
        extra = self.cost_difference(run) + self.unanswered_usd(run)
        return CostParts(extra - cache - rewarm - wasted, cache, rewarm, wasted)

    def cost_difference(self, run: RunResult) -> Decimal:
        """What `run` spent beyond the baseline (a saving below 0), failed requests and all."""
        return run.cost_usd - self.baseline.cost_usd

    def unanswered_usd(self, run: RunResult) -> Decimal:
        """What the requests `run` failed beyond the baseline's failures would have cost at the
        baseline's cost per answered request: spend avoided only by not answering, which the
        extra cost counts back so that failing never reads as saving."""
        return self.extra_failed(run) * self.baseline.cost_per_answered_usd

    def extra_cost(self, run: RunResult) -> Decimal:
        return self.parts(run).total

    def extra_failed(self, run: RunResult) -> int:
        """Requests `run` failed beyond those the baseline failed (never negative)."""
        return max(0, run.failed - self.baseline.failed)

    def fails_more(self, run: RunResult) -> bool:
        """More failures than the baseline's beyond two standard deviations of the difference
        of two Poisson counts (the runs draw latencies, hence timeouts, apart), or any refused
        by the backup's own limits."""
        refused = run.load is not None and run.load.refused > 0
        noise = 2 * math.sqrt(run.failed + self.baseline.failed)
        return refused or self.extra_failed(run) > noise

    def headroom(self, run: RunResult) -> list[Headroom]:
        if run.load is None:
            return []
        return [Headroom.of(load, self.scale) for load in run.load.limited()]

    def over_at_full_traffic(self, run: RunResult) -> list[Headroom]:
        """The limits a scaled run's load would pass at full traffic, which the run itself
        cannot reach: the simulated providers enforce the full limits (none for a full run)."""
        return [h for h in self.headroom(run) if h.over] if self.scale < 1 else []

    def failing(self, run: RunResult) -> bool:
        """Fails requests the baseline answered, or would: its load passes a limit (at full
        traffic for a scaled run; at any scale a limit the simulated provider does not
        enforce, which leaves the run itself unharmed)."""
        return self.fails_more(run) or any(h.over for h in self.headroom(run))

    def ranked(self) -> list[RunResult]:
        """Failing candidates first (most failures first), then the others by extra cost."""
        failing = sorted(
            (c for c in self.candidates if self.failing(c)),
            key=lambda c: (-self.extra_failed(c), c.label),
        )
        rest = sorted((c for c in self.candidates if not self.failing(c)), key=self.extra_cost)
        return [*failing, *rest]

    def latency_change(self, run: RunResult, which: str = "p99") -> LatencyChange | None:
        mine, base = getattr(run, f"latency_{which}"), getattr(self.baseline, f"latency_{which}")
        return None if mine is None or base is None else LatencyChange.between(mine, base)


# --- reading a run's store -------------------------------------------------------------------

# The latencies of the answers that went into a run's minute rollups only, never into its
# attempts (simulations.whatif.fastforward_rows writes it).
QUIET_ANSWERS = "quiet_answers"

_FIGURES = """
    SELECT sum(requests)::BIGINT, sum(answered)::BIGINT,
        sum(unavailable + broken_streams)::BIGINT,
        sum(answered_by_fallback)::BIGINT, coalesce(sum(cost_usd), 0),
        coalesce(sum(fallback_premium_usd), 0), coalesce(sum(cache_loss_usd), 0),
        coalesce(sum(rewarm_usd), 0), coalesce(sum(wasted_usd), 0),
        coalesce(sum(unpriced_attempts), 0)::BIGINT
    FROM rollup_minute
"""
# The answered requests' latencies, first attempt's start to last attempt's end: a request
# that failed fast would otherwise read as a faster backup.
_ANSWERED_LATENCY = """
    SELECT (max(epoch_us(started_at) + latency_ms * 1000) - min(epoch_us(started_at))) / 1000
        AS ms
    FROM attempts GROUP BY request_id HAVING bool_or(served AND outcome = 'success')
"""
# With the answers that went straight into the minute rollups (simulations.whatif.fastforward_rows).
_LATENCIES = f"{_ANSWERED_LATENCY} UNION ALL SELECT ms FROM {QUIET_ANSWERS}"
# One row a failed request: its last attempt's target, class and message.
_CAUSES = """
    SELECT target, error_class, message, count(*)::BIGINT FROM (
        SELECT arg_max(target, attempt_number) AS target,
            arg_max(error_class, attempt_number) AS error_class,
            arg_max(CASE WHEN outcome = 'skipped' THEN error_message END, attempt_number)
                AS message,
            bool_or(served AND outcome = 'success') AS answered,
            bool_or(decision = 'fail_fast') AS request_fault,
            bool_or(outcome = 'cancelled' OR decision = 'cancelled') AS abandoned
        FROM attempts GROUP BY request_id)
    WHERE NOT (answered OR request_fault OR abandoned)
    GROUP BY ALL ORDER BY 4 DESC, 1, 2
"""
# A target's calls a minute, from the minute rollups (the calls' own minutes, skips left out):
# the quiet minutes of a run are there only.
_LOAD = """
    SELECT bucket AS minute, sum(attempts)::BIGINT,
        sum(input_tokens + cache_read_tokens + cache_write_tokens)::BIGINT,
        sum(output_tokens)::BIGINT, sum(rate_limited)::BIGINT
    FROM rollup_minute WHERE target = $target
    GROUP BY 1 HAVING sum(attempts) IS NOT NULL ORDER BY 1
"""
_FALLBACK_OVER_TIME = """
    SELECT bucket, sum(answered_by_fallback) / nullif(sum(requests), 0) FROM (
        SELECT time_bucket(INTERVAL 5 MINUTE, bucket) AS bucket, requests, answered_by_fallback
        FROM rollup_minute)
    GROUP BY bucket ORDER BY bucket
"""


def results_of(
    con: duckdb.DuckDBPyConnection, label: str, backup: str | None, scenario: Scenario
) -> RunResult:
    """A run's figures, read from its store once its scheduler has finished."""
    con.execute(f"CREATE TABLE IF NOT EXISTS {QUIET_ANSWERS} (ms DOUBLE)")  # a live store's
    (
        requests,
        answered,
        failed,
        by_fallback,
        cost,
        premium,
        cache_loss,
        rewarm,
        wasted,
        unpriced,
    ) = con.execute(_FIGURES).fetchone()
    result = RunResult(
        label,
        backup,
        requests or 0,
        answered or 0,
        failed or 0,
        by_fallback or 0,
        Decimal(cost),
        Decimal(premium),
        Decimal(cache_loss),
        Decimal(rewarm),
        Decimal(wasted),
        unpriced,
        start=scenario.start,
        duration_s=scenario.duration_s,
        traffic_scale=scenario.traffic_scale,
    )
    result.latency_p50, result.latency_p99 = _latency_quantiles(con, (0.5, 0.99))
    result.causes = tuple(_cause(*row) for row in con.execute(_CAUSES).fetchall())
    (result.incidents,) = con.execute("SELECT count(*) FROM incidents").fetchone()
    result.fallback_by_minute = [
        (bucket.isoformat(), float(rate or 0.0))
        for bucket, rate in con.execute(_FALLBACK_OVER_TIME).fetchall()
    ]
    if backup is not None:
        minutes = con.execute(_LOAD, {"target": backup}).fetchall()
        result.load = _backup_load(backup, minutes, scenario)
    return result


def _latency_quantiles(con: Any, ps: tuple[float, ...]) -> list[Quantile | None]:
    """The answered latency's quantiles `ps`, each with its 95 % interval (the order
    statistics a sample of this size puts around it), from one read of the latencies."""
    ms = con.execute(_LATENCIES).fetchnumpy()["ms"]
    n = len(ms)
    if not n:
        return [None] * len(ps)
    wanted = []
    for p in ps:
        half = Z95 * math.sqrt(n * p * (1 - p)) / n
        wanted.append((max(0.0, p - half), p, min(1.0, p + half)))
    positions = [(n - 1) * q for triple in wanted for q in triple]
    below = {math.floor(x) for x in positions}
    around = sorted(below | {min(b + 1, n - 1) for b in below})
    part = np.partition(np.asarray(ms, dtype=np.float64), around)
    return [Quantile(*(quantile_cont(part, q) for q in (p, low, high))) for low, p, high in wanted]


def quantile_cont(ranked: np.ndarray, q: float) -> float:
    """DuckDB's `quantile_cont` of `ranked` (sorted, or partitioned around the two order
    statistics either side of (n − 1)·q)."""
    return float(quantile_cont_groups(ranked, np.zeros(1, np.int64), np.array([len(ranked)]), q)[0])


def quantile_cont_groups(
    values: np.ndarray, starts: np.ndarray, n: np.ndarray, q: float
) -> np.ndarray:
    """DuckDB's `quantile_cont` of each group (values sorted within each, the groups `n` long
    from `starts`): the linear interpolation between the order statistics either side of
    (n − 1)·q."""
    position = (n - 1) * q
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, n - 1)
    lo, hi = values[starts + below], values[starts + above]
    return lo + (hi - lo) * (position - below)


def _cause(target: str, error_class: str, message: str | None, requests: int) -> Cause:
    """A skipped request's message lists each target and why it was skipped, in order
    (engine.fallback.run: "a: breaker open; b: cooling down after a rate limit"): its last target
    is where it ran out of options."""
    if message and ": " in message:
        target, _, detail = message.split("; ")[-1].partition(": ")
        return Cause(target, error_class, detail, requests)
    return Cause(target, error_class or "unknown", "", requests)


def _backup_load(target: str, minutes: list[tuple], scenario: Scenario) -> BackupLoad:
    limits = scenario.limits.get(target, Limits())
    rows = [
        (at, n, tokens_in, tokens_out, tokens_in + tokens_out)
        for at, n, tokens_in, tokens_out, _ in minutes
    ]
    loads = []
    for i, measure in enumerate(MEASURES, start=1):
        values = [row[i] for row in rows]
        peak = max(values, default=0)
        peak_at = rows[values.index(peak)][0] if values else None
        loads.append(
            Load(measure, peak, peak_at, _busiest_mean(rows, i), getattr(limits, LIMIT_OF[measure]))
        )
    refused = [(at, n) for at, *_, n in minutes if n and not _fault_refusal(scenario, target, at)]
    return BackupLoad(
        target, tuple(loads), sum(n for _, n in refused), refused[0][0] if refused else None
    )


def _busiest_mean(rows: list[tuple], column: int) -> float:
    """The highest mean a minute over SUSTAINED_MINUTES consecutive minutes (a minute without
    a row counts as 0)."""
    by_minute = {row[0]: row[column] for row in rows}
    best = 0.0
    for at in by_minute:
        window = (by_minute.get(at + timedelta(minutes=k), 0) for k in range(SUSTAINED_MINUTES))
        best = max(best, sum(window) / SUSTAINED_MINUTES)
    return best


def _fault_refusal(scenario: Scenario, target: str, minute: datetime) -> bool:
    """Whether a rate-limit fault of the scenario hits `target` in `minute`: its 429s then are
    the fault's, not the target's own limits."""
    t = (minute - scenario.start).total_seconds()
    return any(
        f.kind == "rate_limit" and f.hits(target) and f.start_s < t + 60 and t < f.end_s
        for f in scenario.faults
    )


# --- JSON ------------------------------------------------------------------------------------


def as_json(comparison: Comparison) -> dict:
    """The comparison as plain JSON types (money as exact strings, times in ISO 8601), with the
    derived figures beside the measured ones; `from_json` reads it back."""

    def run(r: RunResult) -> dict:
        body = _plain(dataclasses.asdict(r))
        body.update(
            fallback_rate=r.fallback_rate,
            price_difference_usd=str(r.price_difference_usd),
            answered_cost_usd=str(r.answered_cost_usd),
            cost_per_answered_usd=str(r.cost_per_answered_usd),
            requests_per_s=r.requests_per_s,
        )
        if r is not comparison.baseline:
            parts = comparison.parts(r)
            body.update(
                extra_cost_usd=str(parts.total),
                cost_difference_usd=str(comparison.cost_difference(r)),
                unanswered_usd=str(comparison.unanswered_usd(r)),
                extra_failed=comparison.extra_failed(r),
                failing=comparison.failing(r),
                extra_cost_parts=_plain(dataclasses.asdict(parts)),
            )
            for which in ("p50", "p99"):
                change = comparison.latency_change(r, which)
                body[f"added_latency_{which}_ms"] = None if change is None else change.ms
        return body

    body = {
        "scenario": comparison.scenario,
        "baseline": run(comparison.baseline),
        "candidates": [run(c) for c in comparison.candidates],
    }
    if comparison.calibration is not None:
        body["recorded"] = comparison.calibration.as_json()
    return body


def from_json(body: dict) -> Comparison:
    """The `Comparison` that `as_json` wrote."""
    recorded = body.get("recorded")
    return Comparison(
        body["scenario"],
        _run(body["baseline"]),
        [_run(c) for c in body["candidates"]],
        None if recorded is None else Calibration.from_json(recorded),
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _run(body: dict) -> RunResult:
    fields = {f.name for f in dataclasses.fields(RunResult)}
    r = {k: v for k, v in body.items() if k in fields}
    for name in ("cost_usd", "fallback_premium_usd", "cache_loss_usd", "rewarm_usd", "wasted_usd"):
        r[name] = Decimal(r[name])
    for name in ("latency_p50", "latency_p99"):
        r[name] = None if r.get(name) is None else Quantile(**r[name])
    r["causes"] = tuple(Cause(**c) for c in r.get("causes", ()))
    r["fallback_by_minute"] = [tuple(p) for p in r.get("fallback_by_minute", ())]
    r["start"] = _when(r.get("start"))
    if r.get("load") is not None:
        load = r["load"]
        r["load"] = BackupLoad(
            load["target"],
            tuple(Load(**{**x, "peak_at": _when(x["peak_at"])}) for x in load["loads"]),
            load["refused"],
            _when(load["first_refused_at"]),
        )
    return RunResult(**r)


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
