"""The Live page's figures, health lines and timelines, from exact frames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from dashboard import charts
from dashboard import metrics as figures

NOW = datetime(2026, 11, 23, 12, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HAIKU, SONNET, GPT = "claude/claude-haiku-4-5", "claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"


def _rollup(minutes_ago: int, **figures_) -> dict:
    row = dict.fromkeys(
        ["requests", "answered", "answered_by_fallback", "request_faults", "unavailable",
         "broken_streams", "abandoned", "attempts", "failed_attempts", "provider_faults",
         "ambiguous_faults", "rate_limited", "account_faults", "cost_usd", "fallback_premium_usd",
         "rewarm_usd", "unpriced_attempts"], 0)  # fmt: skip
    bucket = pd.Timestamp(NOW.replace(second=0) - timedelta(minutes=minutes_ago))
    row.update(bucket=bucket, route="support", provider="claude", target="claude/m")
    row["latency_p99_ms"] = None
    row.update(figures_)
    return row


def _events(*rows: tuple) -> pd.DataFrame:
    """Breaker transitions of process ("h", 1): (target, at, from, to, open_until[, reason])."""
    return pd.DataFrame(
        [
            {
                "target": t,
                "host": "h",
                "process_id": 1,
                "occurred_at": pd.Timestamp(at),
                "seq": i,
                "from_status": old,
                "to_status": new,
                "reason": rest[0] if rest else "failures",
                "open_until": until,
            }
            for i, (t, at, old, new, until, *rest) in enumerate(rows)
        ]
    )


def _failures(*rows: tuple) -> pd.DataFrame:
    """failures_by_target rows: (target, fault_kind, error_class, http_status, attempts)."""
    columns = ["target", "fault_kind", "error_class", "http_status", "attempts"]
    return pd.DataFrame(list(rows), columns=columns)


def _health(rollups: list[dict], events: pd.DataFrame | None = None, failures=(), **kw):
    breakers = figures.breaker_states(events if events is not None else _events(), {("h", 1)},
                                      NOW)  # fmt: skip
    frame = figures.target_health(pd.DataFrame(rollups), breakers, _failures(*failures), NOW, **kw)
    return {r.target: (r.status, r.summary) for r in frame.itertuples()}


# --- the last 5 minutes -----------------------------------------------------------------------


def test_the_last_5_min_run_from_a_minute_boundary_to_the_datas_time():
    span = figures.span_to(NOW, figures.RECENT)
    assert (span.start, span.end) == (NOW.replace(second=0) - 5 * MINUTE, NOW)
    assert figures.duration(span.length) == "5 min 30 s"
    week = figures.span_to(NOW, timedelta(days=7), timedelta(hours=1))
    assert week.start == NOW.replace(minute=0, second=0) - timedelta(days=7)


def test_requests_per_minute_are_over_the_time_elapsed_never_the_minute_not_yet_happened():
    """60, 60, 90, 30, 60 requests in five whole minutes, then 10 in the 30 s of the current."""
    counts = {5: 60, 4: 60, 3: 90, 2: 30, 1: 60, 0: 10}
    rollups = pd.DataFrame(
        [_rollup(ago, requests=n, answered=n, cost_usd=n / 1000) for ago, n in counts.items()]
    )
    span = figures.span_to(NOW, figures.RECENT)
    k = figures.kpis(span.of(rollups), None, span.length)
    assert k.requests == 310 and k.requests_per_min == 310 / 5.5
    assert k.cost_per_hour == pytest.approx(0.310 / 5.5 * 60)
    older = figures.kpis(span.of(pd.DataFrame([_rollup(6, requests=99)])), None, span.length)
    assert older.requests == 0, "a minute before the span is not in it"


def test_headline_figures_follow_the_definitions():
    rollups = pd.DataFrame([
        _rollup(1, requests=60, answered=55, answered_by_fallback=6, request_faults=3,
                abandoned=2, cost_usd=1.2, fallback_premium_usd=0.3, rewarm_usd=0.1),
    ])  # fmt: skip
    k = figures.kpis(rollups, 1234.0, timedelta(minutes=15))
    assert k.requests_per_min == 4.0
    assert k.availability == 55 / (60 - 3 - 2)
    assert k.fallback_rate == 0.1
    assert k.cost_per_hour == 1.2 * 4 and abs(k.premium_per_hour - 0.4 * 4) < 1e-12
    assert k.latency_p99_ms == 1234.0


# --- health per target ------------------------------------------------------------------------


def test_a_model_whose_key_was_revoked_is_down_with_its_error_and_its_breakers_next_probe():
    """One of claude's two models fails: the other stays healthy, and each says so."""
    opened = NOW - timedelta(minutes=3)
    events = _events((HAIKU, opened, "closed", "open", NOW + timedelta(minutes=4), "account"))
    health = _health(
        [_rollup(1, target=HAIKU, attempts=12, failed_attempts=12, account_faults=12),
         _rollup(1, target=SONNET, attempts=50)],
        events, [(HAIKU, "account", "authentication", 401, 12)],
    )  # fmt: skip
    assert health[HAIKU] == (
        "down",
        "last 5 min: 12 of 12 attempts failed (100%: authentication 401) · breaker open "
        "(account) for 3 min, next probe in 4 min",
    )
    assert health[SONNET] == ("healthy", "last 5 min: none of 50 attempts failed")


