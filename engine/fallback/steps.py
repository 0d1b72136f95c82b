"""What follows a failed attempt: the failure policy of `engine.core.errors`, read from the
error's own decision (`match error.decision`), never from a second ladder of types.

    Decision               the step recorded                    when
    FAIL_FAST              fall_back_larger_context              a context overflow, and a later
                                                                 target has a larger window
                           fail_fast                             otherwise
    FALL_BACK_NOW          fall_back_now (give_up on the last)   always
    RATE_LIMITED           wait_and_retry                        retries left, and a Retry-After
                                                                 no longer than the policy waits
    RETRY_THEN_FALL_BACK,  retry (after a jittered backoff)      retries left, and the error
    AMBIGUOUS, QUALITY                                           allows the same target again
                                                                 (a wait that ran out does only
                                                                 on the last target)
    any                    fall_back (give_up on the last)       none of the above

Pure: the budget (whether the wait fits before the deadline or the backups' reserve) and the
breaker are the chain's to weigh (`engine.fallback.chain`); nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.core.attempt import Step
from engine.core.errors import AttemptError, Decision, RequestFault
from engine.fallback.context_windows import CONTEXT_OVERFLOW, larger_window_ahead
from engine.fallback.policy import Policy, backoff_s

if TYPE_CHECKING:
    from engine.fallback.target import Target

__all__ = ["WAITED_OUT", "callers_mistake", "move_on", "next_step"]

# The failures of a wait the chain cut short: no response headers (read_timeout), no first
# content in a stream (stream_stalled; after the first content a stall is in-band, never here).
WAITED_OUT = frozenset({"read_timeout", "stream_stalled"})


def next_step(
    error: AttemptError,
    *,
    target: Target,
    later: Sequence[Target],
    retries_left: int,
    policy: Policy,
    rng: random.Random,
) -> tuple[float | None, Step]:
    """The seconds to wait before retrying `target` (None: move on to `later`) and the step,
    recorded on the failed attempt."""
    last = not later
    match error.decision:
        case Decision.FAIL_FAST:
            # The request's fault fails everywhere, except a context overflow on a target
            # with a larger window (catalogue row 2); targets no larger are skipped.
            if error.error_class == CONTEXT_OVERFLOW and larger_window_ahead(target, later):
                return None, Step.FALL_BACK_LARGER_CONTEXT
            return None, Step.FAIL_FAST
        case Decision.FALL_BACK_NOW:
            return None, Step.GIVE_UP if last else Step.FALL_BACK_NOW
    if retries_left <= 0:
        return None, move_on(last=last)
    match error.decision:
        case Decision.RATE_LIMITED:
            wait = error.retry_after_s
            if wait is None or wait > policy.max_retry_after_wait_s:
                return None, move_on(last=last)
            return wait, Step.WAIT_AND_RETRY
        case Decision.RETRY_THEN_FALL_BACK | Decision.AMBIGUOUS | Decision.QUALITY:
            # A 504, or a wait of our own that ran out while a backup remains: the provider
            # already made the caller wait, and a second wait is the backups' time.
            if not error.retry_same or (not last and error.error_class in WAITED_OUT):
                return None, move_on(last=last)
            overloaded = error.error_class == "overloaded"
            return backoff_s(policy, retry_number=1, rng=rng, overloaded=overloaded), Step.RETRY
    raise TypeError(f"no step for the decision {error.decision!r}")


def callers_mistake(error: AttemptError) -> AttemptError:
    """On a direct target (a model the caller named, not the configuration), the provider's
    404 for the model is the caller's error: fail fast, no account alert."""
    if error.error_class != "model_not_found":
        return error
    return RequestFault(
        error.error_class,
        error.message,
        status=error.status,
        error_type=error.error_type,
        error_code=error.error_code,
        provider_request_id=error.provider_request_id,
    )


def move_on(*, last: bool) -> Step:
    """The step recorded when the chain leaves a target for the next, or the last."""
    return Step.GIVE_UP if last else Step.FALL_BACK
