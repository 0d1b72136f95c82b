"""One request's records on their way to the hooks: its attempts in order, each with the targets
passed over without a call nearest it, and the fields that say how an attempt failed.

A skipped target makes no call, so it is no attempt: it goes on the next record, as
`Attempt.skips` (engine.core.skips), with its place in the request's order. So that the targets
passed over after a request's last attempt are on a record too, a failure the chain moves on
from is held (`add(..., hold=True)`) until the chain knows what followed it: the next record,
or the request's end (`finish`), which puts the targets passed over since on it. The caller's
list of attempts has it at once; only the hooks wait. A hook that raises never fails the
request. `engine.fallback.run` builds the records; this module only hands them over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from engine.core.attempt import Attempt, Outcome
from engine.core.errors import AttemptError
from engine.core.skips import Skip, SkipReason, to_json

log = logging.getLogger("switchover.chain")

AttemptHook = Callable[[Attempt], None]


class Records:
    """`attempts`: the calls made, for the caller (the record of a request that made none goes
    to the hooks alone); `skipped`: (target, words) of the targets in the request's order passed
    over, what its failure names (AllProvidersUnavailable.skipped); `skips`: every target passed
    over, as recorded."""

    def __init__(
        self,
        hooks: Sequence[AttemptHook],
        attempts: list[Attempt],
        skipped: list[tuple[str, str]],
    ) -> None:
        self.hooks = hooks
        self.attempts = attempts
        self.skipped = skipped
        self.skips: list[Skip] = []
        self._written = 0  # skips[:_written] are on records
        self._first = 0  # the first skip of the record being made
        self._held: tuple[Attempt, int] | None = None  # a failure, and the index of its skips

    def pass_over(
        self, target: str, depth: int | None, reason: SkipReason, detail: str | None = None
    ) -> None:
        """`target` is passed over without a call, for `reason`. `depth`: its place in the
        request's order; None for a target the order left out (disabled), which the failure
        does not name: nothing was tried there, so nothing there failed the request."""
        skip = Skip(target, reason, depth, detail)
        self.skips.append(skip)
        if depth is not None:
            self.skipped.append((target, skip.said))

    def next_skips(self) -> str | None:
        """The skips the record about to be made carries (`Attempt.skips`): those on none yet.
        A record held before it goes to the hooks first."""
        self.release()
        self._first, self._written = self._written, len(self.skips)
        return to_json(self.skips[self._first :])

    def add(self, attempt: Attempt, *, hold: bool = False) -> None:
        """The record made after `next_skips`; `hold`: it waits for what follows it."""
        if attempt.outcome != "skipped":  # the caller's list holds the calls made
            self.attempts.append(attempt)
        if hold:
            self._held = (attempt, self._first)
        else:
            self._tell(attempt)

    def finish(self) -> None:
        """The request is over: the record held for what followed it goes to the hooks, with
        the targets passed over after it."""
        self.release(trailing=True)

    def release(self, *, trailing: bool = False) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        attempt, first = held
        if trailing and self._written < len(self.skips):
            assert self.attempts[-1] is attempt, "a record was made while one was held"
            attempt = attempt.replace(skips=to_json(self.skips[first:]))
            self.attempts[-1] = attempt
            self._written = len(self.skips)
        self._tell(attempt)

    def _tell(self, attempt: Attempt) -> None:
        for hook in self.hooks:
            try:
                hook(attempt)
            except Exception:  # telemetry must never fail a user's request
                log.exception("attempt hook %r failed; the request goes on", hook)


def failure_fields(
    error: AttemptError | None, skipped: tuple[str, str] | None, outcome: Outcome
) -> dict[str, Any]:
    """The attempt's fields that say how it failed: from its error, or the (class, message) of
    a request that made no call."""
    if error is None:
        return {
            "error_class": skipped[0] if skipped else None,
            "fault_kind": None,
            # Every answer the providers give arrives as a 200.
            "http_status": 200 if outcome == "success" else None,
            "error_type": None,
            "error_code": None,
            "error_message": skipped[1] if skipped else None,
            "retry_after_s": None,
        }
    return {
        "error_class": error.error_class,
        "fault_kind": error.fault_kind,
        # A failure carries the status it came with, or none when no status line arrived (a
        # reset, a timeout).
        "http_status": error.status,
        "error_type": error.error_type,
        "error_code": error.error_code,
        "error_message": error.message,
        "retry_after_s": error.retry_after_s,
    }
