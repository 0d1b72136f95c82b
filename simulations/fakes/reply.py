"""What the fake puts on the wire for one request, independent of how it is carried.

A `Reply` is a plan: status, headers, body, the waits, and how the exchange ends (complete,
cut short, or the connection dropped before any header). `server.py` carries it over a real
socket and `transport.py` turns it into an `httpx.Response` (or the httpx exception a socket
would have produced), so both serve exactly the same bytes and faults. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# How the connection goes away before any response header: "rst" resets it, "fin" closes it
# cleanly; the connect_* variants happen before the request is sent (only FakeTransport can
# produce them; the server falls back to "rst").
Abort = Literal["rst", "fin", "connect_refused", "connect_timeout", "dns_failure", "tls_failure"]


@dataclass(frozen=True)
class Piece:
    """Bytes sent after waiting `delay` seconds (`inf`: never; empty `data`: only the wait)."""

    data: bytes
    delay: float = 0.0


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    # A body sent with content-length...
    body: bytes = b""
    # ...or, when `pieces` is set, a chunked body sent piece by piece (SSE streams).
    pieces: list[Piece] | None = None
    # Seconds before the status line (`inf`: the headers never come).
    head_delay: float = 0.0
    abort: Abort | None = None
    # A content-length larger than `body`: the body is cut short and the connection closed.
    declared_length: int | None = None
    # The chunked body ends by dropping the connection instead of with its last chunk.
    cut: bool = False
    # Did the fake do (and so would a provider bill) the work? For the call log.
    paid: bool = False


@dataclass(frozen=True)
class Event:
    """One SSE event as sent, and whether it carries content (token pacing applies to it)."""

    data: bytes
    content: bool = False
