"""Putting masked personal data back into a streamed answer (`engine.behaviours.pii` masks it).

A placeholder may be cut across deltas, so text is held back until it cannot be one; what is
held is released before the next tool call starts and before the stream ends. Pure like the
masking: no I/O, no logging, never a value kept beyond the stream. Nothing here imports
`engine.behaviours.pii`: a masker is seen through `Placeholders`, the two things restoring
needs of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from typing import Protocol

from engine.core.messages import (
    MessageEnd,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = ["Placeholders", "StreamRestorer", "restore_events"]


class Placeholders(Protocol):
    """What restoring needs of a `Masker`: the placeholders it issued, and text restored."""

    @property
    def issued(self) -> Collection[str]: ...

    def restore_text(self, text: str) -> str: ...


class StreamRestorer:
    """Restores placeholders in text that arrives in pieces (stream deltas): a placeholder may be
    split across deltas. Use one per stream of text (the answer, each tool call's arguments)."""

    def __init__(self, masker: Placeholders) -> None:
        self._masker = masker
        self._pending = ""

    def feed(self, piece: str) -> str:
        """What can be released now, holding back a possible partial placeholder at the end."""
        buffer = self._pending + piece
        cut = self._partial_start(buffer)
        self._pending = buffer[cut:]
        return self._masker.restore_text(buffer[:cut])

    def flush(self) -> str:
        """The rest, at the end of the stream."""
        rest, self._pending = self._pending, ""
        return self._masker.restore_text(rest)

    def _partial_start(self, buffer: str) -> int:
        # A placeholder holds a single `[`, so a cut made just before the `[` of an unfinished
        # one never splits a finished one, and the pieces restore exactly as the whole would.
        issued = self._masker.issued
        if not issued:
            return len(buffer)
        longest = max(map(len, issued))
        i = buffer.find("[", max(0, len(buffer) - longest + 1))
        while i != -1:
            tail = buffer[i:]
            if any(p.startswith(tail) and p != tail for p in issued):
                return i
            i = buffer.find("[", i + 1)
        return len(buffer)


async def restore_events(
    events: AsyncIterator[StreamEvent], masker: Placeholders
) -> AsyncIterator[StreamEvent]:
    """`events` with the masker's placeholders turned back into the caller's values."""
    text = StreamRestorer(masker)
    arguments: dict[int, StreamRestorer] = {}  # per tool call: its JSON arrives in pieces
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                released = text.feed(event.text)
                if released:
                    yield TextDelta(released)
                continue
            if isinstance(event, ToolCallDelta):
                restorer = arguments.setdefault(event.index, StreamRestorer(masker))
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
