"""What the chain tells an operator at once, beyond the attempt records: a credential failure,
or a request that failed with every provider unavailable; and, to request hooks, how each
request ended (`RequestDone`: the OpenTelemetry export's request span, engine.telemetry.otel).

Hooks are the alerting side's (engine.alerts) and the telemetry's; a hook that raises never
fails the request.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from engine.core.attempt import Attempt
from engine.core.errors import AllProvidersUnavailable, AttemptError, RequestFailed

if TYPE_CHECKING:
    from engine.fallback.run import RequestRun

__all__ = [
    "ChainEvent",
    "EventHook",
    "RequestDone",
    "RequestHook",
    "all_unavailable",
    "announce",
    "credential_failure",
    "finishing",
    "request_error",
]

log = logging.getLogger("switchover.chain")


@dataclass(frozen=True, slots=True)
class ChainEvent:
    """Something an operator must hear about at once, beyond the attempt record: a credential
    failure, or a request that failed with every provider unavailable (`causes`: the targets
    that failed or were skipped)."""

    kind: Literal["credential_failure", "all_unavailable"]
    route: str
    target: str
    error_class: str
    message: str
    at: datetime
    request_id: str | None = None
    causes: tuple[str, ...] = ()


# A hook may be a coroutine function: the chain awaits it before it goes on (or raises).
EventHook = Callable[[ChainEvent], Awaitable[None] | None]


def credential_failure(route: str, target: str, error: AttemptError, at: datetime) -> ChainEvent:
    """The event for a credential or account failure on `target`, logged as a warning too."""
    log.warning(
        "credential or account failure on %s (route %s): %s %s",
        target,
        route,
        error.error_class,
        error.message,
    )
    return ChainEvent("credential_failure", route, target, error.error_class, error.message, at)


def all_unavailable(
    route: str, first: str, failure: AllProvidersUnavailable, at: datetime, request_id: str
) -> ChainEvent:
    """The event for a request that every target failed or was skipped for (`causes`, in
    order); `first` is the route's first target for this request."""
    skipped = [name for name, _ in failure.skipped]
    causes = dict.fromkeys([a.target for a in failure.attempts] + skipped)
    return ChainEvent(
        "all_unavailable",
        route,
        first,
        "all_unavailable",
        str(failure),
        at,
        request_id,
        tuple(causes),
    )


async def announce(hooks: Sequence[EventHook], event: ChainEvent) -> None:
    for hook in hooks:
        try:
            done = hook(event)
            if inspect.isawaitable(done):
                await done
        except Exception:
            log.exception("event hook %r failed; the request goes on", hook)


@dataclass(frozen=True, slots=True)
class RequestDone:
    """One request through the chain, ended: when it began (the clock's wall time), how long it
    took (the clock's), its attempts (the HTTP calls made, in order) and, unless it was
    answered, what ended it (`request_error`). Never the prompt, never a key."""

    route: str
    request_id: str
    streamed: bool
    started_at: datetime
    duration_s: float
    attempts: tuple[Attempt, ...]
    error_type: str | None


# Called on the request's task once it ended; it must not block (an append, as the recorder's).
RequestHook = Callable[[RequestDone], None]


def request_error(attempts: Sequence[Attempt], exc: BaseException | None) -> str | None:
    """None when the caller was answered; else the failure's class: the request's own fault
    (`RequestFailed`'s class), "all_unavailable", a committed stream's in-band error, or
    "cancelled" when the caller went away."""
    last = attempts[-1] if attempts else None
    if last is not None and last.served and last.outcome == "success":
        return None
    if isinstance(exc, RequestFailed):
        return exc.error.error_class
    if isinstance(exc, AllProvidersUnavailable):
        return "all_unavailable"
    if isinstance(exc, GeneratorExit | asyncio.CancelledError) or (
        last is not None and last.outcome == "cancelled"
    ):
        return "cancelled"
    if last is not None and last.error_class:  # a committed stream that failed in-band
        return last.error_class
    return type(exc).__name__ if exc is not None else "_OTHER"


@contextmanager
def finishing(hooks: Sequence[RequestHook], run: RequestRun) -> Iterator[None]:
    """Around one request's loop, however it ends (an answer, a raise, a caller that stopped
    reading): the attempt record held for what followed it goes to the attempt hooks
    (`RequestRun.finish`), then `hooks` are told how the request ended."""
    if not hooks:
        try:
            yield
        finally:
            run.finish()
        return
    started, wall = run.clock.now(), run.clock.wall()
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        run.finish()
        attempts = tuple(run.attempts)
        done = RequestDone(
            run.route,
            run.request_id,
            run.request.stream,
            wall,
            run.clock.now() - started,
            attempts,
            request_error(attempts, error),
        )
        for hook in hooks:
            try:
                hook(done)
            except Exception:
                log.exception("request hook %r failed; the request goes on", hook)
