"""Incident windows from exact minute figures: merging, noise, ongoing, route-only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.alerts.incidents import detect, refresh_incidents
from engine.store.db import open_store

from .store_rows import rollup

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=2)


def _m(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    con.execute("INSERT INTO route_primaries VALUES ('support', 'claude/m', 'anthropic', 'm', $t)",
                {"t": T0})  # fmt: skip
    yield con
    con.close()


def _bad(con, minute: int, faults: int = 10, attempts: int = 10, **keys) -> None:
    rollup(con, _m(minute), attempts=attempts, provider_faults=faults, **keys)


def test_bad_minutes_less_than_the_gap_apart_are_one_window(con):
    for minute in (0, 1, 2, 6, 7):  # a 3-minute lull inside
        _bad(con, minute)
    _bad(con, 20)  # 12 minutes later: another incident
    _bad(con, 21)
    windows = detect(con, LATER)
    assert [(w.start, w.end) for w in windows] == [(_m(0), _m(8)), (_m(20), _m(22))]


def test_a_few_faults_are_noise_not_an_incident(con):
    _bad(con, 0, faults=2, attempts=2)
    assert detect(con, LATER) == []


def test_minutes_below_the_fault_rate_do_not_count(con):
    for minute in range(10):
        _bad(con, minute, faults=1, attempts=10)  # 10 % < 20 %
    assert detect(con, LATER) == []


def test_an_incident_still_failing_is_ongoing(con):
    for minute in range(3):
        _bad(con, minute)
    refresh_incidents(con, _m(4))
    [(ended_at,)] = con.execute("SELECT ended_at FROM incidents").fetchall()
    assert ended_at is None
    refresh_incidents(con, LATER)
    [(ended_at,)] = con.execute("SELECT ended_at FROM incidents").fetchall()
    assert ended_at == _m(3)


def test_a_route_failing_over_while_its_primary_is_down_is_the_providers_incident(con):
    for minute in range(5):
        _bad(con, minute)
        rollup(con, _m(minute), target="gpt/x", provider="gpt", requests=10,
               answered_by_fallback=10)  # fmt: skip
    [window] = detect(con, LATER)
    assert (window.scope, window.subject, window.routes) == ("provider", "claude", {"support"})


def test_a_route_failing_over_counts_against_its_primary_even_without_its_attempts(con):
    """An expired key: the breaker holds the primary back, so it gets a probe every few
    minutes; its route's fallbacks keep the provider's incident whole."""
    for minute in range(12):
        if minute % 6 == 0:
            _bad(con, minute, faults=1, attempts=1)  # the probe
        rollup(con, _m(minute), target="gpt/x", provider="gpt", requests=5,
               answered_by_fallback=5)  # fmt: skip
    [window] = detect(con, LATER)
    assert (window.scope, window.subject, window.start, window.end) == (
        "provider",
        "claude",
        _m(0),
        _m(12),
    )


def test_a_route_with_no_known_primary_is_an_incident_of_its_own(con):
    for minute in range(5):
        rollup(con, _m(minute), route="new", target="gpt/x", provider="gpt", requests=10,
               answered_by_fallback=2, unavailable=8)  # fmt: skip
    [window] = detect(con, LATER)
    assert (window.scope, window.subject) == ("route", "new")


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
    assert con.execute("SELECT top_error FROM incidents").fetchall() == [(None,)]
