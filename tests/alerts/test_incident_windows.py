"""Incident windows from exact minute figures: per target and fault family, one window until
`settle` of informative minutes, noise, ongoing, minutes held back by a breaker, drills, final
incidents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers.store_rows import rollup

from engine.alerts.incidents import QUIET, IncidentPolicy, detect, refresh_incidents
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


def _answered(con, minute: int, attempts: int = 10) -> None:
    """The target answered every attempt that minute."""
    rollup(con, _m(minute), attempts=attempts, requests=attempts, answered=attempts)


def test_an_incident_is_ongoing_until_its_settle_time_has_passed(con):
    for minute in range(3):
        _bad(con, minute)
    for minute in range(3, 8):
        _answered(con, minute)
    refresh_incidents(con, _m(4))
    assert _incidents(con)[0][3] is None
    refresh_incidents(con, _m(3) + SETTLE)
    assert _incidents(con)[0][3] == _m(3) + SETTLE


def test_with_no_attempt_after_its_faults_it_is_ongoing_through_quiet_then_ends_as_they_said(con):
    """Nobody asked the target anything after its faults, so nothing shows it recovered: the
    incident stays ongoing through QUIET, and then ends where its faults said it would."""
    for minute in range(3):
        _bad(con, minute)
    refresh_incidents(con, _m(3) + QUIET - timedelta(minutes=1))
    assert _incidents(con)[0][3] is None
    refresh_incidents(con, _m(3) + QUIET)
    assert _incidents(con)[0][3] == _m(3) + SETTLE


def test_a_target_its_breaker_holds_out_is_one_incident_ending_settle_after_its_last_fault(con):
    """An expired key: the breaker holds the primary back, so it gets a probe every few
    minutes and no other attempt; the minutes in between tell nothing, so its failed probes
    are one incident, which ends `settle` after the last of them, not when the hold ends."""
    for minute in range(12):
        if minute % 6 == 0:
            rollup(con, _m(minute), attempts=1, account_faults=1)  # the probe
        _fell_back(con, minute)
    _answered(con, 12, attempts=1)  # the next probe succeeds
    _answered(con, 13)
    [window] = detect(con, LATER)
    assert (window.target, window.family, window.start) == ("claude/m", "account", _m(0))
    refresh_incidents(con, LATER)
    assert _incidents(con)[0][3] == _m(7) + SETTLE, "settle after the last failed probe"


def test_requests_held_back_count_as_evidence_for_the_family_whose_faults_came_last(con):
    """A refused key opens its breaker at the first 401: that fault and the requests held back
    from the target while its incident lasts make it an incident, not noise."""
    rollup(con, _m(0), attempts=10, rate_limited=10)
    rollup(con, _m(1), attempts=1, account_faults=1)
    for minute in range(1, 8):
        _fell_back(con, minute)
    evidence = {w.family: w.evidence for w in detect(con, LATER)}
    assert evidence == {"rate_limit": 10, "account": 1 + 3 * 5}, "held 1..3: settle after 1"


def test_minutes_a_drill_held_the_target_down_are_no_evidence(con):
    for minute in range(2):
        _bad(con, minute)
        _fell_back(con, minute)
    for minute in range(2, 10):
        _fell_back(con, minute)  # the drill's fallbacks, and any failure it causes
    con.execute("INSERT INTO drills (drill_id, route, target, started_at, ends_at, requested_by, "
                "status) VALUES ('d', 'support', 'claude/m', $lo, $hi, 't', 'running')",
                {"lo": _m(2), "hi": _m(10)})  # fmt: skip
    [window] = detect(con, LATER)
    assert window.evidence == 2 * 10 + 2 * 5, "its faults and the fallbacks before the drill"


def test_an_incident_begins_a_minute_early_when_its_fault_did(con):
    """The breaker opens at the first failures, so the minute the outage began is often below
    the fault rate: its faults still date the start."""
    rollup(con, _m(0), attempts=20, provider_faults=2)
    for minute in (1, 2):
        _bad(con, minute)
    [window] = detect(con, LATER)
    assert window.start == _m(0)


def test_fallbacks_alone_never_start_an_incident(con):
    for minute in range(5):
        _fell_back(con, minute, requests=10)
    assert detect(con, LATER) == []


def test_recomputing_keeps_an_incidents_id(con):
    for minute in range(4):
        _bad(con, minute)
    refresh_incidents(con, LATER)
    first = con.execute("SELECT incident_id FROM incidents").fetchall()
    refresh_incidents(con, LATER + timedelta(minutes=1))
    assert con.execute("SELECT incident_id FROM incidents").fetchall() == first


def test_a_final_incident_is_kept_as_stored_whatever_arrives_later(con):
    """An incident that ended an hour ago is final: late attempts, a restart's full pass or a
    pass told to look only at recent minutes leave its row as it is."""
    for minute in range(4):
        _bad(con, minute)
    for minute in range(4, 8):
        _answered(con, minute)
    refresh_incidents(con, LATER)
    con.execute("UPDATE incidents SET top_error = 'as stored'")
    _bad(con, 5)  # a late file: one more bad minute inside it
    refresh_incidents(con, LATER + timedelta(minutes=1))
    refresh_incidents(con, LATER + timedelta(minutes=2), since=LATER - timedelta(hours=1))
    assert con.execute("SELECT top_error, ended_at FROM incidents").fetchall() == [
        ("as stored", _m(4) + SETTLE)
    ]


def test_late_attempts_change_an_incident_that_is_not_final(con):
    for minute in range(4):
        _bad(con, minute)
    for minute in range(4, 8):
        _answered(con, minute)
    refresh_incidents(con, _m(8))
    _bad(con, 5)  # a late file from a gateway that was offline: it failed at 5 too
    refresh_incidents(con, _m(9), since=_m(5))
    assert _incidents(con) == [("claude/m", "availability", _m(0), _m(6) + SETTLE)]


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


def test_answered_minutes_for_the_settle_time_between_faults_end_an_incident(con):
    """At production traffic `settle` of good minutes is recovery, whatever stray fault they
    hold: a target failing in bursts with that between them has one incident per burst."""
    for burst in (0, 4, 8):
        for minute in (burst, burst + 1):
            _bad(con, minute, faults=50, attempts=100)
        for minute in (burst + 2, burst + 3):
            rollup(con, _m(minute), attempts=100, requests=100, answered=99, provider_faults=1)
    assert [w.start for w in detect(con, LATER)] == [_m(0), _m(4), _m(8)]


def test_a_target_failing_one_request_in_three_at_low_traffic_is_one_incident(con):
    """A few attempts a minute for an hour, failing in bursts every third minute: between
    them the target answers too few requests to show it recovered, so the outage is one
    incident."""
    for minute in range(60):
        if minute % 9 == 0:
            _bad(con, minute, faults=3, attempts=6)
        elif minute % 3 == 0:
            _bad(con, minute, faults=1, attempts=3)
        else:
            _answered(con, minute, attempts=2)
    assert [(w.start, w.last_fault) for w in detect(con, LATER)] == [(_m(0), _m(57))]


@pytest.mark.parametrize(("answers", "windows"), [(12, 1), (20, 2)])
def test_after_failing_three_in_ten_it_takes_twenty_answers_to_have_recovered(
    con, answers, windows
):
    for minute in range(10):
        _bad(con, minute, faults=3, attempts=10)
    healthy = range(10, 10 + answers // 4)
    for minute in healthy:
        _answered(con, minute, attempts=4)
    _bad(con, healthy[-1] + 1, faults=3, attempts=10)
    assert len(detect(con, LATER)) == windows


def test_fewer_answered_minutes_than_the_settle_time_continue_an_incident(con):
    for minute in (0, 1, 3, 4):
        _bad(con, minute, faults=3, attempts=6)
    _answered(con, 2, attempts=2)  # one good minute in between
    assert [(w.start, w.last_fault) for w in detect(con, LATER)] == [(_m(0), _m(4))]


def test_two_lone_faults_at_low_traffic_are_no_incident(con):
    for minute in range(20):
        if minute in (3, 14):
            _bad(con, minute, faults=2, attempts=2)  # two timeouts now and then: noise alone
        else:
            rollup(con, _m(minute), attempts=1, requests=1, answered=1)
    assert detect(con, LATER) == []
