"""Reading one provider stream to its end: when an answer is complete, when it is cut, and
what to do with an event nobody can read. Shared by both dialects; the dialect's decoder says
what each event means.

    the stream                                    is
    its end marker ([DONE], message_stop)         complete
    its finish reason (OpenAI `finish_reason`,    complete, however the body ends after it: the
    Anthropic `message_delta.stop_reason`)        end marker, a clean close, a broken one, or
                                                  FINISH_GRACE_S of silence; the usage sent with
                                                  or after the finish reason is kept
    a body that ends or breaks before the         cut (stream_cut, a provider fault)
    finish reason
    an event whose data is not JSON               skipped and counted (catalogue row 26); more
                                                  than MAX_UNREADABLE_EVENTS in one stream: cut

A finish reason is the provider saying the answer is whole; the end marker after it only says
the server is done talking. Some servers, and the proxies in front of them, drop the marker or
the last chunk of the body: the caller still holds the whole answer, and calling that a cut
turned a finished answer into an in-band error and a failure on the provider's availability.

`HttpStream` is the stream the chain reads: its events, and the HTTP status once the status
line arrived, so that a stream that stalls before its headers records no status at all.

No I/O of its own and no classification rules: it reads the events it is handed and raises
what `engine.core.classify` builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import suppress

import httpx

from engine.core import classify
from engine.core.clock import Clock
from engine.core.messages import MessageEnd, StreamEvent
from engine.providers.base import StreamDecoder
from engine.providers.sse import ServerSentEvent
from engine.providers.transport_faults import classify_exception

__all__ = [
    "FINISH_GRACE_S",
    "MAX_UNREADABLE_EVENTS",
    "HttpStream",
    "UnreadableEvent",
    "read_events",
]

# A stream may carry a few events nobody can read (a proxy that mangled a chunk) and still be
# whole; more than this many in one stream and it is broken: a cut (catalogue rows 26 and 21).
# Not a setting: it says what a broken stream is, not how patient an operator is.
MAX_UNREADABLE_EVENTS = 3
# After the finish reason only the usage and the end marker are still to come, sent at once by
# every server we know. A server that sends neither within this time has finished anyway. It
# is well under any sensible idle_timeout_s, whose stall would otherwise call it a failure.
FINISH_GRACE_S = 1.0
# After a stream's end marker, how much more is read to keep its connection reusable.
_DRAIN_LIMIT_S = 0.25
_DRAIN_LIMIT_EVENTS = 16


class UnreadableEvent(Exception):
    """An SSE event whose data is not JSON: `read_events` skips and counts it."""


class HttpStream:
    """A provider's stream: an async iterator of events (closing it closes the response), and
    `http_status`, the response's status once its status line arrived, None until then."""

    def __init__(self, open_events: Callable[[HttpStream], AsyncGenerator[StreamEvent, None]]):
        self.http_status: int | None = None
        self._events = open_events(self)  # nothing is sent before the first `__anext__`

    def __aiter__(self) -> HttpStream:
        return self

    def __anext__(self) -> Awaitable[StreamEvent]:
        return self._events.__anext__()  # the generator's own awaitable: no extra frame an event

    async def aclose(self) -> None:
        await self._events.aclose()


async def read_events(
    events: AsyncIterator[ServerSentEvent],
    decoder: StreamDecoder,
    feed: Callable[[ServerSentEvent], list[StreamEvent]],
    *,
    name: str,
    status: int,
    clock: Clock,
) -> AsyncGenerator[StreamEvent, None]:
    """The neutral events of one SSE body, through `feed` (the dialect's decoding of one event,
    raising `UnreadableEvent` for data that does not parse), to the stream's `MessageEnd`."""
    unreadable = 0  # events skipped because their data did not parse (row 26)
    while (sse := await _next(events, decoder, name=name, status=status, clock=clock)) is not None:
        try:
            decoded = feed(sse)
        except UnreadableEvent as exc:
            unreadable += 1
            if unreadable > MAX_UNREADABLE_EVENTS:
                raise classify.stream_fault(
                    "stream_cut",
                    f"{name}: stream cut: {unreadable} unreadable events",
                    status=status,
                ) from exc
            continue
        if decoder.done:
            # Before the last events go out: the consumer may close this stream as soon as it
            # sees the end, and an unread body costs the connection.
            await _drain(events, clock)
            for event in _counted(decoded, unreadable):
                yield event
            return
        for event in decoded:
            yield event
    if not decoder.finished:
        skipped = f", after {unreadable} unreadable events" if unreadable else ""
        raise classify.stream_fault(
            "stream_cut",
            f"{name}: stream cut: the body ended before the finish reason{skipped}",
            status=status,
        )
    for event in _counted(decoder.finish(), unreadable):
        yield event


async def _next(
    events: AsyncIterator[ServerSentEvent],
    decoder: StreamDecoder,
    *,
    name: str,
    status: int,
    clock: Clock,
) -> ServerSentEvent | None:
    """The next event, or None at the end of the body. Once the answer is finished, the end
    comes however it comes: a close, a connection that breaks, or a silence."""
    if decoder.finished:
        try:
            async with clock.timeout(FINISH_GRACE_S):
                return await anext(events)
        except (StopAsyncIteration, httpx.HTTPError, TimeoutError):
            return None
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None
    except httpx.TimeoutException as exc:
        raise classify_exception(exc, sent=True, status=status) from exc
    except httpx.HTTPError as exc:  # the connection broke mid-stream (row 21)
        raise classify.stream_fault(
            "stream_cut", f"{name}: stream cut: {exc}", status=status
        ) from exc


async def _drain(events: AsyncIterator[ServerSentEvent], clock: Clock) -> None:
    """Read what follows the end marker (normally just the end of the chunked body), so httpx
    can return the connection to the pool: closing a response that still has unread body
    throws its connection away, and the next stream pays a new TCP+TLS handshake."""
    with suppress(Exception):  # StopAsyncIteration, a timeout, a broken tail: all fine
        async with clock.timeout(_DRAIN_LIMIT_S):
            for _ in range(_DRAIN_LIMIT_EVENTS):
                await anext(events)


def _counted(events: list[StreamEvent], unreadable: int) -> list[StreamEvent]:
    """A stream's final events, its MessageEnd telling how many unreadable events it skipped."""
    if not unreadable:
        return events
    return [
        dataclasses.replace(e, unreadable_events=unreadable) if isinstance(e, MessageEnd) else e
        for e in events
    ]
