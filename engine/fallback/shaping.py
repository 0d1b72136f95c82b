"""What a route does around its fallback loop, beyond the policy: the order its targets are
tried in for a request (`Arranger`, implemented by `engine.fallback.order.TargetOrder`) and putting
masked personal data back into a streamed answer (`restore_events`).

Nothing here decides a retry or a fallback; that is `engine.fallback.chain`'s business.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from engine.behaviours.pii import Masker, StreamRestorer
from engine.core.messages import (
    MessageEnd,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

if TYPE_CHECKING:
    from engine.fallback.target import Target


class Arranger(Protocol):
    async def arrange(self, route: str, targets: Sequence[Target]) -> Sequence[Target]:
        """The targets in the order this request should try them (a subset when the operator
        disabled some, never empty)."""
        ...

    async def drills(self, route: str) -> Mapping[str, datetime]:
        """Targets under a fault drill on `route`, with the drill's end (wall clock)."""
        ...


async def restore_events(
    events: AsyncIterator[StreamEvent], masker: Masker
) -> AsyncIterator[StreamEvent]:
    """`events` with the masker's placeholders turned back into the caller's values. A
    placeholder may be cut across deltas, so text is held back until it cannot be one; what is
    held is released before the next tool call starts and before the stream ends."""
    text = masker.stream_restorer()
    arguments: dict[int, StreamRestorer] = {}  # per tool call: its JSON arrives in pieces
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                released = text.feed(event.text)
                if released:
                    yield TextDelta(released)
                continue
            if isinstance(event, ToolCallDelta):
                restorer = arguments.setdefault(event.index, masker.stream_restorer())
                released = restorer.feed(event.arguments)
                if released:
                    yield ToolCallDelta(event.index, released)
                continue
            if isinstance(event, ToolCallStart | MessageEnd | StreamError):
                for held in _flush(text, arguments):
                    yield held
            yield event
        for held in _flush(text, arguments):  # a stream that ended in error
            yield held
    finally:
        await events.aclose()  # type: ignore[attr-defined]


def _flush(text: StreamRestorer, arguments: dict[int, StreamRestorer]) -> list[StreamEvent]:
    out: list[StreamEvent] = []
    rest = text.flush()
    if rest:
        out.append(TextDelta(rest))
    for index, restorer in arguments.items():
        rest = restorer.flush()
        if rest:
            out.append(ToolCallDelta(index, rest))
    return out
