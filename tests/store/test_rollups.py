"""Rollups against a hand-computed fixture: every figure below is worked out in the comments,
from the attempts and the prices, independently of the SQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import duckdb
import pytest

from engine.core.attempt import Attempt
from engine.store.eval_drill_tables import DRILL_ABORT_COLUMNS, READINESS_TABLES
from engine.store.rollups import CURRENT_HELPER_TABLES, CURRENT_ROLLUP_COLUMNS, TABLES, refresh
from engine.telemetry.columns import DUCKDB_COLUMNS, to_row, to_table

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
M = Decimal("0.000001")  # one dollar per million tokens, per token


@dataclass(frozen=True)
class Prices:
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


def per_million(*usd: str) -> Prices:
    return Prices(*(Decimal(x) * M for x in usd))


PRICES = {
    ("anthropic", "claude-sonnet-4-5"): per_million("3", "15", "0.3", "3.75"),
    ("openai", "gpt-4.1-mini"): per_million("0.4", "1.6", "0.1", "0.4"),
}
PRIMARY, BACKUP = "claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"


def attempt(request: str, n: int, at: timedelta, target: str, **fields) -> Attempt:
    provider, model = target.split("/")
    base = dict(
        request_id=request, attempt_number=n, route="support", target=target, provider=provider,
        provider_kind="anthropic" if provider == "claude" else "openai", model=model,
        key_kind="managed", process_id=1, started_at=T0 + at, latency_ms=100.0, ttft_ms=None,
        streamed=False, outcome="success", decision="served", error_class=None, fault_kind=None,
        http_status=None, error_type=None, error_code=None, error_message=None,
        retry_after_s=None, breaker_state="closed", served=True,
        fallback_depth=0 if target == PRIMARY else 1, feature="chat",
    )  # fmt: skip
    base.update(fields)
    return Attempt(**base)


def failed(request: str, n: int, at: timedelta, target: str, fault: str, decision: str, **kw):
    return attempt(
        request, n, at, target, outcome="error", decision=decision, error_class=fault,
        fault_kind=kw.pop("kind", "provider"), served=False, **kw,
    )  # fmt: skip


def cost(target: str, i=0, o=0, cr=0, cw=0) -> Decimal:
    p = PRICES[
        ("anthropic", "claude-sonnet-4-5") if target == PRIMARY else ("openai", "gpt-4.1-mini")
    ]
    return i * p.input + o * p.output + cr * p.cache_read + cw * p.cache_write


S = timedelta(seconds=1)
ATTEMPTS = [
    # Baseline, 11:30: the primary's successes read 800 of 1,000 input tokens from cache: h = 0.8.
    *(attempt(f"b{k}", 1, -30 * 60 * S + k * S, PRIMARY, input_tokens=200, cache_read_tokens=800,
              output_tokens=100) for k in range(2)),
    # R1 12:00:10: 529, retry, 529, fall back; the backup serves 1,000 input + 100 output tokens.
    failed("r1", 1, 10 * S, PRIMARY, "overloaded", "retry", http_status=529),
    failed("r1", 2, 11 * S, PRIMARY, "overloaded", "fall_back", http_status=529),
    attempt("r1", 3, 12 * S, BACKUP, input_tokens=1000, output_tokens=100),
    # R2 12:00:20: a request fault.
    failed("r2", 1, 20 * S, PRIMARY, "invalid_request", "fail_fast", kind="request"),
    # R3 12:00:30: a read timeout (prompt of ~500 tokens probably billed), then success.
    failed("r3", 1, 30 * S, PRIMARY, "read_timeout", "retry", kind="ambiguous",
           input_tokens=500, tokens_estimated=True),
    attempt("r3", 2, 31 * S, PRIMARY, input_tokens=200, cache_read_tokens=800, output_tokens=50),
    # R4 12:01:05: nothing answers.
    failed("r4", 1, 65 * S, PRIMARY, "overloaded", "retry"),
    failed("r4", 2, 66 * S, PRIMARY, "overloaded", "fall_back"),
    failed("r4", 3, 67 * S, BACKUP, "unavailable", "give_up", http_status=503),
    # R6 12:01:30: the backup serves again (2 backup vs 1 primary in the minutes before 12:02).
    attempt("r6", 2, 90 * S, BACKUP, input_tokens=100, output_tokens=10),
    # R5 12:02:00: the primary is back and re-writes its cache: 1,000 cache-write tokens.
    attempt("r5", 1, 120 * S, PRIMARY, cache_write_tokens=1000, output_tokens=10),
]  # fmt: skip


def price(a: Attempt) -> Decimal:
    return cost(
        a.target, a.input_tokens, a.output_tokens, a.cache_read_tokens, a.cache_write_tokens
    )


# The drills table as migrations leave it (the rollups read who aborted a drill).
DRILL_ABORT_DDL = ", ".join(f"{name} {kind}" for name, kind in DRILL_ABORT_COLUMNS.items())


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS})")
    for table in TABLES.values():
        con.execute(f"CREATE TABLE {table} ({CURRENT_ROLLUP_COLUMNS})")
    con.execute(CURRENT_HELPER_TABLES)
    con.execute(f"CREATE TABLE drills ({READINESS_TABLES['drills']}, {DRILL_ABORT_DDL})")
    con.register("fixture", to_table([to_row(a, price(a), "test") for a in ATTEMPTS]))
    con.execute("INSERT INTO attempts SELECT * FROM fixture")
    refresh(con, "minute", T0 - timedelta(hours=1), T0 + 3 * 60 * S, _lookup)
    return con


def _lookup(provider: str, kind: str, model: str) -> Prices | None:
    return PRICES.get((kind, model))


def minute(con, at: timedelta) -> dict:
    row = con.execute(
        "SELECT sum(requests), sum(answered), sum(answered_by_fallback), sum(request_faults), "
        "sum(unavailable), sum(attempts), sum(failed_attempts), sum(wasted_usd), "
        "sum(fallback_premium_usd), sum(cache_loss_usd), sum(rewarm_usd), sum(cost_usd), "
        "sum(provider_faults), sum(ambiguous_faults), sum(request_fault_attempts) "
        "FROM rollup_minute WHERE bucket = $b",
        {"b": T0 + at},
    ).fetchone()
    keys = (
        "requests answered by_fallback request_faults unavailable attempts failed wasted "
        "premium cache_loss rewarm cost provider_faults ambiguous request_fault_attempts"
    )
    return dict(zip(keys.split(), row, strict=True))


def test_request_level_counts_follow_the_deciding_attempt(con):
    m = minute(con, timedelta(0))
    assert (m["requests"], m["answered"], m["by_fallback"], m["request_faults"]) == (3, 2, 1, 1)
    assert (m["attempts"], m["failed"]) == (6, 4)
    assert (m["provider_faults"], m["ambiguous"], m["request_fault_attempts"]) == (2, 1, 1)
    assert (minute(con, 60 * S)["requests"], minute(con, 60 * S)["unavailable"]) == (2, 1)


def test_wasted_spend_is_the_cost_of_attempts_that_served_nothing(con):
    # R3's timed-out attempt: ~500 prompt tokens at $3/M = $0.0015.
    assert minute(con, timedelta(0))["wasted"] == Decimal("0.001500000")


def test_fallback_premium_and_cache_loss_match_the_formula(con):
    # R1 on the backup: 1,000 in × $0.4/M + 100 out × $1.6/M = $0.00056.
    # On the primary with h = 0.8: 200 × $3/M + 800 × $0.3/M + 100 × $15/M = $0.00234.
    # Premium = 0.00056 − 0.00234 = −$0.00178 (the backup is cheaper even without its cache).
    # Cache loss = 1,000 × 0.8 × ($3/M − $0.3/M) = $0.00216.
    m = minute(con, timedelta(0))
    assert m["premium"] == Decimal("-0.001780000")
    assert m["cache_loss"] == Decimal("0.002160000")


def test_re_warming_the_primary_cache_after_a_fallback_is_costed(con):
    # 12:02: the primary writes 1,000 cache tokens at $3.75/M that, but for the outage, it
    # would have read at $0.30/M, after 2 backup-served vs 1 primary-served requests in the
    # five minutes before.
    assert minute(con, 120 * S)["rewarm"] == Decimal("0.003450000")


def test_cost_is_the_sum_of_the_attempts_costs(con):
    m0 = minute(con, timedelta(0))
    expected = sum(price(a) for a in ATTEMPTS if T0 <= a.started_at < T0 + 60 * S)
    assert m0["cost"] == expected.quantize(Decimal("1e-9"))


def test_refreshing_again_replaces_the_buckets_instead_of_adding(con):
    before = con.execute("SELECT count(*), sum(attempts) FROM rollup_minute").fetchone()
    refresh(con, "minute", T0, T0 + 3 * 60 * S, _lookup)
    assert con.execute("SELECT count(*), sum(attempts) FROM rollup_minute").fetchone() == before


def test_hourly_and_daily_rollups_hold_the_same_totals(con):
    for grain in ("hour", "day"):
        refresh(con, grain, T0 - timedelta(hours=1), T0 + 3 * 60 * S, _lookup)
    totals = [
        con.execute(f"SELECT sum(requests), sum(attempts), sum(cost_usd) FROM {t}").fetchone()
        for t in TABLES.values()
    ]
    assert totals[0] == totals[1] == totals[2]


def test_an_unpriced_model_is_counted_not_costed_as_zero(con):
    con.execute("UPDATE attempts SET cost_usd = NULL, model = 'mystery' WHERE request_id = 'r6'")
    refresh(con, "minute", T0, T0 + 3 * 60 * S, _lookup)
    row = con.execute(
        "SELECT unpriced_attempts FROM rollup_minute WHERE model = 'mystery'"
    ).fetchone()
    assert row == (1,)


def test_late_attempts_recompute_the_cache_baselines_of_the_hours_after_them(tmp_path):
    """A writer that was offline delivers the primary's cached successes of an hour ago: the
    next hour's cache-hit baseline, computed before they arrived, is computed again."""
    from helpers.store_rows import attempt

    from engine.store.db import open_store
    from engine.store.rollups import forget_baselines, refresh

    con = open_store(tmp_path / "late.duckdb")
    hour = datetime(2026, 11, 23, 10, tzinfo=UTC)
    attempt(con, hour + timedelta(hours=1, minutes=5), request_id="now", input_tokens=100)
    refresh(con, "minute", hour + timedelta(hours=1), hour + timedelta(hours=1, minutes=10),
            lambda provider, kind, model: None)  # fmt: skip
    baseline = "SELECT hit_ratio FROM baselines WHERE hour = $h"
    assert con.execute(baseline, {"h": hour + timedelta(hours=1)}).fetchone() == (0.0,)

    attempt(con, hour + timedelta(minutes=30), request_id="late", input_tokens=100,
            cache_read_tokens=900)  # fmt: skip
    forget_baselines(con, hour + timedelta(minutes=30))
    refresh(con, "minute", hour + timedelta(minutes=30), hour + timedelta(hours=1, minutes=10),
            lambda provider, kind, model: None)  # fmt: skip
    assert con.execute(baseline, {"h": hour + timedelta(hours=1)}).fetchone() == (0.9,)
    con.close()


