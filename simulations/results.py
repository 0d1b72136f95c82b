"""What a simulation run found, read from its own results store: the figures of one run
(`RunResult`), the comparison of each backup candidate with the baseline (`Comparison`), and the
comparison as plain JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal

from engine.scheduler import Pipeline
from simulations.scenario import Scenario


@dataclass
class RunResult:
    label: str  # "baseline" or the backup candidate
    backup: str | None
    requests: int
    failed: int
    answered_by_fallback: int
    cost_usd: Decimal
    fallback_premium_usd: Decimal
    cache_loss_usd: Decimal
    rewarm_usd: Decimal
    wasted_usd: Decimal
    unpriced_attempts: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    backup_peak_rpm: int = 0
    backup_peak_tpm: int = 0
    backup_rpm_limit: int | None = None
    backup_tpm_limit: int | None = None
    incidents: int = 0
    fallback_by_minute: list[tuple[str, float]] = field(default_factory=list)
    seconds: float = 0.0  # wall time the run took

    @property
    def fallback_rate(self) -> float:
        return self.answered_by_fallback / self.requests if self.requests else 0.0

    @property
    def price_difference_usd(self) -> Decimal:
        return self.fallback_premium_usd - self.cache_loss_usd

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass
class Comparison:
    scenario: str
    baseline: RunResult
    candidates: list[RunResult]

    def extra_cost(self, run: RunResult) -> Decimal:
        return run.cost_usd - self.baseline.cost_usd

    def added_latency_ms(self, run: RunResult, which: str = "p99") -> float | None:
        mine = getattr(run, f"latency_{which}_ms")
        base = getattr(self.baseline, f"latency_{which}_ms")
        return None if mine is None or base is None else mine - base


_FIGURES = """
    SELECT sum(requests)::BIGINT, sum(unavailable + broken_streams)::BIGINT,
        sum(answered_by_fallback)::BIGINT, coalesce(sum(cost_usd), 0),
        coalesce(sum(fallback_premium_usd), 0), coalesce(sum(cache_loss_usd), 0),
        coalesce(sum(rewarm_usd), 0), coalesce(sum(wasted_usd), 0),
        coalesce(sum(unpriced_attempts), 0)::BIGINT
    FROM rollup_minute
"""
_LATENCY = """
    SELECT quantile_cont(ms, 0.5), quantile_cont(ms, 0.99) FROM (
        SELECT (max(epoch_us(started_at) + latency_ms * 1000) - min(epoch_us(started_at)))
            / 1000 AS ms
        FROM attempts GROUP BY request_id HAVING NOT bool_or(decision = 'fail_fast'))
"""
_PEAK = """
    SELECT coalesce(max(n), 0)::BIGINT, coalesce(max(tokens), 0)::BIGINT FROM (
        SELECT count(*) AS n,
            sum(input_tokens + cache_read_tokens + cache_write_tokens + output_tokens) AS tokens
        FROM attempts WHERE target = $target
        GROUP BY time_bucket(INTERVAL 1 MINUTE, started_at))
"""
_FALLBACK_OVER_TIME = """
    SELECT bucket, sum(answered_by_fallback) / nullif(sum(requests), 0) FROM (
        SELECT time_bucket(INTERVAL 5 MINUTE, bucket) AS bucket, requests, answered_by_fallback
        FROM rollup_minute)
    GROUP BY bucket ORDER BY bucket
"""


def results_of(pipeline: Pipeline, label: str, backup: str | None, scenario: Scenario) -> RunResult:
    con = pipeline.con
    (requests, failed, by_fallback, cost, premium, cache_loss, rewarm, wasted,
     unpriced) = con.execute(_FIGURES).fetchone()  # fmt: skip
    p50, p99 = con.execute(_LATENCY).fetchone()
    result = RunResult(
        label, backup, requests or 0, failed or 0, by_fallback or 0, Decimal(cost),
        Decimal(premium), Decimal(cache_loss), Decimal(rewarm), Decimal(wasted), unpriced,
        p50, p99,
    )  # fmt: skip
    (result.incidents,) = con.execute("SELECT count(*) FROM incidents").fetchone()
    result.fallback_by_minute = [
        (bucket.isoformat(), float(rate or 0.0))
        for bucket, rate in con.execute(_FALLBACK_OVER_TIME).fetchall()
    ]
    if backup is not None:
        peak_rpm, peak_tpm = con.execute(_PEAK, {"target": backup}).fetchone()
        limits = scenario.limits.get(backup)
        result.backup_peak_rpm, result.backup_peak_tpm = peak_rpm, peak_tpm
        if limits is not None:
            result.backup_rpm_limit, result.backup_tpm_limit = limits.rpm, limits.tpm
    return result


def as_json(comparison: Comparison) -> dict:
    """The comparison as plain JSON types (money as strings, exact)."""

    def run(r: RunResult) -> dict:
        body = {k: (str(v) if isinstance(v, Decimal) else v)
                for k, v in dataclasses.asdict(r).items()}  # fmt: skip
        body.update(fallback_rate=r.fallback_rate, price_difference_usd=str(r.price_difference_usd),
                    requests_per_s=r.requests_per_s)  # fmt: skip
        if r is not comparison.baseline:
            body["extra_cost_usd"] = str(comparison.extra_cost(r))
            body["added_latency_p50_ms"] = comparison.added_latency_ms(r, "p50")
            body["added_latency_p99_ms"] = comparison.added_latency_ms(r, "p99")
        return body

    return {
        "scenario": comparison.scenario,
        "baseline": run(comparison.baseline),
        "candidates": [run(c) for c in comparison.candidates],
    }
