"""Incident windows from exact minute figures: per target and fault family, merging within the
settle time, noise, ongoing, held minutes, drills."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers.store_rows import rollup

from engine.alerts.incidents import IncidentPolicy, detect, refresh_incidents
from engine.store.db import open_store

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=2)
SETTLE = IncidentPolicy().settle


def _m(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    con.execute(
        "INSERT INTO route_primaries VALUES "
        "('support', 'claude/m', 'anthropic', 'm', $t, 'claude')",
        {"t": T0},
    )
    yield con
    con.close()


def _bad(con, minute: int, faults: int = 10, attempts: int = 10, **keys) -> None:
    rollup(con, _m(minute), attempts=attempts, provider_faults=faults, **keys)


def _fell_back(con, minute: int, requests: int = 5) -> None:
    """support's requests that minute all answered by its backup."""
    rollup(con, _m(minute), target="gpt/x", provider="gpt", model="x", requests=requests,
           answered_by_fallback=requests)  # fmt: skip


def _incidents(con) -> list[tuple]:
    return con.execute(
        "SELECT subject, family, started_at, ended_at FROM incidents ORDER BY started_at, family"
    ).fetchall()


def test_faults_less_than_the_settle_time_apart_are_one_window(con):
    for minute in (0, 1, 2, 4):  # one minute without faults inside
        _bad(con, minute)
    for minute in range(5, 20):
        rollup(con, _m(minute), attempts=10, requests=10, answered=10)
    _bad(con, 20)  # after 15 healthy minutes: another incident
    _bad(con, 21)
    windows = detect(con, LATER)
    assert [(w.target, w.family, w.start) for w in windows] == [
        ("claude/m", "availability", _m(0)),
        ("claude/m", "availability", _m(20)),
    ]
    refresh_incidents(con, LATER)
    # No attempts to time the last fault by: the end of its minute, plus the settle time.
    assert [i[3] for i in _incidents(con)] == [_m(5) + SETTLE, _m(22) + SETTLE]


def test_the_settle_time_comes_from_the_policy(con):
    for minute in (0, 4):
        _bad(con, minute)
    for minute in (1, 2, 3):
        rollup(con, _m(minute), attempts=10, requests=10, answered=10)
    assert len(detect(con, LATER)) == 2
    assert len(detect(con, LATER, IncidentPolicy(settle=timedelta(minutes=5)))) == 1


def test_a_few_faults_are_noise_not_an_incident(con):
    _bad(con, 0, faults=2, attempts=2)
    assert detect(con, LATER) == []


def test_minutes_below_the_fault_rate_do_not_count(con):
    for minute in range(10):
        _bad(con, minute, faults=1, attempts=10)  # 10 % < 20 %
    assert detect(con, LATER) == []


def test_two_targets_failing_at_once_are_two_incidents(con):
    for minute in range(3):
        _bad(con, minute)
        _bad(con, minute, target="claude/haiku", model="haiku")
    assert {(w.target, w.family) for w in detect(con, LATER)} == {
        ("claude/m", "availability"),
        ("claude/haiku", "availability"),
    }


def test_different_fault_families_of_one_target_never_merge(con):
    for minute in range(3):
        rollup(con, _m(minute), attempts=10, provider_faults=5, rate_limited=5)
    for minute in range(3, 6):
        rollup(con, _m(minute), attempts=4, account_faults=4)
    assert [(w.family, w.start) for w in detect(con, LATER)] == [
        ("availability", _m(0)),
        ("rate_limit", _m(0)),
        ("account", _m(3)),
    ]


def test_an_incident_is_ongoing_until_its_settle_time_has_passed(con):
    for minute in range(3):
        _bad(con, minute)
    refresh_incidents(con, _m(4))
    assert _incidents(con)[0][3] is None
    refresh_incidents(con, _m(3) + SETTLE)
    assert _incidents(con)[0][3] == _m(3) + SETTLE


def test_its_routes_falling_back_keep_a_target_held_out_in_its_incident(con):
    """An expired key: the breaker holds the primary back, so it gets a probe every few
    minutes; the fallbacks of the route it is primary for keep its incident whole, and last
    as long as they do."""
    for minute in range(12):
        if minute % 6 == 0:
            rollup(con, _m(minute), attempts=1, account_faults=1)  # the probe
        _fell_back(con, minute)
    [window] = detect(con, LATER)
    assert (window.target, window.family, window.start) == ("claude/m", "account", _m(0))
    refresh_incidents(con, LATER)
    assert _incidents(con)[0][3] == _m(12), "the end of the last minute its route fell back"


def test_fallbacks_alone_never_start_an_incident(con):
    for minute in range(5):
        _fell_back(con, minute, requests=10)
    assert detect(con, LATER) == []