def test_a_little_failing_is_degraded_and_half_failing_is_down():
    health = _health(
        [_rollup(1, target=HAIKU, attempts=10, provider_faults=5),
         _rollup(1, target=GPT, provider="gpt", attempts=100, rate_limited=6),
         _rollup(1, target=SONNET, attempts=100, provider_faults=1)],
        failures=[(GPT, "rate_limit", "rate_limit", 429, 6), (GPT, "request", "invalid", 400, 9)],
    )  # fmt: skip
    assert list(health) == [HAIKU, GPT, SONNET], "the worst first"
    assert {t: s for t, (s, _) in health.items()} == {
        HAIKU: "down",
        GPT: "degraded",
        SONNET: "healthy",
    }
    assert health[GPT][1] == "last 5 min: 6 of 100 attempts failed (6%: rate_limit 429)", (
        "400s aside"
    )


def test_a_primary_its_routes_requests_skip_is_degraded_though_its_attempts_barely_fail():
    """A 429 cools the target until its reset: the requests meanwhile go straight to the
    backup and leave no attempt on the primary. A drill's fallbacks are not held against it."""
    rollups = [
        _rollup(1, route="classify", target=GPT, provider="gpt", requests=80, answered=80,
                attempts=100, rate_limited=2),
        _rollup(1, route="classify", target=HAIKU, requests=20, answered=20,
                answered_by_fallback=20, attempts=20),
    ]  # fmt: skip
    health = _health(rollups, failures=[(GPT, "rate_limit", "rate_limit", 429, 2)],
                     primaries={"classify": GPT})  # fmt: skip
    assert health[GPT] == (
        "degraded",
        "last 5 min: 2 of 100 attempts failed (2%: rate_limit 429), 20 of 100 requests of "
        "classify went to backups",
    )
    assert health[HAIKU] == ("healthy", "last 5 min: none of 20 attempts failed")
    rollups[1].update(requests=120, answered=120, answered_by_fallback=120)
    recovered = _health(rollups, primaries={"classify": GPT})
    assert recovered[GPT][0] == "degraded", "120 of 200 went to backups, yet it answers now"
    rollups[1]["drill_fallbacks"] = 120
    drilled = _health(rollups, primaries={"classify": GPT})
    assert drilled[GPT] == ("healthy", "last 5 min: 2 of 100 attempts failed (2%)")


