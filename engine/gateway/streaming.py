"""A stream the chain has committed to (its `StreamStart` is in): the caller's response from
its head to its last byte.

Each chain event goes out in the caller's dialect. A failure after the start can no longer be
an HTTP error: it is the dialect's in-band error event, and the stream ends cleanly. However
the response ends (finished, failed, or the caller gone, even before the body began), the
chain's stream is closed, which stops the chain, and the request is counted once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator

from engine.core.attempt import Attempt
from engine.core.messages import MessageEnd, StreamError, StreamEvent, StreamStart
from engine.fallback.continuation import continued_parts
from engine.gateway import stream_log
from engine.gateway.dialects.base import StreamEncoder
from engine.gateway.httputil import ClosingStream, route_headers
from engine.gateway.replies import Call, Replies

__all__ = ["CommittedStream"]

log = logging.getLogger("switchover.gateway")


class CommittedStream:
    """The body and the closing of one committed stream; `response()` is what the app returns."""

    def __init__(
        self,
        call: Call,
        events: AsyncGenerator[StreamEvent, None],
        first: StreamStart,
        encoder: StreamEncoder,
        replies: Replies,
    ) -> None:
        self.call, self.events, self.first = call, events, first
        self.encoder, self.replies = encoder, replies
        self.outcome = "cancelled"  # until the chain says how it ended
        self.attempts: tuple[Attempt, ...] = ()

    def response(self) -> ClosingStream:
        call, first = self.call, self.first
        headers = {
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
            call.id_header: call.request_id,
            **route_headers(
                first.route,
                first.provider,
                first.model,
                first.attempts_so_far,
                first.fallback_depth > 0,
            ),
        }
        return ClosingStream(
            self.body(), self.close, media_type="text/event-stream", headers=headers
        )

    async def body(self) -> AsyncIterator[bytes]:
        call, first, encoder = self.call, self.first, self.encoder
        try:
            yield encoder.start(first)
            async for event in self.events:
                if isinstance(event, MessageEnd):
                    self.outcome, self.attempts = "ok", event.attempts
                    stream_log.stream_continued(call.route, call.request_id, event.attempts)
                    yield encoder.end(event)
                elif isinstance(event, StreamError):
                    self.outcome, self.attempts = "stream_error", event.attempts
                    failed = self.replies.scrubbed(event)
                    stream_log.stream_failed(call.route, call.request_id, failed, first)
                    yield encoder.error(failed)
                else:
                    yield encoder.event(event)
        except Exception:
            log.exception(
                "stream failed after its start: route %s, target %s, gateway error (request %s)",
                call.route,
                f"{first.provider}/{first.model}",
                call.request_id,
            )
            self.outcome = "error"
            yield encoder.error(
                StreamError("internal", "internal error in the gateway", "api_error")
            )

    async def close(self) -> None:
        """However the response ended (even before the body began): stop the chain."""
        await self.events.aclose()
        # A backup that finished the answer (a continuation) served it too.
        fallback = self.first.fallback_depth > 0 or continued_parts(self.attempts) is not None
        await self.replies.after(self.call, self.outcome, fallback=fallback, attempts=self.attempts)