def test_the_held_minutes_continue_the_family_whose_faults_came_last(con):
    rollup(con, _m(0), attempts=10, rate_limited=10)
    rollup(con, _m(1), attempts=3, account_faults=3)
    for minute in range(1, 8):
        _fell_back(con, minute)
    ends = {w.family: w.held_until for w in detect(con, LATER)}
    assert ends == {"rate_limit": _m(0), "account": _m(8)}


def test_minutes_a_drill_held_the_target_down_do_not_extend_its_incident(con):
    for minute in range(2):
        _bad(con, minute)
        _fell_back(con, minute)
    for minute in range(2, 10):
        _fell_back(con, minute)  # the drill's fallbacks, and any failure it causes
    con.execute("INSERT INTO drills (drill_id, route, target, started_at, ends_at, requested_by, "
                "status) VALUES ('d', 'support', 'claude/m', $lo, $hi, 't', 'running')",
                {"lo": _m(2), "hi": _m(10)})  # fmt: skip
    [window] = detect(con, LATER)
    assert window.held_until == _m(2)


def test_recomputing_keeps_an_incidents_id(con):
    for minute in range(4):
        _bad(con, minute)
    refresh_incidents(con, LATER)
    first = con.execute("SELECT incident_id FROM incidents").fetchall()
    refresh_incidents(con, LATER + timedelta(minutes=1))
    assert con.execute("SELECT incident_id FROM incidents").fetchall() == first


def test_a_settled_incident_is_kept_unless_late_attempts_arrive(con):
    for minute in range(4):
        _bad(con, minute)
    refresh_incidents(con, LATER)
    con.execute("UPDATE incidents SET top_error = 'as stored'")
    refresh_incidents(con, LATER + timedelta(minutes=1))
    assert con.execute("SELECT top_error FROM incidents").fetchall() == [("as stored",)]
    refresh_incidents(con, LATER + timedelta(minutes=2), full=True)
    assert con.execute("SELECT top_error FROM incidents").fetchall() == [("",)]


def test_an_outage_through_a_lull_in_traffic_stays_one_incident(con):
    for minute in (0, 1, 4, 5):  # nothing at all was asked at minutes 2 and 3
        _bad(con, minute)
    assert [(w.start, w.last_fault) for w in detect(con, LATER)] == [(_m(0), _m(5))]


def test_quiet_counts_only_so_long_and_traffic_that_went_well_ends_it(con):
    for minute in (0, 1, 30, 31):  # quiet for longer than QUIET
        _bad(con, minute)
    for minute in (50, 51):
        _bad(con, minute)
    for minute in range(52, 55):
        rollup(con, _m(minute), attempts=10, requests=10, answered=10)  # it answered again
    for minute in (55, 56):
        _bad(con, minute)
    assert [w.start for w in detect(con, LATER)] == [_m(0), _m(30), _m(50), _m(55)]


def test_a_target_failing_one_request_in_three_at_low_traffic_is_one_incident(con):
    """A few attempts a minute for an hour, failing in bursts every third minute, now and
    then a lone fault: between them the target answers too few requests to show it
    recovered, so the outage is one incident."""
    for minute in range(60):
        if minute % 9 == 0:
            _bad(con, minute, faults=3, attempts=6)
        elif minute % 3 == 0:
            _bad(con, minute, faults=1, attempts=3)  # noise alone
        else:
            rollup(con, _m(minute), attempts=2, requests=2, answered=2)
    assert [(w.start, w.last_fault) for w in detect(con, LATER)] == [(_m(0), _m(57))]


def test_two_lone_faults_at_low_traffic_are_no_incident(con):
    for minute in range(20):
        if minute in (3, 14):
            _bad(con, minute, faults=2, attempts=2)  # two timeouts now and then: noise alone
        else:
            rollup(con, _m(minute), attempts=1, requests=1, answered=1)
    assert detect(con, LATER) == []


def test_ten_answers_between_faults_show_the_target_recovered(con):
    _bad(con, 0, faults=3, attempts=3)
    for minute in range(1, 6):  # five minutes of two answers each
        rollup(con, _m(minute), attempts=2, requests=2, answered=2)
    _bad(con, 6, faults=3, attempts=3)
    assert [w.start for w in detect(con, LATER)] == [_m(0), _m(6)]


@pytest.mark.parametrize(("answers", "windows"), [(12, 1), (20, 2)])
def test_after_failing_three_in_ten_it_takes_eighteen_answers_to_have_recovered(
    con, answers, windows
):
    for minute in range(10):
        _bad(con, minute, faults=3, attempts=10)
    healthy = range(10, 10 + answers // 4)
    for minute in healthy:
        rollup(con, _m(minute), attempts=4, requests=4, answered=4)
    _bad(con, healthy[-1] + 1, faults=3, attempts=10)
    assert len(detect(con, LATER)) == windows
