"""What the chain tells an operator at once, beyond the attempt records: a credential failure,
or a request that failed with every provider unavailable.

Hooks are the alerting side's (engine.alerts); a hook that raises never fails the request.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engine.core.errors import AllProvidersUnavailable, AttemptError

__all__ = ["ChainEvent", "EventHook", "all_unavailable", "announce", "credential_failure"]

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
