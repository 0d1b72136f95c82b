"""The fake providers as an in-process httpx transport: the same answers and faults as the
socket server, without sockets, so tests and the simulator can run on a virtual clock.

`FakeTransport` hands each request to the same `FakeApp` the server uses and plays the
`Reply` back the way a socket would have delivered it: waits go through the app's clock,
the client's read timeout fires when a wait is longer than it, and connection faults become
the httpx exceptions a real connection raises (checked against the server in the tests):

    connect_refused, dns_failure, tls_failure → httpx.ConnectError
    connect_timeout                           → httpx.ConnectTimeout after the connect timeout
    reset (rst)                               → httpx.ReadError before any header
    reset (mode=fin)                          → httpx.RemoteProtocolError before any header
    truncated, truncated_chunked, stream_cut  → httpx.RemoteProtocolError while reading the body
    a wait longer than the read timeout       → httpx.ReadTimeout

    client = httpx.AsyncClient(transport=FakeTransport(script=["529", "timeout_504", "ok"]))
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from engine.core.clock import Clock
from simulations.fakes.app import Controlled, FakeApp, Incoming
from simulations.fakes.control import Spec
from simulations.fakes.reply import Reply

_CONNECT_ERRORS = {
    "connect_refused": "[Errno 111] Connection refused",
    "dns_failure": "[Errno -2] Name or service not known",
    "tls_failure": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get "
    "local issuer certificate (_ssl.c:1006)",
}


class FakeTransport(httpx.AsyncBaseTransport, Controlled):
    def __init__(
        self,
        script: Iterable[Spec] | None = None,
        *,
        app: FakeApp | None = None,
        keep_bodies: bool = False,
        **config: Any,
    ) -> None:
        """`script`: faults for the next requests, whatever the model; then `default_fault`.
        `keep_bodies`: keep every JSON request body as it arrived (`bodies`, `sent_to`), for
        tests of what leaves the process. `config` goes to `FakeApp` (clock, seed, valid_keys,
        reply_text, ...)."""
        self.app = app or FakeApp(**config)
        if script is not None:
            self.app.controls.script("*", script)
        self.keep_bodies = keep_bodies
        self.bodies: list[tuple[str, dict[str, Any]]] = []  # (model, body), with keep_bodies
        self.in_flight = self.most_in_flight = 0  # requests not yet answered with a head

    def sent_to(self, model: str) -> list[dict[str, Any]]:
        """The bodies of the requests for `model`, in order (needs `keep_bodies`)."""
        return [body for m, body in self.bodies if m == model]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._handle(request)
        finally:
            self.in_flight -= 1

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if self.keep_bodies:
            with contextlib.suppress(ValueError):
                parsed = json.loads(body)
                if isinstance(parsed, dict):
                    self.bodies.append((str(parsed.get("model", "")), parsed))
        headers = {k.lower(): v for k, v in request.headers.items()}
        incoming = Incoming(
            request.method, request.url.path, headers, body, request.url.query.decode()
        )
        reply = self.app.handle(incoming)
        timeouts = request.extensions.get("timeout") or {}
        clock = self.app.clock
        if reply.abort in _CONNECT_ERRORS:
            raise httpx.ConnectError(_CONNECT_ERRORS[reply.abort], request=request)
        if reply.abort == "connect_timeout":
            await _wait(clock, math.inf, timeouts.get("connect"), request, httpx.ConnectTimeout)
        await _wait(clock, reply.head_delay, timeouts.get("read"), request)
        if reply.abort == "fin":
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if reply.abort is not None:
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        framing = (
            [("transfer-encoding", "chunked")]
            if reply.pieces is not None
            else [("content-length", str(reply.declared_length or len(reply.body)))]
        )
        return httpx.Response(
            reply.status,
            headers=[*reply.headers, *framing],
            stream=_ReplyStream(reply, clock, timeouts.get("read"), request),
            extensions={"http_version": b"HTTP/1.1"},
        )


class _ReplyStream(httpx.AsyncByteStream):
    def __init__(
        self, reply: Reply, clock: Clock, read_timeout: float | None, request: httpx.Request
    ) -> None:
        self._reply = reply
        self._clock = clock
        self._read_timeout = read_timeout
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reply = self._reply
        if reply.pieces is None:
            if reply.body:
                yield reply.body
            if reply.declared_length is not None and reply.declared_length > len(reply.body):
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    f"(received {len(reply.body)} bytes, expected {reply.declared_length})",
                    request=self._request,
                )
            return
        for piece in reply.pieces:
            await _wait(self._clock, piece.delay, self._read_timeout, self._request)
            if piece.data:
                yield piece.data
        if reply.cut:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)",
                request=self._request,
            )


async def _wait(
    clock: Clock,
    seconds: float,
    limit: float | None,
    request: httpx.Request,
    timeout_error: type[httpx.TimeoutException] = httpx.ReadTimeout,
) -> None:
    """Wait as a socket read would: at most `limit` seconds, then the httpx timeout error."""
    if seconds <= 0:
        return
    if limit is not None and seconds > limit:
        await clock.sleep(limit)
        raise timeout_error("timed out", request=request)
    if math.isinf(seconds):
        await asyncio.Event().wait()  # no timeout and no answer: like a socket, wait forever
    await clock.sleep(seconds)
