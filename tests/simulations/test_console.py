"""The demo's console, driven with exact inputs: each change of state is said once, requests
are never a line of their own, and the summary covers its window only."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pandas as pd
import pytest

from simulations.demo.client import Outcome
from simulations.demo.console import Changes, Window, records

OK = Outcome("support", 200, failed=False)
BY_FALLBACK = Outcome("support", 200, failed=False, fallback=True)
FAILED = Outcome("support", 503, failed=True)
SONNET = "claude/claude-sonnet-4-5"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """The console shows local time; here local time is UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def status(**breakers: dict) -> dict:
    return {"breakers": {SONNET if k == "sonnet" else k: v for k, v in breakers.items()}}


CLOSED = {"status": "closed", "open_reason": None, "open_remaining_s": None}
OPEN = {"status": "open", "open_reason": "failures", "open_remaining_s": 19.2}
HALF_OPEN = {"status": "half_open", "open_reason": "failures", "open_remaining_s": None}


def test_the_summary_counts_the_last_window_only():
    window = Window(10)
    for at in (0.5, 1.0, 2.0):
        window.add(at, FAILED)  # long gone by t = 31
    for at, outcome in [(21.5, OK), (22.0, BY_FALLBACK), (25.0, BY_FALLBACK), (30.0, OK)]:
        window.add(at, outcome)
    assert window.summary(31.0) == "last 10 s: 4 requests, 2 by a fallback (50 %), 0 failed"


def test_the_summary_rounds_its_share_and_drops_answers_at_the_windows_start():
    window = Window(10)
    window.add(100.0, FAILED)  # exactly 10 s before: the window is (100, 110]
    for i in range(31):
        window.add(100.5 + i * 0.3, BY_FALLBACK if i < 12 else OK)
    assert window.summary(110.0) == "last 10 s: 31 requests, 12 by a fallback (39 %), 0 failed"


def test_a_request_that_failed_after_a_fallback_counts_as_failed_only():
    window = Window(10)
    window.add(1.0, Outcome("support", 503, failed=True, fallback=True))
    window.add(2.0, BY_FALLBACK)
    assert window.summary(3.0) == "last 10 s: 2 requests, 1 by a fallback (50 %), 1 failed"


def test_an_empty_window_says_so():
    assert Window(10).summary(5.0) == "last 10 s: 0 requests, 0 by a fallback (0 %), 0 failed"


def test_a_breaker_is_said_opened_once_and_closed_once():
    changes = Changes()
    seen = [
        changes.breakers(status(sonnet=CLOSED)),
        changes.breakers(status(sonnet=OPEN)),
        changes.breakers(status(sonnet=OPEN)),
        changes.breakers(status(sonnet=HALF_OPEN)),  # probing: not closed yet
        changes.breakers(status(sonnet={**OPEN, "open_reason": "probe"})),  # the probe failed
        changes.breakers(status(sonnet=CLOSED)),
        changes.breakers(status(sonnet=CLOSED)),
    ]
    assert seen == [
        [],
        [f"breaker {SONNET} opened (failures), next probe in 20 s"],
        [],
        [],
        [],
        [f"breaker {SONNET} closed"],
        [],
    ]


def test_breakers_of_several_targets_change_independently():
    changes = Changes()
    changes.breakers(status(sonnet=OPEN))
    haiku = {"status": "open", "open_reason": "account", "open_remaining_s": 300.0}
    assert changes.breakers(status(sonnet=CLOSED, **{"claude/claude-haiku-4-5": haiku})) == [
        "breaker claude/claude-haiku-4-5 opened (account), next probe in 300 s",
        f"breaker {SONNET} closed",
    ]


FIRED_AT = datetime(2026, 12, 1, 12, 1, 5, tzinfo=UTC)
ALERT = {
    "rule": "fallback-rate-5m",
    "subject": "support",
    "state": "firing",
    "fired_at": FIRED_AT,
    "resolved_at": None,
    "summary": "support: 40 % answered by a backup",
}