def test_a_breaker_holding_all_traffic_back_is_down_and_a_probing_one_degraded():
    """From the events: each state counts from the change into it, and a half-open breaker
    claims no probe (the events cannot say whether one is out)."""
    events = _events(
        (HAIKU, NOW - timedelta(seconds=50), "closed", "open", NOW + timedelta(seconds=15)),
        (SONNET, NOW - timedelta(minutes=2), "closed", "open", NOW - timedelta(seconds=30)),
        (SONNET, NOW - timedelta(seconds=30), "open", "half_open", None, None),
        (GPT, NOW - timedelta(minutes=9), "closed", "open", NOW - timedelta(seconds=5)),
    )
    health = _health([_rollup(1, target=HAIKU, attempts=0)], events)
    assert health[HAIKU] == (
        "down",
        "last 5 min: no attempts · breaker open (failures) for 50 s, next probe in 15 s",
    )
    assert health[SONNET] == ("degraded", "last 5 min: no attempts · breaker half-open for 30 s")
    assert health[GPT][1].endswith("for 9 min, probe due"), "its time has come: the next request"


def _told(*rows: tuple) -> pd.DataFrame:
    """Breakers as the gateway's /v1/status tells them: (target, status, reason, open
    remaining s, probing, opened s ago)."""
    columns = ["target", "status", "reason", "open_remaining_s", "probe_due", "probing",
               "opened_s_ago"]  # fmt: skip
    return pd.DataFrame(
        [(t, st, r, left, left == 0.0, probing, ago) for t, st, r, left, probing, ago in rows],
        columns=columns,
    ).astype({"probing": object})


def test_the_gateways_breakers_are_told_as_of_their_reading_with_the_seconds_left():
    """The gateway says open, 17 s left, reopened 13 s ago by a failed probe: so does the
    page, however long the outage has lasted; a half-open breaker says whether its probe is
    out; a closed one says nothing."""
    read_at = NOW + timedelta(seconds=2)  # read after the data's time: its own clock
    told = figures.told_breakers(
        _told(
            (SONNET, "open", "probe", 17.2, False, 13.0),
            (HAIKU, "half_open", "failures", None, True, 31.0),
            (GPT, "half_open", "failures", None, False, 45.0),
            ("claude/m", "closed", None, None, False, None),
        ),
        read_at,
    )
    assert set(told["at"]) == {read_at}
    health = figures.target_health(pd.DataFrame([_rollup(1, target=SONNET, attempts=0)]), told,
                                   _failures(), NOW)  # fmt: skip
    said = {r.target: (r.status, r.summary) for r in health.itertuples()}
    assert said[SONNET] == (
        "down",
        "last 5 min: no attempts · breaker open (probe failed) for 13 s, next probe in 17 s",
    )
    assert said[HAIKU] == (
        "degraded",
        "last 5 min: no attempts · breaker half-open for 31 s, probe under way",
    )
    assert said[GPT][1].endswith("breaker half-open for 45 s, the next request probes")
    assert said["claude/m"] == ("idle", "last 5 min: no attempts")


def test_a_breaker_of_a_process_gone_quiet_is_left_out():
    events = _events(("claude/m", NOW - timedelta(minutes=30), "closed", "open", None))
    assert figures.breaker_states(events, set(), NOW).empty


def test_a_target_seen_in_the_window_but_not_called_now_is_idle_and_a_drill_is_named():
    drills = pd.DataFrame([
        {"target": GPT, "route": "support", "ends_at": NOW + 6 * MINUTE, "ended_at": None},
        {"target": SONNET, "route": "support", "ends_at": NOW - MINUTE, "ended_at": NOW - MINUTE},
    ])  # fmt: skip
    health = _health([_rollup(1, target=SONNET, attempts=4)], known={GPT}, drills=drills)
    assert health == {
        GPT: ("idle", "last 5 min: no attempts · drill on support, 6 min left"),
        SONNET: ("healthy", "last 5 min: none of 4 attempts failed"),
    }


# --- routes and who serves them ---------------------------------------------------------------


