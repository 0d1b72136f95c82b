"""The gateway's HTTP/1.1 connections: uvicorn's httptools protocol (llhttp, the parser of
Node.js, in C) with the guards uvicorn lacks, so that callers who send slowly, or never finish,
cannot hold a worker's file descriptors. httptools, not h11: a worker spends 11-17 % less CPU
a request on it (docs/benchmarks.md, "Gateway: where a worker's CPU goes").

Each connection is in one phase; every phase that waits on the caller is bounded:

    phase    waiting for                              bounded by
    head     the request line and headers, from the   header_timeout_s, then a 408 and close
             connection or from the first byte after  (uvicorn has no head timeout at all)
             the previous response
    busy     the application (reading the body,       body_timeout_s (the app answers 408 in
             running the chain, sending)              the caller's dialect), the chain's budget
    idle     the next request on a kept-alive one     keep_alive_timeout_s (uvicorn's timer)
    closing  the caller to take our error answer      LINGER_S, then closed

At `max_connections` (per worker) a new connection displaces the oldest one waiting on its
caller (a head that has not arrived, else an idle one), so a caller whose head arrives
promptly is always served; when every connection is busy, the new one gets a 503. The errors
answered here (400, 431, 408, 503) carry one JSON body both official SDKs parse.

Also here: the loop factory uvicorn runs on, whose exception handler logs one line per kind per
minute (an accept loop out of descriptors otherwise logs a traceback per try), and `OriginForm`,
which turns an absolute-form request target into the path the app routes on.

Never here: dialects' bodies, the chain, anything the application decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import socket
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from engine.gateway.dialects.anthropic import error_type_for

log = logging.getLogger("switchover.gateway")

# A head still arriving past this gets a 431 (h11's buffer, which the gateway used to run on;
# llhttp has no limit of its own). One that arrives whole in one read is parsed whatever its size.
MAX_HEAD_BYTES = 16 * 1024
LINGER_S = 1.0  # closing with unread bytes resets the connection and loses our answer
MAX_LINGERING = 16  # connections draining at once, per worker: the rest close at once
LOG_INTERVAL_S = 60.0
LOOP_FACTORY = "engine.gateway.protocol:new_event_loop"
AT_THE_LIMIT = "the gateway is at its connection limit; retry"

Phase = Literal["head", "busy", "idle", "closing", "closed"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one worker's connections may cost (from [gateway]; see engine.gateway.server)."""

    header_timeout_s: float = 10.0
    max_connections: int = 448


