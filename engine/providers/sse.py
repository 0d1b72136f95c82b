"""An incremental Server-Sent Events parser, shared by both dialects.

It follows the WHATWG event-stream rules: `event`/`data`/`id`/`retry` fields, multi-line `data`
joined with newlines, `:` comment lines (keep-alives) dropped, and LF, CRLF or a lone CR as the
line end, wherever the network happens to split the bytes (a CRLF or a UTF-8 character may be cut
in two). It knows nothing about provider JSON and never decides what an event means; that is
each dialect's codec.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent", "aiter_sse", "parse_sse"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str | None = None  # None when the server sent no `event:` line (OpenAI never does)
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed it chunks as they arrive; it returns the events completed by each chunk."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # the start of a line whose end has not arrived yet
        self._skip_lf = False  # the last chunk ended in CR: a leading LF belongs to that CRLF
        self._started = False
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes | str) -> list[ServerSentEvent]:
        text = chunk if isinstance(chunk, str) else self._utf8.decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf:
            self._skip_lf = False
            text = text.removeprefix("\n")
        text = self._partial + text
        events: list[ServerSentEvent] = []
        start = 0
        for match in _LINE_END.finditer(text):
            event = self.feed_line(text[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._partial = text[start:]
        self._skip_lf = text.endswith("\r")
        return events

    def feed_line(self, line: str) -> ServerSentEvent | None:
        """One complete line without its line end; returns the event a blank line completes."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def close(self) -> list[ServerSentEvent]:
        """End of stream. A server that omits the final blank line still gets its last event
        delivered, but only when its lines are complete: an unterminated last line was cut by
        the network, and parsing it would turn a cut stream into garbage JSON."""
        self._utf8.decode(b"", final=True)
        self._partial = ""
        event = self._dispatch()
        return [event] if event is not None else []

    def _dispatch(self) -> ServerSentEvent | None:
        event = None
        if self._data:
            event = ServerSentEvent(
                data="\n".join(self._data), event=self._event, id=self._id, retry=self._retry
            )
        # `id` persists across events by the spec; the rest belongs to one event.
        self._event, self._data, self._retry = None, [], None
        return event


async def aiter_sse(chunks: AsyncIterable[bytes | str]) -> AsyncIterator[ServerSentEvent]:
    """The events of a byte (or text) stream, as soon as each is complete."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event


def parse_sse(chunks: bytes | str | Iterable[bytes | str]) -> list[ServerSentEvent]:
    """All events of a stream already in memory (tests, replay)."""
    decoder = SSEDecoder()
    if isinstance(chunks, bytes | str):
        chunks = [chunks]
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()