def test_each_route_says_who_answered_it_in_whole_percents_that_add_up_to_100():
    rollups = pd.DataFrame([
        _rollup(1, target=HAIKU, answered=20), _rollup(2, target=HAIKU, answered=3),
        _rollup(1, target=SONNET, answered=2),
        *(_rollup(1, route="classify", target=t, answered=1) for t in (HAIKU, SONNET, GPT)),
        _rollup(1, route="summarize", target=GPT, answered=0, unavailable=4),
    ])  # fmt: skip
    shares = figures.serving_shares(rollups)
    assert figures.serving_text(shares, "support") == f"{HAIKU} 92%, {SONNET} 8%"
    assert figures.serving_text(shares, "classify") == f"{HAIKU} 34%, {SONNET} 33%, {GPT} 33%"
    assert figures.serving_text(shares, "summarize") == "no answers"
    assert shares.groupby("route")["percent"].sum().eq(100).all()


def test_a_target_that_answered_a_few_is_never_shown_at_0_or_the_others_at_100_percent():
    rollups = pd.DataFrame([_rollup(1, target=GPT, answered=340), _rollup(1, target=HAIKU,
                            answered=1)])  # fmt: skip
    assert figures.serving_text(figures.serving_shares(rollups), "support") == (
        f"{GPT} >99%, {HAIKU} <1%"
    )
    health = _health([_rollup(1, target=GPT, attempts=341, ambiguous_faults=1)],
                     failures=[(GPT, "ambiguous", "read_timeout", None, 1)])  # fmt: skip
    assert health[GPT] == ("healthy", "last 5 min: 1 of 341 attempts failed (<1%: read_timeout)")


def test_who_serves_now_is_said_beside_the_last_5_min_each_naming_its_window():
    """35 s into an outage: the five minutes are still mostly the primary's, the last minute
    is the backup's alone; once the two agree, one share names both windows."""
    five = figures.serving_shares(pd.DataFrame([
        _rollup(1, target=SONNET, answered=48), _rollup(0, target=HAIKU, answered=6),
    ]))  # fmt: skip
    now = figures.serving_shares(pd.DataFrame([{"route": "support", "target": HAIKU,
                                                "answered": 6}]))  # fmt: skip
    assert figures.serving_line(now, five, "support") == (
        f"served by · now (last min): {HAIKU} 100% · last 5 min: {SONNET} 89%, {HAIKU} 11%"
    )
    assert figures.serving_line(now, now, "support") == (
        f"served by {HAIKU} 100% · now (last min) and last 5 min"
    )
    nothing = figures.serving_shares(pd.DataFrame(columns=["route", "target", "answered"]))
    assert figures.serving_line(nothing, five, "support").startswith(
        "served by · now (last min): no answers · last 5 min: "
    )


@pytest.mark.parametrize(
    "counts", [[1, 1, 1], [2, 1], [999, 1], [1, 1, 1, 1, 1, 1, 1], [7], [3, 3, 3, 1]]
)
def test_whole_percents_always_add_up_to_100(counts):
    percents = figures.whole_percents(counts)
    assert sum(percents) == 100
    exact = [100 * c / sum(counts) for c in counts]
    assert all(abs(p - e) < 1 for p, e in zip(percents, exact, strict=True))


def test_routes_are_degraded_when_backups_carry_traffic_down_when_requests_fail_direct_last():
    rollups = pd.DataFrame([
        _rollup(1, requests=100, answered=100, answered_by_fallback=40),
        _rollup(2, route="classify", requests=10, answered=4, unavailable=6),
        _rollup(1, route="direct", requests=3, answered=3),
        _rollup(1, route="summarize", requests=10, answered=10),
    ])  # fmt: skip
    status = figures.route_status(rollups)
    assert list(zip(status["route"], status["status"], strict=True)) == [
        ("classify", "down"),
        ("summarize", "healthy"),
        ("support", "degraded"),
        ("direct", "healthy"),
    ]


