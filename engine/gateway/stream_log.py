"""The gateway's log lines about streams whose status line said 200 but whose answer did not go
as planned: one line per stream that failed after its head went out (the caller got an in-band
error, so no access log shows it), one per stream a later target finished after the first
broke mid-answer (the caller got one whole answer, so nothing else says a provider broke under
it). The messages are the recorded ones, scrubbed of keys and of the caller's text; never the
prompt itself."""

from __future__ import annotations

import logging

from engine.core.attempt import Attempt
from engine.core.messages import StreamError, StreamStart
from engine.fallback.continuation import continued_parts

log = logging.getLogger("switchover.gateway")


def stream_failed(route: str, request_id: str, error: StreamError, start: StreamStart) -> None:
    log.warning(
        "stream failed after its start: route %s, target %s, %s: %s (request %s)",
        route,
        failed_target(error, start),
        error.error_class,
        error.message,
        request_id,
    )


def stream_continued(route: str, request_id: str, attempts: tuple[Attempt, ...]) -> None:
    parts = continued_parts(attempts)
    if parts is None:
        return
    first, last = parts
    log.warning(
        "stream continued after a failure: route %s, %s failed with %s at %s characters, "
        "continued on %s (request %s)",
        route,
        first.target,
        first.error_class,
        last.continued_chars,
        last.target,
        request_id,
    )


def failed_target(error: StreamError, start: StreamStart) -> str:
    """The target whose committed stream failed (it is recorded before the error goes out):
    the first whose text the caller got, the failure the error names even when continuations
    were tried after it; else the one the stream started on."""
    failed = [a for a in error.attempts if a.outcome == "error" and a.served]
    return failed[0].target if failed else f"{start.provider}/{start.model}"
