"""Each rule kind against exact figures in a fresh store."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from helpers.store_rows import attempt, breaker_event, rollup

from engine.alerts.conditions import Context, evaluate
from engine.config.alerting import DEFAULT_RULES, Rule
from engine.store.db import open_store

NOW = datetime(2026, 11, 23, 12, 0, 30, tzinfo=UTC)


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    yield con
    con.close()


def _fired(con, rule: Rule, spool=None, wall=time.time) -> list:
    ctx = Context(con, NOW, spool or NOW_SPOOL, wall)
    return evaluate([rule], ctx)[rule.name]


NOW_SPOOL = None


@pytest.fixture(autouse=True)
def _spool(tmp_path):
    global NOW_SPOOL
    NOW_SPOOL = tmp_path / "spool"


def _minute(ago: int) -> datetime:
    return NOW.replace(second=0) - timedelta(minutes=ago)


def _default(name: str) -> Rule:
    return next(r for r in DEFAULT_RULES if r.name == name)


def test_fallback_rate_fires_above_its_threshold_with_enough_requests(con):
    rule = _default("fallback-rate-5m")  # > 10 % of ≥ 20 requests in 5 min
    for ago in range(5):
        rollup(con, _minute(ago), requests=10, answered_by_fallback=1)
    assert _fired(con, rule) == [], "exactly 10 % is not above 10 %"
    rollup(con, _minute(0), route="support", target="gpt/x", requests=0, answered_by_fallback=2)
    [obs] = _fired(con, rule)
    assert obs.subject == "support" and obs.value == pytest.approx(14.0)


@pytest.mark.parametrize(
    ("price", "cache_loss", "rewarm", "wasted", "said"),
    [
        (Decimal("-0.19"), Decimal("0.07"), Decimal(0), Decimal(0),
         "backups' prices $0.19 lower than the primary's, $0.07 of prompt cache lost: "
         "$0.12 less in all; nothing wasted"),
        (Decimal("-0.0624"), Decimal(0), Decimal(0), Decimal(0),
         "backups' prices $0.06 lower than the primary's; nothing wasted"),
        (Decimal("0.0168"), Decimal(0), Decimal(0), Decimal("0.0021"),
         "backups' prices $0.02 higher than the primary's; wasted $0.0021"),
        (Decimal("-0.05"), Decimal("0.30"), Decimal("0.04"), Decimal(0),
         "backups' prices $0.05 lower than the primary's, $0.30 of prompt cache lost, "
         "$0.04 to re-warm it: $0.29 more in all; nothing wasted"),
        (Decimal("0.0021"), Decimal("0.0120"), Decimal("0.0009"), Decimal(0),  # $0.015 in all
         "backups' prices $0.01 higher than the primary's, $0.01 of prompt cache lost: "
         "$0.02 more in all; nothing wasted"),
        (Decimal("-0.0030"), Decimal("0.0030"), Decimal(0), Decimal(0),
         "backups' prices $0.0030 lower than the primary's, $0.0030 of prompt cache lost: "
         "the same in all; nothing wasted"),
        (Decimal(0), Decimal(0), Decimal(0), Decimal(0),
         "backups' prices the same as the primary's; nothing wasted"),
    ],
)  # fmt: skip
def test_a_fallback_rate_alert_says_what_the_backups_cost_against_the_primary(
    con, price, cache_loss, rewarm, wasted, said
):
    """Never as good news ("saved"), and with the lost cache beside the price difference,
    the parts adding up to the whole as shown."""
    for ago in range(5):
        rollup(con, _minute(ago), requests=10, answered_by_fallback=5,
               fallback_premium_usd=(price + cache_loss) / 5, cache_loss_usd=cache_loss / 5,
               rewarm_usd=rewarm / 5, wasted_usd=wasted / 5)  # fmt: skip
    [obs] = _fired(con, _default("fallback-rate-5m"))
    assert obs.summary.endswith(f"(threshold 10 %); {said}")
    assert "-$" not in obs.summary and "$-" not in obs.summary and "saved" not in obs.summary
    assert obs.cost_usd == price + cache_loss + rewarm + wasted


def test_fallback_rate_stays_quiet_below_the_minimum_requests(con):
    rollup(con, _minute(0), requests=19, answered_by_fallback=19)
    assert _fired(con, _default("fallback-rate-5m")) == []


def test_minutes_before_the_window_do_not_count(con):
    rollup(con, _minute(8), requests=100, answered_by_fallback=100)
    rollup(con, _minute(1), requests=100)
    assert _fired(con, _default("fallback-rate-5m")) == []


def test_a_rule_limited_to_routes_sees_only_them(con):
    rollup(con, _minute(0), route="billing", requests=50, answered_by_fallback=50)
    rule = Rule("r", "fallback_rate", "warning", 10, 300, routes=("support",))
    assert _fired(con, rule) == []


def test_requests_failing_everywhere_fire_the_unavailable_rule(con):
    rollup(con, _minute(2), requests=30, unavailable=1)
    [obs] = _fired(con, _default("all-unavailable"))
    assert obs.value == 1 and "every provider unavailable" in obs.summary


def test_fallback_premium_is_judged_per_hour_against_its_budget(con):
    rule = _default("fallback-premium")  # $10/h over 1 h
    rollup(con, _minute(30), fallback_premium_usd=6, rewarm_usd=3)
    assert _fired(con, rule) == []
    rollup(con, _minute(10), fallback_premium_usd=2)
    [obs] = _fired(con, rule)
    assert obs.subject == "all routes" and obs.value == pytest.approx(11.0)


def test_spend_per_hour_scales_a_short_window_to_an_hour(con):
    rule = Rule("spend", "spend", "warning", 100, 600)  # $100/h measured over 10 min
    rollup(con, _minute(3), cost_usd=20)  # $20 in 10 min = $120/h
    [obs] = _fired(con, rule)
    assert obs.value == pytest.approx(120.0)


def test_p99_latency_is_of_whole_requests_across_their_attempts(con):
    rule = Rule("slow", "latency_p99", "warning", 5_000, 300, min_requests=1)
    start = NOW - timedelta(minutes=1)
    attempt(con, start, request_id="a", outcome="error", served=False, latency_ms=4_000)
    attempt(con, start + timedelta(seconds=4), request_id="a", attempt_number=2, latency_ms=2_000)
    [obs] = _fired(con, rule)
    assert obs.value == pytest.approx(6_000)


def test_request_faults_fire_only_as_a_spike_over_the_usual_rate(con):
    rule = _default("request-fault-spike")  # > 5 %, ≥ 5 of them, ≥ 3× the last day's rate
    for hours in range(1, 24):
        rollup(con, _minute(60 * hours), requests=100, request_faults=8)  # usually 8 %
    rollup(con, _minute(3), requests=100, request_faults=20)  # 20 % is only 2.5× usual
    assert _fired(con, rule) == []
    rollup(con, _minute(2), requests=0, request_faults=10)  # 30 %: 3.75×
    [obs] = _fired(con, rule)
    assert obs.value == pytest.approx(30.0) and "provider's API" in obs.summary


def test_a_credential_failure_fires_until_that_target_answers_again(con):
    rule = _default("credential")
    attempt(con, NOW - timedelta(minutes=30), request_id="ok")
    attempt(con, NOW - timedelta(minutes=5), request_id="bad", outcome="error",
            served=False, fault_kind="account", error_class="authentication",
            http_status=401)  # fmt: skip
    attempt(con, NOW - timedelta(minutes=1), request_id="other", target="claude/other")
    ctx = Context(con, NOW, NOW_SPOOL, key_envs={"claude": "ANTHROPIC_API_KEY"})
    [obs] = evaluate([rule], ctx)[rule.name]
    assert obs.subject == "claude/m (ANTHROPIC_API_KEY)" and obs.about == ("claude/m",)
    assert "refused the key ANTHROPIC_API_KEY: authentication (401)" in obs.summary
    assert "Still answering with it: claude/other." in obs.summary
    attempt(con, NOW - timedelta(seconds=30), request_id="ok-again")
    assert evaluate([rule], ctx)[rule.name] == [], "the same target answered again"


def test_without_the_configuration_the_subject_is_the_target_alone(con):
    attempt(con, NOW - timedelta(minutes=5), outcome="error", served=False,
            fault_kind="account", error_class="authentication", http_status=401)  # fmt: skip
    [obs] = _fired(con, _default("credential"))
    assert obs.subject == "claude/m" and "refused its key" in obs.summary


def test_a_missing_model_is_that_targets_problem_and_grouped_with_no_key(con):
    attempt(con, NOW - timedelta(minutes=5), request_id="bad", target="claude/gone",
            outcome="error", served=False, fault_kind="account",
            error_class="model_not_found", http_status=404)  # fmt: skip
    attempt(con, NOW - timedelta(minutes=1), request_id="ok", target="claude/other")
    [obs] = _fired(con, _default("credential"))
    assert (obs.subject, obs.group) == ("claude/gone", "")
    assert "does not know the model" in obs.summary


def test_a_drills_invalid_key_is_never_a_credential_alert(con):
    attempt(con, NOW - timedelta(minutes=2), outcome="error", served=False, fault_kind="drill",
            error_class="drill_invalid_key", http_status=401)  # fmt: skip
    assert _fired(con, _default("credential")) == []


def test_a_breaker_open_longer_than_the_threshold_fires_until_it_closes(con):
    rule = _default("breaker-open")  # 5 min
    attempt(con, NOW - timedelta(minutes=1))  # the process is alive
    breaker_event(con, NOW - timedelta(minutes=7, seconds=30), "claude/m", "closed", "open",
                  open_until=NOW - timedelta(minutes=6))  # fmt: skip
    breaker_event(con, NOW - timedelta(minutes=6), "claude/m", "open", "half_open")
    breaker_event(con, NOW - timedelta(minutes=6), "claude/m", "half_open", "open",
                  event_id="reopen", open_until=NOW + timedelta(minutes=1))  # fmt: skip
    [obs] = _fired(con, rule)
    assert obs.subject == "claude/m" and obs.value == pytest.approx(7.5), "since it opened"
    breaker_event(con, NOW - timedelta(seconds=10), "claude/m", "open", "closed")
    assert _fired(con, rule) == []


def test_a_breaker_a_drill_holds_open_is_no_alert_and_after_it_counts_from_its_end(con):
    rule = _default("breaker-open")  # 5 min
    attempt(con, NOW - timedelta(minutes=1))  # the process is alive
    breaker_event(con, NOW - timedelta(minutes=20), "claude/m", "closed", "open", reason="drill",
                  open_until=NOW + timedelta(minutes=1))  # fmt: skip
    assert _fired(con, rule) == [], "held open by the drill"
    breaker_event(con, NOW - timedelta(minutes=6), "claude/m", "open", "half_open")
    later = NOW + timedelta(minutes=1)
    breaker_event(con, NOW - timedelta(minutes=6), "claude/m", "half_open", "open",
                  event_id="probe", reason="probe", open_until=later)  # fmt: skip
    [obs] = _fired(con, rule)
    assert obs.value == pytest.approx(6.0), "since the drill let it probe, not since it began"


def test_a_breaker_whose_hold_ran_out_is_no_alert_at_the_moment_it_closes(con):
    """A refused key holds its breaker open for exactly the 5-minute threshold: when the hold
    runs out the breaker is about to probe and close, so nothing fires then."""
    rule = _default("breaker-open")  # 5 min
    attempt(con, NOW - timedelta(minutes=1))  # the process is alive
    breaker_event(con, NOW - timedelta(minutes=5), "claude/m", "closed", "open", reason="account",
                  open_until=NOW)  # fmt: skip
    assert _fired(con, rule) == []
    breaker_event(con, NOW, "claude/m", "open", "half_open")
    assert _fired(con, rule) == [], "probing: not held open"


def test_a_breaker_of_a_process_that_is_gone_no_longer_counts(con):
    breaker_event(con, NOW - timedelta(minutes=40), "claude/m", "closed", "open")
    assert _fired(con, _default("breaker-open")) == []


def test_spool_files_waiting_too_long_fire_telemetry_lag(con, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    old = spool / "w-1.parquet"
    old.write_bytes(b"x")
    (spool / ".w-2.tmp").write_bytes(b"x")  # being written: not waiting
    os.utime(old, (time.time() - 300, time.time() - 300))
    [obs] = _fired(con, _default("telemetry-lag"), spool=spool)
    assert obs.value == pytest.approx(300, abs=5)
    old.unlink()
    assert _fired(con, _default("telemetry-lag"), spool=spool) == []


def test_a_rule_that_fails_to_evaluate_is_left_out_not_reported_clear(con):
    con.execute("DROP TABLE breaker_events")
    results = evaluate([_default("breaker-open"), _default("all-unavailable")],
                       Context(con, NOW, NOW_SPOOL))  # fmt: skip
    assert set(results) == {"all-unavailable"}
