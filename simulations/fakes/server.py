"""The fake providers as one real HTTP/1.1 server, on asyncio streams.

Hand-written framing rather than an ASGI server, because the faults need what a well-behaved
server refuses to do: reset a connection after reading a request and before any header, send
a content-length the body never reaches, cut a chunked body before its last chunk, hold the
headers back for minutes. Requests are read with content-length or chunked bodies and served
keep-alive; replies come from `FakeApp` and are written as their `Reply` says.

`connect_*` faults cannot be produced once a connection is accepted: the server resets the
connection instead (for a real refusal, point the client at a closed port).

Use it as `async with FakeProviders() as fake:`, from sync code as
`with FakeProviders.start_in_thread() as fake:`, or run `serve_forever(host, port)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import socket
import struct
import threading
from collections.abc import Callable
from email.utils import format_datetime
from http import HTTPStatus
from typing import Any, TypeVar

from simulations.fakes.app import Controlled, FakeApp, Incoming
from simulations.fakes.reply import Reply

T = TypeVar("T")

_MAX_LINE = 65_536
_MAX_HEADERS = 200
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_REASONS = {520: "", 521: "", 522: "", 523: "", 524: "", 529: "Site Overloaded"}


class BadRequest(Exception):
    pass


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> tuple[Incoming, bool] | None:
    """One request and whether the connection stays open after it, or None when the client
    closed the connection between requests."""
    line = b"\r\n"
    while line in (b"\r\n", b"\n"):  # blank lines between requests are allowed
        line = await reader.readline()
        if not line:
            return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"bad request line {line[:80]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise BadRequest(f"bad header line {raw[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    else:
        raise BadRequest("too many headers")
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    path, _, query = target.partition("?")
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
    return Incoming(method.upper(), path, headers, body, query), keep_alive


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readline()
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


class FakeProviders(Controlled):
    """Fake Anthropic and OpenAI endpoints on one port, for tests, demos and the simulator."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, app: FakeApp | None = None, **config: Any
    ) -> None:
        self.app = app or FakeApp(**config)
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        # Connections accepted so far: tests see whether clients reuse pooled connections.
        self.connections_accepted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def anthropic_url(self) -> str:
        """What an Anthropic client takes as base_url: it appends /v1/messages itself."""
        return self.base_url

    @property
    def openai_url(self) -> str:
        """What an OpenAI client takes as base_url: it appends /chat/completions itself."""
        return self.base_url + "/v1"

    async def start(self) -> FakeProviders:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=_MAX_LINE
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def connections_closed(self, timeout: float) -> bool:
        """Wait up to `timeout` s for every connection open now to end; True if they all did.
        A fault that never answers must still let go once its client hangs up."""
        open_now = list(self._connections)
        if not open_now:
            return True
        _, pending = await asyncio.wait(open_now, timeout=timeout)
        return not pending

    async def __aenter__(self) -> FakeProviders:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- one connection ----------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_accepted += 1
        open_ = True
        try:
            while open_:
                try:
                    received = await read_request(reader, writer)
                except (BadRequest, ValueError, asyncio.LimitOverrunError):
                    writer.write(_BAD_REQUEST)
                    break
                if received is None:
                    break
                request, keep_alive = received
                open_ = await self._write(self.app.handle(request), reader, writer, keep_alive)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        except asyncio.CancelledError:
            # Only `stop()` cancels; on 3.11 the stream callback would log a cancelled task.
            pass
        finally:
            self._connections.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _write(
        self,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> bool:
        """Send one reply; False when the connection must not be reused."""
        if not await self._wait(reply.head_delay, reader):
            return False
        if reply.abort is not None:
            _drop(writer, reset=reply.abort != "fin")
            return False
        headers = list(reply.headers)
        headers.append(("date", format_datetime(self.app.clock.wall(), usegmt=True)))
        chunked = reply.pieces is not None
        if chunked:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(reply.declared_length or len(reply.body))))
        if not keep_alive:
            headers.append(("connection", "close"))
        writer.write(_head(reply.status, headers))
        if not chunked:
            writer.write(reply.body)
            await writer.drain()
            if reply.declared_length is not None and reply.declared_length > len(reply.body):
                _drop(writer, reset=False)
                return False
            return keep_alive
        for piece in reply.pieces or ():
            if not await self._wait(piece.delay, reader):
                return False
            if piece.data:  # an empty chunk would end the body
                writer.write(b"%x\r\n%s\r\n" % (len(piece.data), piece.data))
                await writer.drain()
        if reply.cut:
            _drop(writer, reset=False)
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep_alive

    async def _wait(self, seconds: float, reader: asyncio.StreamReader) -> bool:
        """Wait on the app's clock; False if the client hung up first (waits forever if inf)."""
        if seconds <= 0:
            return True
        hangup = asyncio.ensure_future(_until_eof(reader))
        sleep = asyncio.ensure_future(
            asyncio.Event().wait() if math.isinf(seconds) else self.app.clock.sleep(seconds)
        )
        try:
            await asyncio.wait({hangup, sleep}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (hangup, sleep):
                task.cancel()
            await asyncio.gather(hangup, sleep, return_exceptions=True)
        return hangup.cancelled()  # cancelled by us: the wait ended first

    # --- running it from sync code -----------------------------------------------------

    @classmethod
    def start_in_thread(
        cls, host: str = "127.0.0.1", port: int = 0, **config: Any
    ) -> FakeProviders:
        """Serve from a daemon thread with its own event loop; stop with `close()`."""
        fake = cls(host, port, **config)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(fake.start())
                ready.set_result(None)
                loop.run_forever()
                loop.run_until_complete(fake.stop())
            except BaseException as e:  # surface start-up failures to the caller
                if not ready.done():
                    ready.set_exception(e)
            finally:
                loop.close()

        fake._thread = threading.Thread(target=run, name=f"fake-providers:{port}", daemon=True)
        fake._thread.start()
        ready.result(timeout=10)
        return fake

    def close(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> FakeProviders:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _on_app(self, fn: Callable[[], T]) -> T:
        # From another thread the app is changed on its own loop, between two requests.
        if self._thread is None or self._loop is None or threading.current_thread() is self._thread:
            return fn()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            try:
                done.set_result(fn())
            except BaseException as e:
                done.set_exception(e)

        self._loop.call_soon_threadsafe(call)
        return done.result(timeout=10)


async def _until_eof(reader: asyncio.StreamReader) -> None:
    while await reader.read(65_536):
        pass


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    try:
        reason = _REASONS.get(status) or HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _drop(writer: asyncio.StreamWriter, *, reset: bool) -> None:
    """Close the connection: with a TCP RST (SO_LINGER 0) when `reset`, else a clean FIN."""
    if reset:
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    else:
        writer.close()


def serve_forever(host: str = "127.0.0.1", port: int = 8900, **config: Any) -> None:
    """Run the fake providers until interrupted (the `switchover fake-providers` command)."""

    async def main() -> None:
        async with FakeProviders(host, port, **config) as fake:
            print(
                f"fake providers on {fake.base_url}: anthropic base_url {fake.anthropic_url}, "
                f"openai base_url {fake.openai_url}",
                flush=True,
            )
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