# --- failures, markers, money -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault_kind", "error_class", "http_status", "shown"),
    [
        ("rate_limit", "rate_limit", 429, "429"),
        ("account", "quota", 429, "429"),
        ("provider", "overloaded", 529, "529"),
        ("provider", "overloaded", None, "529"),
        ("provider", "unavailable", 503, "5xx"),
        ("provider", "timeout", 504, "timeout"),
        ("ambiguous", "read_timeout", None, "timeout"),
        ("account", "authentication", 401, "401/403"),
        ("account", "permission", 403, "401/403"),
        ("account", "model_not_found", 404, "other"),
        ("provider", "connect", None, "other"),
        ("request", "invalid_request", 400, "request (4xx)"),
        ("drill", "drill", None, "drill"),
    ],
)
def test_failed_attempts_are_grouped_in_the_classes_people_name(
    fault_kind, error_class, http_status, shown
):
    assert figures.failure_class(fault_kind, error_class, http_status) == shown


def test_failures_are_summed_per_minute_and_class_in_the_legends_order():
    t0 = pd.Timestamp(NOW.replace(second=0))
    frame = pd.DataFrame(
        [(t0, "provider", "unavailable", 502, 2), (t0, "provider", "server_error", 500, 1),
         (t0, "rate_limit", "rate_limit", 429, 4), (t0 + MINUTE, "ambiguous", "reset", None, 1)],
        columns=["bucket", "fault_kind", "error_class", "http_status", "attempts"],
    )  # fmt: skip
    summed = figures.failures_by_class(frame)
    assert list(summed.itertuples(index=False, name=None)) == [
        (t0, "429", 4), (t0, "5xx", 3), (t0 + MINUTE, "other", 1),
    ]  # fmt: skip


def _incident(**fields) -> SimpleNamespace:
    row = {"subject": SONNET, "scope": "target", "routes": "support", "requests_affected": 120,
           "answered_by_fallback": 118, "failed": 2, "extra_cost_usd": -0.1075,
           "top_error": "overloaded (529) ×40", "started_at": NOW - 3 * MINUTE,
           "ended_at": None, **fields}  # fmt: skip
    return SimpleNamespace(**row)


def test_an_incident_whose_backup_was_cheaper_says_what_it_saved():
    assert figures.incident_summary(_incident(family="availability")) == (
        f"{SONNET} (availability) on support: 120 requests affected, 118 answered by "
        "fallback, 2 failed; extra cost: saved $0.11. Top error: overloaded (529) ×40"
    )
    dearer = figures.incident_summary(_incident(family="account", extra_cost_usd=0.0021))
    assert "extra cost: cost $0.0021 more" in dearer, "to two significant digits below a cent"


def test_an_incident_from_before_fault_families_reads_its_scope():
    older = figures.incident_summary(_incident(scope="provider", routes="", top_error=None))
    assert older.startswith(f"{SONNET} (provider): ") and older.endswith("Top error: none recorded")


def test_the_timelines_mark_incidents_alerts_and_drills_an_open_one_until_now():
    incidents = pd.DataFrame([vars(_incident(family="availability"))])
    alerts = pd.DataFrame([{"rule": "fallback-rate-5m", "subject": "support",
                            "fired_at": NOW - 2 * MINUTE,
                            "resolved_at": NOW - MINUTE}])  # fmt: skip
    drills = pd.DataFrame([{"target": GPT, "route": "support", "started_at": NOW - 9 * MINUTE,
                            "ended_at": None}])  # fmt: skip
    markers = figures.timeline_markers(incidents, alerts, drills, NOW)
    assert list(markers[["kind", "label", "ongoing"]].itertuples(index=False, name=None)) == [
        ("drill", f"drill: {GPT} on support", True),
        ("incident", f"incident: {SONNET} (availability)", True),
        ("alert", "alert: fallback-rate-5m (support)", False),
    ]
    assert markers["end"].tolist()[:2] == [pd.Timestamp(NOW)] * 2


# --- the timelines ----------------------------------------------------------------------------