def test_an_alert_is_said_when_it_fires_and_when_it_resolves_once_each():
    changes = Changes()
    resolved = {
        **ALERT,
        "state": "resolved",
        "resolved_at": datetime(2026, 12, 1, 12, 9, tzinfo=UTC),
    }
    seen = [changes.alerts([ALERT]), changes.alerts([ALERT]), changes.alerts([resolved]),
            changes.alerts([resolved])]  # fmt: skip
    assert seen == [
        ["alert fired: fallback-rate-5m on support: support: 40 % answered by a backup"],
        [],
        ["alert resolved: fallback-rate-5m on support"],
        [],
    ]


def test_an_alert_first_seen_resolved_is_said_fired_then_resolved():
    changes = Changes()
    short = {**ALERT, "state": "resolved", "summary": None}
    assert changes.alerts([short]) == [
        "alert fired: fallback-rate-5m on support",
        "alert resolved: fallback-rate-5m on support",
    ]


STARTED_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
INCIDENT = {
    "subject": SONNET,
    "family": "availability",
    "started_at": STARTED_AT,
    "ended_at": None,
    "requests_affected": 41,
    "answered_by_fallback": 41,
    "failed": 0,
}


def test_an_incident_is_said_when_it_starts_and_when_it_ends_once_each():
    changes = Changes()
    grown = {**INCIDENT, "requests_affected": 60}
    ended = {
        **INCIDENT,
        "ended_at": datetime(2026, 12, 1, 12, 3, tzinfo=UTC),
        "requests_affected": 95,
        "answered_by_fallback": 95,
    }
    seen = [changes.incidents([row]) for row in (INCIDENT, grown, ended, ended)]
    assert seen == [
        [f"incident started: {SONNET} (availability) at 12:00:00"],
        [],  # its numbers grew: not a change of state
        [
            f"incident ended: {SONNET} (availability), after 3 min, 95 requests affected, "
            "95 by a fallback, 0 failed"
        ],
        [],
    ]


def test_two_incidents_of_one_target_in_two_families_are_two():
    changes = Changes()
    rate_limited = {**INCIDENT, "family": "rate_limit"}
    assert changes.incidents([INCIDENT, rate_limited]) == [
        f"incident started: {SONNET} (availability) at 12:00:00",
        f"incident started: {SONNET} (rate_limit) at 12:00:00",
    ]


def test_published_rows_reach_the_console_with_their_missing_values_as_none():
    frame = pd.DataFrame(
        {
            "subject": [SONNET],
            "started_at": [pd.Timestamp(STARTED_AT)],
            "ended_at": [pd.NaT],
            "failed": [pd.NA],
        }
    )
    (row,) = records(frame)
    assert row["ended_at"] is None and row["failed"] is None
    assert Changes().incidents([row]) == [f"incident started: {SONNET} at 12:00:00"]


def test_a_restarted_console_says_only_what_changed_since_it_last_spoke(tmp_path):
    """`switchover up` stopped and started again: the alert still firing and the incident
    still ongoing are not news; the incident's end, after the restart, is."""
    state = tmp_path / "state" / "console.json"
    before = Changes(state)
    assert before.alerts([ALERT]) and before.incidents([INCIDENT])
    before.breakers({"breakers": {SONNET: {"status": "open"}}})
    before.save()
    after = Changes(state)
    assert after.alerts([ALERT]) == []
    assert after.incidents([INCIDENT]) == []
    assert after.breakers({"breakers": {SONNET: {"status": "open"}}}) == []
    ended = {**INCIDENT, "ended_at": datetime(2026, 12, 1, 12, 3, tzinfo=UTC)}
    assert after.incidents([ended]) == [
        f"incident ended: {SONNET} (availability), after 3 min, 41 requests affected, "
        "41 by a fallback, 0 failed"
    ]


def test_a_console_whose_notes_are_unreadable_starts_over(tmp_path):
    state = tmp_path / "console.json"
    state.write_text("{not json")
    assert Changes(state).alerts([ALERT]) != []