def error_response(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 error answer: Anthropic's error shape plus OpenAI's `code` and `param`,
    so either SDK reads the message; the connection closes after it."""
    error = {"type": error_type_for(status), "message": message, "code": None, "param": None}
    body = json.dumps({"type": "error", "error": error}).encode()
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _no_delay(transport: asyncio.Transport) -> None:
    """TCP_NODELAY on every accepted connection. asyncio sets it only when the listening
    socket was made with protocol IPPROTO_TCP, and uvicorn's (with --workers, or a socket
    handed in) is made with protocol 0: each answer written in two pieces then waited ~40 ms
    for Nagle's algorithm to meet the caller's delayed ACK (measured: 44 ms a request)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Throttle:
    """Whether a line of some kind may be logged now: one per kind per `interval_s`. Kinds are
    bounded (past `max_kinds` they share one), so no caller can grow the table."""

    def __init__(
        self,
        interval_s: float = LOG_INTERVAL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = 64,
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._max_kinds = max_kinds
        self._seen: dict[str, list[float]] = {}  # kind → [logged at, suppressed since]

    def admit(self, kind: str) -> int | None:
        """None: stay quiet. Otherwise log, saying how many of this kind were left out."""
        if kind not in self._seen and len(self._seen) >= self._max_kinds:
            kind = "(other)"
        now = self._clock()
        seen = self._seen.get(kind)
        if seen is not None and now - seen[0] < self.interval_s:
            seen[1] += 1
            return None
        self._seen[kind] = [now, 0]
        return 0 if seen is None else int(seen[1])

    def suffix(self, suppressed: int) -> str:
        if not suppressed:
            return ""
        return f" ({suppressed} more like this in the last {self.interval_s:g} s not logged)"


class LoopErrorLog:
    """The serving loop's exception handler. asyncio calls it for an accept that failed
    (`socket.accept() out of system resource`, once a second per listening socket while
    descriptors run out) and for callbacks that raised: one line per kind per minute, and no
    traceback for an OSError (the traceback is asyncio's own code)."""

    def __init__(self, logger: logging.Logger = log, throttle: Throttle | None = None) -> None:
        self._log = logger
        self._throttle = throttle or Throttle()

    def __call__(self, loop: asyncio.AbstractEventLoop | None, context: dict[str, Any]) -> None:
        message = str(context.get("message") or "unhandled exception in the event loop")
        exc = context.get("exception")
        # Messages may embed a callback's repr, with addresses: the kind is the text before it.
        kind = f"{message.split('<', 1)[0][:80]}|{type(exc).__name__}"
        suppressed = self._throttle.admit(kind)
        if suppressed is None:
            return
        line = message
        if isinstance(exc, OSError):
            line = f"{message}: {exc}"
        elif exc is not None:
            line = f"{message}: {type(exc).__name__}: {exc}"
        exc_info = exc if isinstance(exc, BaseException) and not isinstance(exc, OSError) else None
        self._log.error("%s%s", line, self._throttle.suffix(suppressed), exc_info=exc_info)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's loop factory (`loop=LOOP_FACTORY`, a string so that it reaches every worker):
    asyncio's own loop, with the throttled exception handler. Not uvloop: measured, it took no
    CPU off a worker's request (docs/benchmarks.md, "Gateway: where a worker's CPU goes")."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(LoopErrorLog())
    return loop


# uvicorn's per-request warnings (a malformed request, an unsupported upgrade): a flood of bad
# requests is one line a minute, not one per request.
_NOTICES = Throttle()


class _QuietWarnings:
    """uvicorn's logger as one connection sees it, with `warning` throttled per message."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        suppressed = _NOTICES.admit(msg)
        if suppressed is not None:
            self._logger.warning(msg + _NOTICES.suffix(suppressed), *args, **kwargs)


class _Room:
    """One server's open connections, and those waiting on their callers, oldest first."""

    def __init__(self) -> None:
        self.open: set[GuardedHttpToolsProtocol] = set()
        self.heads: dict[GuardedHttpToolsProtocol, None] = {}  # insertion order: oldest first
        self.idle: dict[GuardedHttpToolsProtocol, None] = {}
        self.lingering: set[GuardedHttpToolsProtocol] = set()  # answered, draining, not yet closed

    def oldest_waiting(self) -> GuardedHttpToolsProtocol | None:
        for waiting in (self.heads, self.idle):
            for connection in waiting:
                return connection
        return None


_ROOMS: weakref.WeakKeyDictionary[ServerState, _Room] = weakref.WeakKeyDictionary()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's HttpToolsProtocol, with the phases of the module docstring. uvicorn builds one
    per connection; `limits` is bound with functools.partial (engine.gateway.server)."""

    def __init__(
        self,
        config: Any,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.logger = _QuietWarnings(self.logger)  # type: ignore[assignment]
        self.limits = limits
        self.phase: Phase = "head"
        self._room = _ROOMS.setdefault(server_state, _Room())
        self._timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # of the head now arriving
        self._head_begun = False  # llhttp is inside a request line or headers

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        room = self._room
        if len(room.open) >= self.limits.max_connections:
            victim = room.oldest_waiting()
            if victim is None:  # every connection is serving a request: this one must wait
                self._warn_at_limit("refused a connection")
                self._close(503, AT_THE_LIMIT)
                return
            self._warn_at_limit(f"closed the oldest {victim.phase} connection")
            # An idle one is closed as its keep-alive timeout would; its descriptor is needed now.
            victim._close(503 if victim.phase == "head" else None, AT_THE_LIMIT, linger=False)
        room.open.add(self)
        self._enter("head")

    def data_received(self, data: bytes) -> None:
        if self.phase == "closing":
            return  # drained before the close: nobody reads it
        if self.phase == "idle":
            self._enter("head")  # the first byte of the next request: its head's clock starts
        if self.phase == "head":
            self._head_bytes += len(data)
        cycle = self.cycle
        super().data_received(data)
        if self.phase == "closing":
            return  # a 400 went out
        if self.cycle is not cycle:
            self._enter("busy")  # uvicorn made the request's cycle: the head is in
        elif self.phase == "head" and self._head_bytes > MAX_HEAD_BYTES:
            self._close(431, f"the request line and headers are over {MAX_HEAD_BYTES // 1024} KiB")

    def on_message_begin(self) -> None:
        self._head_begun = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head_begun = False
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.phase == "closing" or self.transport.is_closing():
            return
        if not self.cycle.response_complete:
            self._enter("busy")  # a pipelined request was waiting: uvicorn has started it
        elif self._head_begun:
            self._unset_keepalive_if_required()  # part of the next head is here: not idle
            self._enter("head")
        else:
            self._enter("idle")

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter("closed")
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self.phase == "closing":
            self.transport.close()
            return
        super().shutdown()

    def send_400_response(self, msg: str) -> None:
        """After llhttp refused the request (uvicorn's plain-text answer, replaced)."""
        self._close(400, "malformed HTTP request: not valid HTTP/1.1")

    def _head_timed_out(self) -> None:
        self._timer = None
        seconds = self.limits.header_timeout_s
        self._close(408, f"the request head did not arrive within {seconds:g} s")

    def _close(self, status: int | None, message: str, *, linger: bool = True) -> None:
        """Our JSON error (none for `status` None, or when this request's response already
        began), then the close. With `linger`, what the caller still sends is drained for up to
        LINGER_S first (or until it closes), so that its unread bytes do not turn our close into
        a reset that loses the answer."""
        self._enter("closing")
        transport = self.transport
        if transport.is_closing():
            return
        cycle = self.cycle
        between = cycle is None or cycle.response_complete  # no request, or its answer is out
        if not between:
            cycle.disconnected = True  # the app's answer, if any, is dropped
            cycle.message_event.set()
        if status is not None and (between or not cycle.response_started):
            transport.write(error_response(status, message))
        room = self._room
        if linger and transport.can_write_eof() and len(room.lingering) < MAX_LINGERING:
            room.lingering.add(self)
            transport.write_eof()  # eof_received then closes when the caller does
            self._timer = self.loop.call_later(LINGER_S, transport.close)
        else:
            transport.close()

    def _enter(self, phase: Phase) -> None:
        room = self._room
        room.heads.pop(self, None)
        room.idle.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if phase in ("closing", "closed"):
            room.open.discard(self)
            room.lingering.discard(self)
        self.phase = phase
        if phase == "head":
            self._head_bytes = 0
            room.heads[self] = None
            timeout = self.limits.header_timeout_s
            self._timer = self.loop.call_later(timeout, self._head_timed_out)
        elif phase == "idle":
            room.idle[self] = None

    def _warn_at_limit(self, what: str) -> None:
        suppressed = _NOTICES.admit(what)
        if suppressed is not None:
            limit = self.limits.max_connections
            log.warning(
                "at the limit of %d connections: %s%s", limit, what, _NOTICES.suffix(suppressed)
            )


_SCHEMES = ("http://", "https://")


class OriginForm:
    """ASGI middleware: a request target in absolute form (`POST http://host/v1/messages`,
    which HTTP/1.1 servers must accept) is routed by its path, like the origin form."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"][:8].lower().startswith(_SCHEMES):
            scope = {**scope, "path": origin_form(scope["path"])}
            if scope.get("raw_path"):
                scope["raw_path"] = origin_form(scope["raw_path"]).encode("latin-1")
        await self.app(scope, receive, send)


def origin_form(target: str | bytes) -> str:
    """`http://host:port/p/a/t/h` → `/p/a/t/h` (and `/` when there is no path)."""
    text = target.decode("latin-1") if isinstance(target, bytes) else target
    scheme, sep, rest = text.partition("://")
    if not sep or f"{scheme.lower()}://" not in _SCHEMES:
        return text
    slash = rest.find("/")
    return "/" if slash < 0 else rest[slash:]
