"""A target the chain passes over without a call is recorded with its reason and its place in
the request's order on the request's attempts (`Attempt.skips`), never as an attempt of its
own: the real chain over the in-process fake providers, on virtual time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from helpers.chain_rig import BACKUP, PRIMARY, THIRD, Rig

from engine.core.skips import Skip, SkipReason, from_json
from engine.fallback.target import Target
from engine.state.breaker import AccountFailure

from .test_context_overflow import OVERFLOW, Route


class Switched:
    """An arranger as the operator's switches make it: `disabled` left out, `drilled` under a
    fault drill until the time given."""

    def __init__(
        self, disabled: frozenset[str] = frozenset(), drilled: Mapping[str, datetime] = {}
    ) -> None:
        self.disabled, self.drilled = disabled, dict(drilled)

    async def arrange(self, route: str, targets: Sequence[Target]) -> list[Target]:
        return [t for t in targets if t.name not in self.disabled]

    async def drills(self, route: str) -> dict[str, datetime]:
        return self.drilled


def open_breaker(rig: Rig, target: str) -> None:
    rig.clock.run(rig.chain.breakers.record(target, AccountFailure(), rig.clock.now()))


def test_a_primary_whose_breaker_is_open_is_recorded_as_skipped_on_the_backups_answer():
    rig = Rig()
    open_breaker(rig, PRIMARY)
    response = rig.complete()
    [answer] = rig.attempts  # one call, one record: the skip is no attempt
    assert len(rig.calls()) == 1 and response.attempts == (answer,)
    assert (answer.target, answer.decision, answer.fallback_depth) == (BACKUP, "served", 1)
    assert from_json(answer.skips) == (Skip(PRIMARY, SkipReason.BREAKER_OPEN, 0),)


def test_a_target_skipped_after_the_last_attempt_is_on_that_attempts_record():
    """The primary retried, then fell back to a backup whose breaker is open: the fall-back's
    record says what followed it, and the hooks still get each attempt once, in order."""
    rig = Rig()
    open_breaker(rig, BACKUP)
    rig.script(PRIMARY, "529", "529")
    error = rig.fails()
    assert error.skipped == ((BACKUP, "breaker open"),)
    assert [a.decision for a in rig.attempts] == ["retry", "fall_back"]
    assert len(rig.calls()) == 2
    first, last = rig.attempts
    assert first.skips is None
    assert from_json(last.skips) == (Skip(BACKUP, SkipReason.BREAKER_OPEN, 1),)
    assert error.attempts == (first, last)


def test_a_backup_skipped_for_the_time_left_names_the_budget():
    rig = Rig(budget_s=5, min_attempt_budget_s=1, primary_retries=0, backup_reserve_share=0)
    rig.script(PRIMARY, "500:delay=4.5")
    error = rig.fails()
    assert error.deadline_exceeded and error.skipped == ((BACKUP, "time budget too small"),)
    [record] = rig.attempts
    assert (record.http_status, record.decision) == (500, "fall_back")
    assert from_json(record.skips) == (Skip(BACKUP, SkipReason.NO_BUDGET, 1),)


def test_a_target_whose_window_is_too_small_is_skipped_with_the_windows_sizes():
    route = Route("gpt-4o", "gpt-4o-mini", "gpt-4.1-mini")  # 128,000, 128,000, 1,000,000
    route.fake.script("gpt-4o", [OVERFLOW])
    assert route.complete().fallback_depth == 2
    overflowed, answer = route.attempts
    assert overflowed.skips is None
    detail = "context window 128,000 tokens, the request overflowed 128,000"
    skip = Skip("gpt/gpt-4o-mini", SkipReason.CONTEXT_TOO_SMALL, 1, detail)
    assert from_json(answer.skips) == (skip,)
    assert skip.name == "context window too small"


def test_a_disabled_target_is_recorded_as_left_out_but_never_blamed_for_a_failure():
    rig = Rig()
    rig.chain.order = Switched(disabled=frozenset({PRIMARY}))
    rig.complete()
    [answer] = rig.attempts
    assert answer.target == BACKUP and answer.fallback_depth == 0
    assert from_json(answer.skips) == (Skip(PRIMARY, SkipReason.DISABLED, None),)
    rig.attempts.clear()
    rig.script(BACKUP, "500", "500")
    error = rig.fails()
    assert error.skipped == ()  # nothing was tried there, so nothing there failed the request
    assert from_json(rig.attempts[0].skips) == (Skip(PRIMARY, SkipReason.DISABLED, None),)


def test_a_target_a_fault_drill_holds_down_is_skipped_for_the_drill():
    rig = Rig()
    rig.chain.order = Switched(drilled={PRIMARY: rig.clock.wall() + timedelta(seconds=90)})
    rig.complete()  # the drill's invalid key opens the primary's breaker
    assert [a.error_class for a in rig.attempts] == ["drill_invalid_key", None]
    rig.attempts.clear()
    rig.complete()
    [answer] = rig.attempts
    assert from_json(answer.skips) == (Skip(PRIMARY, SkipReason.DRILL, 0),)


def test_a_request_that_made_no_call_records_every_target_and_why_on_its_one_row():
    rig = Rig(targets=3)
    for target in (PRIMARY, BACKUP):
        open_breaker(rig, target)
    rig.script(THIRD, "rate_limit_long")
    rig.fails()  # the third's 429 cools it down
    rig.attempts.clear()
    rig.fails()
    [record] = rig.attempts
    assert (record.outcome, record.error_class) == ("skipped", "all_skipped")
    assert from_json(record.skips) == (
        Skip(PRIMARY, SkipReason.BREAKER_OPEN, 0),
        Skip(BACKUP, SkipReason.BREAKER_OPEN, 1),
        Skip(THIRD, SkipReason.COOLING_DOWN, 2),
    )