def _timeline(tz: str = "UTC", markers: pd.DataFrame | None = None) -> charts.Timeline:
    """The last 10 minutes, counting from the current minute."""
    now = NOW.replace(second=0)
    empty = pd.DataFrame(columns=["kind", "label", "start", "end", "ongoing"])
    return charts.Timeline(now - 10 * MINUTE, now + MINUTE, now, ZoneInfo(tz),
                           empty if markers is None else markers)  # fmt: skip


def _buckets(*values: float) -> list[pd.Timestamp]:
    now = pd.Timestamp(NOW.replace(second=0))
    return [now - (len(values) - 1 - i) * MINUTE for i in range(len(values))]


def test_the_minute_still_counting_is_a_lighter_bar_and_each_target_keeps_its_colour():
    frame = pd.DataFrame({"bucket": _buckets(1, 1, 1) * 2, "requests": [9, 9, 2, 1, 1, 0],
                          "served by": [HAIKU] * 3 + [GPT] * 3})  # fmt: skip
    fig = charts.timeline_bars(frame, "requests", "served by", charts.colours([HAIKU, GPT]),
                               "Requests", "requests", _timeline("Europe/Berlin"))  # fmt: skip
    by_name = {trace.name: trace for trace in fig.data}
    assert list(by_name[HAIKU].marker.opacity) == [1.0, 1.0, charts.PARTIAL_OPACITY]
    assert by_name[HAIKU].marker.color == charts.colour_of(HAIKU)
    assert fig.layout.xaxis.title.text == "time (Europe/Berlin)"
    assert [a.text for a in fig.layout.annotations] == ["lighter from 13:00: still counting"]


def test_a_lines_segment_into_the_minute_still_counting_is_lighter_and_money_reads_minus_dollar():
    frame = pd.DataFrame({"bucket": _buckets(1, 1, 1), "usd": [0.5, -0.0021, 0.1],
                          "series": "fallback premium"})  # fmt: skip
    fig = charts.timeline_lines(frame, "usd", "series", "Cost", "USD", _timeline(), unit="usd")
    done, counting = fig.data
    assert list(done.y) == [0.5, -0.0021] and list(done.customdata) == ["$0.50", "-$0.0021"]
    assert fig.layout.yaxis.tickformat == "$,.2f", "ticks a tenth of $0.50 apart read in cents"
    assert list(counting.y) == [-0.0021, 0.1], "from the last complete point on"
    assert counting.opacity == charts.PARTIAL_OPACITY and not counting.showlegend
    assert fig.layout.xaxis.title.text == "time (UTC)"


def test_a_timeline_of_one_failure_class_still_has_a_legend_naming_it():
    frame = pd.DataFrame({"bucket": _buckets(1, 1), "attempts": [7, 2], "failure": "529"})
    fig = charts.timeline_bars(frame, "attempts", "failure", charts.FAILURE_COLOURS,
                               "Failed attempts by class", "attempts", _timeline())  # fmt: skip
    assert fig.layout.showlegend is True and [trace.name for trace in fig.data] == ["529"]


def test_incidents_and_drills_are_shaded_and_alerts_drawn_where_they_fired_and_resolved():
    now = pd.Timestamp(NOW)
    markers = pd.DataFrame([
        ("incident", "incident: x", now - 5 * MINUTE, now, True),
        ("alert", "alert: y", now - 4 * MINUTE, now - 2 * MINUTE, False),
        ("alert", "alert: z", now - 3 * MINUTE, now, True),
    ], columns=["kind", "label", "start", "end", "ongoing"])  # fmt: skip
    frame = pd.DataFrame({"bucket": _buckets(1), "ms": [5.0], "series": "p50"})
    fig = charts.timeline_lines(frame, "ms", "series", "Latency", "ms", _timeline(markers=markers))
    kinds = [(s.type, s.line.color if s.type == "line" else s.fillcolor) for s in fig.layout.shapes]
    assert kinds == [
        ("rect", charts.INCIDENT),
        ("line", charts.FIRED),
        ("line", charts.RESOLVED),
        ("line", charts.FIRED),
    ]
