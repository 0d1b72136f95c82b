"""The HTTP transport under the providers: aiohttp moves the bytes, httpx stays the API.

httpx's own transport (httpcore's pool) spends most of its time managing the pool once a few
dozen requests are in flight; aiohttp's connector does not (`python -m bench.transports`; the
figures are in docs/decisions.md, "Transport"). `AiohttpTransport` is an
`httpx.AsyncBaseTransport`, so the providers keep httpx's client, requests, responses, timeouts
and exceptions, and `transport=` still takes any other.

It must never report a failure differently from httpx's own transport, because
`engine.core.classify`
decides from the exception's class whether the provider can have acted on (and billed) the
request. aiohttp's failures are translated by this module's table, and only there
(engine.providers.transport_errors):

    aiohttp                                              httpx
    -- before any byte of the request was written -------------------------------------------
    no free connection within the pool timeout           PoolTimeout
    ConnectionTimeoutError (DNS + TCP + TLS too slow)    ConnectTimeout
    ClientConnectorError: refused, DNS, TLS, certificate ConnectError
    InvalidURL, NonHttpUrlClientError                    UnsupportedProtocol
    -- before the request was fully written: not sent -----------------------------------------
    one write blocked longer than the write timeout      WriteTimeout
    any other failure (reset, closed, lost)              WriteError
    -- after the request was written: maybe billed ---------------------------------------------
    SocketTimeoutError (no byte within the read timeout) ReadTimeout
    ServerDisconnectedError (closed, no or half answer)  RemoteProtocolError
    ClientPayloadError (body shorter than announced)     RemoteProtocolError
    ClientResponseError (malformed status or header)     RemoteProtocolError
    ClientOSError, any other ClientError (reset, lost)   ReadError

The messages are aiohttp's own words less the HTTP status its parser borrows (`describe`):
a body cut mid-way says "the connection closed mid-body (transfer encoding)", never "400".

"Written" is known exactly: the body goes out through `_Body`, which records when its last byte
was handed to the socket; a request without a body counts as written once connected. Two rows
differ from httpcore on purpose or by necessity. A reset while the body is still being written
is a WriteError here, where httpcore swallows the failed write, looks for an early answer and
reports the ReadError that follows (maybe billed, for a request the provider never saw whole).
A body cut by a reset is a RemoteProtocolError here and a ReadError in httpcore: aiohttp does
not say which it was, and both are a truncated answer to the engine.

httpx's timeouts are taken from the request's `timeout` extension: `pool` bounds the wait for a
free connection (a semaphore of `max_connections` slots, because aiohttp's own connect timeout
would cover that wait too), `connect` bounds DNS, TCP and TLS, `write` bounds each blocked write
of the body (aiohttp has no write timeout), `read` bounds each wait for the next bytes of the
answer. All run on the event loop's clock, like anyio's, so under `VirtualClock.run` they follow
virtual time exactly as httpx's own transport does. `max_keepalive_connections` is not enforced:
aiohttp keeps every idle connection until `keepalive_expiry`.

Never adds a header, a cookie, credentials or a proxy of its own: aiohttp would do all four by
default (User-Agent and Content-Type, its cookie jar, `.netrc`, the proxy variables), and each of
those is httpx's business, above the transport.
"""

from __future__ import annotations

import asyncio
import math
import urllib.request
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload
from yarl import URL

from engine.providers.transport_errors import (
    FOREIGN,
    WriteTimedOut,
    describe,
    httpx_class,
    translate,
)

__all__ = ["AiohttpTransport", "default_transport", "describe", "httpx_class", "translate"]

# httpx's own defaults, so that swapping the transport changes nothing a caller configured.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
# A body goes out in pieces of this size, each under the write timeout (what httpcore does
# per socket send).
_PIECE = 64 * 1024
# Headers aiohttp would add when the request lacks them; httpx already chose.
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "Content-Type", "User-Agent")


def default_transport() -> httpx.AsyncBaseTransport | None:
    """The transport a provider uses when none is passed: `AiohttpTransport`, or None (httpx's
    own) when the environment names a proxy, which httpx follows only with its own transport."""
    if any(urllib.request.getproxies().get(scheme) for scheme in ("http", "https", "all")):
        return None
    return AiohttpTransport()


# --- the transport -------------------------------------------------------------------------------


@dataclass
class _OnLoop:
    """What belongs to one event loop: aiohttp's session (and so its pool) and the pool slots."""

    loop: asyncio.AbstractEventLoop
    session: aiohttp.ClientSession
    slots: asyncio.Semaphore | None


class AiohttpTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over aiohttp's connector, with httpx's timeouts, limits and exceptions."""

    def __init__(
        self,
        *,
        verify: Any = True,
        cert: Any = None,
        trust_env: bool = True,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        # `trust_env` here means what it means to httpx's transport: SSL_CERT_FILE/_DIR.
        self._ssl = httpx.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        self._limits = limits
        self._on_loop: _OnLoop | None = None

    def _current(self) -> _OnLoop:
        loop = asyncio.get_running_loop()
        state = self._on_loop
        if state is not None and state.loop is loop:
            return state
        if state is not None:  # used from a new loop: the old one's connections cannot move
            state.session.detach()
        connector = aiohttp.TCPConnector(
            ssl=self._ssl,
            limit=0,  # the slots below are the limit, so that a pool wait is a PoolTimeout
            keepalive_timeout=self._limits.keepalive_expiry,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
            skip_auto_headers=_NO_AUTO_HEADERS,
            auto_decompress=False,  # httpx decodes the content-encoding
            trust_env=False,  # no proxy variables, no .netrc: see default_transport
        )
        most = self._limits.max_connections
        self._on_loop = _OnLoop(loop, session, asyncio.Semaphore(most) if most else None)
        return self._on_loop

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        body = _Body.of(request, timeouts.get("write"))
        # As httpx would write them (case and order kept), less the framing of a body of
        # unknown length: aiohttp chunks that itself and refuses a header saying so.
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower() != b"transfer-encoding"
        ]
        state = self._current()
        release = _nothing
        if state.slots is not None:
            await _acquire(state.slots, timeouts.get("pool"), request)
            release = state.slots.release
        try:
            response = await state.session.request(
                request.method,
                URL(str(request.url), encoded=True),  # already encoded by httpx: as it is
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                    ceil_threshold=math.inf,  # to the millisecond, as httpx; never rounded up
                ),
                server_hostname=_sni(request),
            )
        except FOREIGN as exc:
            release()
            raise translate(exc, request, sent=body is None or body.sent) from exc
        except BaseException:
            release()
            raise
        version = response.version
        extensions: dict[str, Any] = {
            "http_version": f"HTTP/{version.major}.{version.minor}".encode()
            if version
            else b"HTTP/1.1"
        }
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_ResponseStream(response, request, release),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        state, self._on_loop = self._on_loop, None
        if state is not None:
            await state.session.close()


async def _acquire(slots: asyncio.Semaphore, timeout: float | None, request: httpx.Request) -> None:
    if not slots.locked():
        await slots.acquire()  # free: no timer to arm
        return
    try:
        async with asyncio.timeout(timeout):
            await slots.acquire()
    except TimeoutError:
        raise httpx.PoolTimeout(
            "no free connection within the pool timeout", request=request
        ) from None


def _nothing() -> None:
    pass


def _sni(request: httpx.Request) -> str | None:
    hostname = request.extensions.get("sni_hostname")
    return hostname.decode("ascii") if isinstance(hostname, bytes) else hostname


class _Body(Payload):
    """The request body as aiohttp writes it, in pieces under the write timeout, and knowing
    when its last byte went out (`sent`): the line between "not sent" and "maybe billed"."""

    def __init__(self, content: bytes | AsyncIterable[bytes], size: int | None, write: Any):
        super().__init__(content)
        self._size = size
        self._write_timeout: float | None = write
        self.sent = False

    @classmethod
    def of(cls, request: httpx.Request, write_timeout: float | None) -> _Body | None:
        try:
            content: bytes | AsyncIterable[bytes] = request.content
        except httpx.RequestNotRead:  # a streaming body, read as it is written
            length = request.headers.get("content-length", "")
            size = int(length) if length.isdigit() else None
            return cls(request.stream, size, write_timeout)  # type: ignore[arg-type]
        return cls(content, len(content), write_timeout) if content else None

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        if isinstance(self._value, bytes):
            return self._value.decode(encoding, errors)
        raise TypeError("a streaming body cannot be decoded before it is sent")

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        async for chunk in self._chunks():
            for start in range(0, len(chunk), _PIECE):
                try:
                    async with asyncio.timeout(self._write_timeout):
                        await writer.write(chunk[start : start + _PIECE])
                except TimeoutError:
                    raise WriteTimedOut(
                        f"a write blocked for more than {self._write_timeout} s"
                    ) from None
        self.sent = True

    async def _chunks(self) -> AsyncIterator[bytes]:
        if isinstance(self._value, bytes):
            yield self._value
            return
        async for chunk in self._value:
            yield chunk


class _ResponseStream(httpx.AsyncByteStream):
    """aiohttp's response body as httpx reads it; closing it frees the pool slot."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request, release: Any):
        self._response = response
        self._request = request
        self._release = release
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            async for chunk in content.iter_any():
                yield chunk
        except FOREIGN as exc:
            # aiohttp's reader raises its error before the bytes it received ahead of it (its
            # read checks the error first): a stream whose whole answer, finish reason and usage
            # arrived before the provider dropped the connection would lose its end, and be a
            # stream cut, whenever the loop saw the close before this reader caught up (a busy
            # gateway). They were sent, in order: the caller's parser decides what they make.
            if received := _received_unread(content):
                yield received
            raise translate(exc, self._request, sent=True) from exc

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # Back to the pool when the body was read to its end, else the connection closes.
            self._response.release()
        finally:
            self._release()


def _received_unread(content: aiohttp.StreamReader) -> bytes:
    """What `content` received and has not handed out yet, taken from it. aiohttp keeps it in
    `_buffer` from `_buffer_offset` on (3.9-3.14); another layout gives nothing, as before."""
    buffer, offset = getattr(content, "_buffer", None), getattr(content, "_buffer_offset", 0)
    if not buffer or not isinstance(offset, int):
        return b""
    received = b"".join(buffer)[offset:]
    buffer.clear()
    content._buffer_offset = 0
    return received
