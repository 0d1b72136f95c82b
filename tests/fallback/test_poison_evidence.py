"""A poison request hurts no one (issue 35, engine.fallback.poison): a payload that makes every
provider fail charges the breakers once, however often it is resent, and never beyond the first
target; a provider that is really down still has its breaker opened."""

from __future__ import annotations

import pytest
from helpers.chain_rig import BACKUP, PRIMARY, THIRD, Rig

from engine.core.errors import AllProvidersUnavailable
from engine.core.messages import Message, Request
from engine.fallback.poison import SUSPECTED_REQUEST, ChargedContent, fingerprint

MARKER = "<<poison>>"


def ask(text: str) -> Request:
    return Request(messages=(Message.user(text),))


def send(rig: Rig, request: Request) -> AllProvidersUnavailable | None:
    try:
        rig.complete(request)
    except AllProvidersUnavailable as failed:
        return failed
    return None


def test_a_payload_resent_by_the_sdk_charges_the_first_target_once_and_no_other():
    rig = Rig(targets=3)
    rig.fake.poison(MARKER, "500")
    poison = ask(f"summarise {MARKER}")
    failures = [send(rig, poison) for _ in range(3)]  # sent, then resent twice
    assert all(f is not None for f in failures)
    assert "the request itself may be at fault" in str(failures[-1])
    assert rig.breaker(PRIMARY).consecutive_failures == 1, "call, retry and resends: one"
    assert rig.breaker(BACKUP).consecutive_failures == 0
    assert rig.breaker(THIRD).consecutive_failures == 0
    later = [a for a in rig.attempts if a.target != PRIMARY]
    assert later and {a.fault_kind for a in later} == {SUSPECTED_REQUEST}
    assert {a.fault_kind for a in rig.attempts if a.target == PRIMARY} == {"provider"}


def test_poison_payloads_leave_the_breakers_closed_for_everyone_else():
    rig = Rig(targets=3, breaker_failures=5)
    rig.fake.poison(MARKER, "500")
    for i in range(4):
        for _ in range(3):
            assert send(rig, ask(f"order {i} {MARKER}")) is not None
    assert {rig.breaker(t).status for t in (PRIMARY, BACKUP, THIRD)} == {"closed"}
    rig.attempts.clear()
    for i in range(20):
        assert rig.complete(ask(f"hello {i}")).fallback_depth == 0
    assert {a.target for a in rig.attempts} == {PRIMARY}


def test_different_requests_failing_on_a_provider_that_is_down_open_its_breaker():
    rig = Rig(targets=2, breaker_failures=3)
    rig.fake.set_default("ok")
    rig.script(PRIMARY, *["500"] * 6)
    for i in range(3):
        assert rig.complete(ask(f"question {i}")).fallback_depth == 1
    assert rig.breaker(PRIMARY).status == "open"
    assert {a.fault_kind for a in rig.attempts if a.target == PRIMARY} == {"provider"}


def test_a_target_that_repeats_the_failure_is_charged_when_a_later_one_answers():
    rig = Rig(targets=3)
    rig.script(PRIMARY, "500", "500")
    rig.script(BACKUP, "500")
    assert rig.complete(ask("where is my order?")).fallback_depth == 2
    assert rig.breaker(PRIMARY).consecutive_failures == 1
    assert rig.breaker(BACKUP).consecutive_failures == 1, "the third answered: the backup failed"


def test_an_overload_is_evidence_however_often_the_same_content_meets_it():
    rig = Rig(targets=2, breaker_failures=3)
    rig.script(PRIMARY, *["529"] * 6)
    question = ask("the same job, run again")
    for _ in range(2):
        rig.complete(question)
    assert rig.breaker(PRIMARY).status == "open"


@pytest.mark.parametrize("field", ["stream", "feature", "user"])
def test_a_resend_has_the_fingerprint_of_its_content_not_of_its_delivery(field: str):
    base = ask("hello")
    other = base.replace(**{field: True if field == "stream" else "someone"})
    assert fingerprint(other) == fingerprint(base)
    assert fingerprint(ask("hello!")) != fingerprint(base)


def test_content_is_remembered_for_the_breaker_window_and_within_its_capacity():
    charged = ChargedContent(window_s=60, capacity=2)
    assert charged.charge("t", b"a", now=0)
    assert not charged.charge("t", b"a", now=59), "a resend within the window"
    assert charged.charge("t", b"a", now=60), "the window counts from the charge"
    assert charged.charge("u", b"a", now=61), "another target is other evidence"
    assert charged.charge("t", b"b", now=62) and charged.charge("t", b"c", now=63)
    assert charged.charge("t", b"a", now=64), "the oldest pair was forgotten past capacity"