def test_a_request_no_target_could_take_counts_as_unavailable_but_not_as_an_attempt(tmp_path):
    from helpers.store_rows import attempt

    from engine.store.db import open_store

    con = open_store(tmp_path / "skipped.duckdb")
    at = datetime(2026, 11, 23, 10, 0, 30, tzinfo=UTC)
    attempt(con, at, request_id="none", outcome="skipped", decision="give_up", served=False,
            error_class="all_skipped", input_tokens=0, output_tokens=0, latency_ms=0.0)  # fmt: skip
    refresh(con, "minute", at, at, lambda provider, kind, model: None)
    row = con.execute(
        "SELECT sum(requests), sum(unavailable), coalesce(sum(attempts), 0),"
        " coalesce(sum(failed_attempts), 0) "
        "FROM rollup_minute"
    ).fetchone()
    assert row == (1, 1, 0, 0)
    con.close()


def test_a_caller_who_left_during_the_backoff_abandoned_the_request_it_was_not_unavailable(
    tmp_path,
):
    """The chain records a failed attempt `cancelled` when its caller leaves during the wait
    before the retry: nothing more was tried, so nobody can say the providers were down."""
    from helpers.store_rows import attempt

    from engine.store.db import open_store

    con = open_store(tmp_path / "left.duckdb")
    at = datetime(2026, 11, 23, 10, 0, 30, tzinfo=UTC)
    attempt(con, at, request_id="left", outcome="error", decision="cancelled", served=False,
            error_class="overloaded", fault_kind="provider", http_status=529)  # fmt: skip
    refresh(con, "minute", at, at, lambda provider, kind, model: None)
    row = con.execute(
        "SELECT sum(requests), sum(abandoned), sum(unavailable) FROM rollup_minute"
    ).fetchone()
    assert row == (1, 1, 0)
    con.close()
