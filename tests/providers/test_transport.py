"""The providers' aiohttp transport against httpx's own, over real loopback sockets: every
connection fault is classified the same through the engine whichever transport carries it, and
httpx's timeouts, pool limit, streaming and closing behave the same. Each test runs once per
transport unless it is about one of them."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import aiohttp
import aiohttp.client_exceptions
import httpx
import pytest

from engine.core.attempt import Attempt
from engine.core.errors import AmbiguousFault, ProviderFault
from engine.core.messages import Message, Request
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.steps import WAITED_OUT
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.http import HttpProvider
from engine.providers.openai import OpenAIProvider
from engine.providers.transport import AiohttpTransport, default_transport, httpx_class
from simulations.fakes import FakeProviders

TRANSPORTS: dict[str, Callable[..., httpx.AsyncBaseTransport]] = {
    "httpx": httpx.AsyncHTTPTransport,
    "aiohttp": AiohttpTransport,
}
# Short limits, so that a hanging fault costs half a second.
POLICY = Policy(
    budget_s=10,
    attempt_timeout_s=0.5,
    first_token_timeout_s=0.5,
    idle_timeout_s=1.0,
    backoff_base_s=0.01,
    backoff_max_s=0.02,
    overload_backoff_s=0.01,
    min_attempt_budget_s=0.1,
)
ASK = Request(messages=(Message.user("Where is my order?"),), max_tokens=64)
# How late a timeout may fire on a busy two-core machine and still count as honoured.
SLACK_S = 1.5


@pytest.fixture(params=list(TRANSPORTS))
def make(request: pytest.FixtureRequest) -> Callable[..., httpx.AsyncBaseTransport]:
    return TRANSPORTS[request.param]


@pytest.fixture
async def fake() -> AsyncIterator[FakeProviders]:
    async with FakeProviders(port=0) as server:
        yield server


# --- the translation table -----------------------------------------------------------------

# Every client error aiohttp exports → the httpx exception for it (before the request was fully
# written, after). A new aiohttp class fails the completeness test until it is placed here.
ROWS: dict[type[BaseException], tuple[type[httpx.TransportError], type[httpx.TransportError]]] = {
    aiohttp.ClientConnectorError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ClientConnectorDNSError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ClientConnectorSSLError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ClientConnectorCertificateError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ClientSSLError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ClientProxyConnectionError: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ServerFingerprintMismatch: (httpx.ConnectError, httpx.ConnectError),
    aiohttp.ConnectionTimeoutError: (httpx.ConnectTimeout, httpx.ConnectTimeout),
    aiohttp.InvalidURL: (httpx.UnsupportedProtocol, httpx.UnsupportedProtocol),
    aiohttp.InvalidUrlClientError: (httpx.UnsupportedProtocol, httpx.UnsupportedProtocol),
    aiohttp.NonHttpUrlClientError: (httpx.UnsupportedProtocol, httpx.UnsupportedProtocol),
    aiohttp.InvalidUrlRedirectClientError: (httpx.UnsupportedProtocol, httpx.UnsupportedProtocol),
    aiohttp.NonHttpUrlRedirectClientError: (httpx.UnsupportedProtocol, httpx.UnsupportedProtocol),
    aiohttp.SocketTimeoutError: (httpx.WriteTimeout, httpx.ReadTimeout),
    aiohttp.ServerTimeoutError: (httpx.WriteTimeout, httpx.ReadTimeout),
    aiohttp.ServerDisconnectedError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.ClientPayloadError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.ClientResponseError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.ContentTypeError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.ClientHttpProxyError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.WSServerHandshakeError: (httpx.WriteError, httpx.RemoteProtocolError),
    aiohttp.ClientOSError: (httpx.WriteError, httpx.ReadError),
    aiohttp.ClientConnectionResetError: (httpx.WriteError, httpx.ReadError),
    aiohttp.ClientConnectionError: (httpx.WriteError, httpx.ReadError),
    aiohttp.ServerConnectionError: (httpx.WriteError, httpx.ReadError),
    aiohttp.UploadAbortedError: (httpx.WriteError, httpx.ReadError),
    aiohttp.RedirectClientError: (httpx.WriteError, httpx.ReadError),
    aiohttp.ClientError: (httpx.WriteError, httpx.ReadError),
}


def test_every_client_error_aiohttp_exports_has_a_row():
    exported = {
        kind
        for name in aiohttp.client_exceptions.__all__
        if isinstance(kind := getattr(aiohttp.client_exceptions, name), type)
        and issubclass(kind, aiohttp.ClientError)
    }
    assert exported == set(ROWS)


@pytest.mark.parametrize("failure", list(ROWS), ids=lambda kind: kind.__name__)
def test_each_aiohttp_failure_becomes_the_httpx_exception_of_its_row(failure):
    before, after = ROWS[failure]
    assert (httpx_class(failure, sent=False), httpx_class(failure, sent=True)) == (before, after)


# --- classification through the engine, fault by fault ----------------------------------------

# The primary's fault → how both of its attempts are recorded: (error_class, fault_kind,
# maybe billed). The chain then falls back, and the backup serves.
WIRE_FAULTS = {
    "reset": ("reset", "ambiguous", True),  # row 15: RST after the request, before any header
    "reset:mode=fin": ("reset", "ambiguous", True),  # row 15, with a clean close
    "read_timeout": ("read_timeout", "ambiguous", True),  # row 16
    "truncated": ("truncated", "ambiguous", True),  # row 17: content-length not reached
    "truncated_chunked": ("truncated", "ambiguous", True),  # row 17: last chunk missing
    "slow_drip": ("read_timeout", "ambiguous", True),  # row 23 without streaming
}
STREAM_FAULTS = {
    "reset": ("reset", "ambiguous", True),
    "reset:mode=fin": ("reset", "ambiguous", True),
    "stream_cut:after_events=1": ("stream_cut", "provider", False),  # row 21, before content
    "read_timeout": ("stream_stalled", "provider", False),  # the chain's first-token limit
    "slow_drip": ("stream_stalled", "provider", False),  # row 23
}


def _provider(dialect: str, base_url: str, transport: httpx.AsyncBaseTransport) -> HttpProvider:
    kind = AnthropicProvider if dialect == "anthropic" else OpenAIProvider
    return kind(dialect, base_url=base_url, api_key="k", transport=transport, connect_timeout_s=0.3)


async def _primary_then_backup(
    fake: FakeProviders, primary: HttpProvider, model: str, make: Callable, *, stream: bool
) -> list[Attempt]:
    attempts: list[Attempt] = []
    backup = _provider("openai", fake.openai_url, make())
    chain = Chain(
        "transport",
        [Target(primary, model), Target(backup, "backup")],
        policy=POLICY,
        hooks=[attempts.append],
    )
    try:
        if stream:
            async for _ in chain.stream(ASK):
                pass
        else:
            await chain.complete(ASK)
    finally:
        await primary.aclose()
        await backup.aclose()
    return attempts


def _assert_primary_failed_then_backup_served(attempts: list[Attempt], expected: tuple) -> None:
    """Retried once, then the backup; a wait that ran out moves on to the backup at once."""
    failed = 1 if expected[0] in WAITED_OUT else 2
    assert [(a.error_class, a.fault_kind, a.tokens_estimated) for a in attempts[:-1]] == [
        expected
    ] * failed
    assert [a.decision for a in attempts] == ["retry"] * (failed - 1) + ["fall_back", "served"]
    assert attempts[-1].model == "backup"


@pytest.mark.parametrize("fault", list(WIRE_FAULTS))
@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_wire_fault_is_classified_the_same_whichever_transport_carries_it(
    fake, make, dialect, fault
):
    url = fake.anthropic_url if dialect == "anthropic" else fake.openai_url
    primary = _provider(dialect, url, make())
    attempts = await _primary_then_backup(fake, primary, f"primary#{fault}", make, stream=False)
    _assert_primary_failed_then_backup_served(attempts, WIRE_FAULTS[fault])


@pytest.mark.parametrize("fault", list(STREAM_FAULTS))
@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_stream_fault_is_classified_the_same_whichever_transport_carries_it(
    fake, make, dialect, fault
):
    url = fake.anthropic_url if dialect == "anthropic" else fake.openai_url
    primary = _provider(dialect, url, make())
    attempts = await _primary_then_backup(fake, primary, f"primary#{fault}", make, stream=True)
    _assert_primary_failed_then_backup_served(attempts, STREAM_FAULTS[fault])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connecting is refused


@contextmanager
def _unanswered_port() -> Iterator[int]:
    """A port whose SYNs are dropped, as behind a black-holing firewall: a listener with a
    full accept queue. Connecting to it hangs until the connect timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.05)  # let the kernel settle the fillers' handshakes
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


@pytest.mark.parametrize("where", ["refused", "dns", "tls", "connect_timeout"])
async def test_a_connection_that_never_opens_is_classified_the_same(fake, make, where):
    """Row 14: nothing was sent, so nothing can have been billed."""
    with _unanswered_port() as silent:
        base_url = {
            "refused": f"http://127.0.0.1:{_closed_port()}",
            "dns": "http://switchover-no-such-host.invalid",
            "tls": fake.base_url.replace("http://", "https://"),
            "connect_timeout": f"http://127.0.0.1:{silent}",
        }[where]
        primary = _provider("anthropic", base_url, make())
        attempts = await _primary_then_backup(fake, primary, "primary", make, stream=False)
    _assert_primary_failed_then_backup_served(attempts, ("connect", "provider", False))
    assert fake.calls(model="primary") == []


# --- httpx's timeouts, from the request, honoured --------------------------------------------


async def _timed(call: Awaitable[object]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        await call
    except Exception as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


async def test_the_read_timeout_bounds_the_wait_for_the_answer(fake, make):
    """The provider's own per-attempt timeout, with no chain deadline around it."""
    provider = _provider("anthropic", fake.anthropic_url, make())
    async with provider:
        error, elapsed = await _timed(provider.complete(ASK, "m#read_timeout", timeout_s=0.3))
    assert isinstance(error, AmbiguousFault)
    assert error.error_class == "read_timeout"
    assert 0.3 <= elapsed < 0.3 + SLACK_S


async def test_the_connect_timeout_bounds_the_connection(make):
    with _unanswered_port() as port:
        provider = _provider("anthropic", f"http://127.0.0.1:{port}", make())
        async with provider:
            error, elapsed = await _timed(provider.complete(ASK, "m", timeout_s=5.0))
    assert isinstance(error, ProviderFault)
    assert (error.error_class, error.sent) == ("connect", False)
    assert 0.3 <= elapsed < 0.3 + SLACK_S


@asynccontextmanager
async def _server(handle: Callable) -> AsyncIterator[str]:
    """A hand-written HTTP server on loopback, for what the fake provider never does."""
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    writer.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
    )
    writer.close()


OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def _answer_each_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Keep-alive: answer "ok" to every request on the connection (bodies are content-length)."""
    while head := await reader.readuntil(b"\r\n\r\n"):
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(OK_HEAD + b"ok")
        await writer.drain()


async def test_the_pool_timeout_bounds_the_wait_for_a_free_connection(make):
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nok")  # two bytes owed
        await writer.drain()
        await asyncio.sleep(5)

    async with (
        _server(slow) as url,
        httpx.AsyncClient(transport=make(limits=httpx.Limits(max_connections=1))) as client,
        client.stream("GET", url),  # holds the only connection
    ):
        error, elapsed = await _timed(client.get(url, timeout=httpx.Timeout(5.0, pool=0.3)))
    assert isinstance(error, httpx.PoolTimeout)
    assert 0.3 <= elapsed < 0.3 + SLACK_S


async def test_the_write_timeout_bounds_a_write_the_server_does_not_read(make):
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async with _server(deaf) as url, httpx.AsyncClient(transport=make()) as client:
        body = b"x" * 32_000_000  # more than the socket buffers on both sides hold
        error, elapsed = await _timed(
            client.post(url, content=body, timeout=httpx.Timeout(5.0, write=0.3))
        )
    assert isinstance(error, httpx.WriteTimeout)
    assert 0.3 <= elapsed < 0.3 + SLACK_S


# --- pooling, streaming, closing -----------------------------------------------------------


async def test_connections_are_kept_alive_and_reused(make):
    opened = 0

    async def counting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened
        opened += 1
        await _answer_each_request(reader, writer)

    async with _server(counting) as url, httpx.AsyncClient(transport=make()) as client:
        for _ in range(5):
            assert (await client.post(url, content=b"hi")).text == "ok"
    assert opened == 1


async def test_a_stream_closed_before_its_end_gives_its_connection_back(make):
    """Its connection is closed rather than reused, but the pool slot is free again."""

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        while not writer.is_closing():
            writer.write(b"5\r\nchunk\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)

    limits = httpx.Limits(max_connections=1)
    async with _server(endless) as url, httpx.AsyncClient(transport=make(limits=limits)) as client:
        for _ in range(3):
            async with client.stream("GET", url, timeout=httpx.Timeout(2.0, pool=0.5)) as r:
                assert await anext(r.aiter_bytes())


async def test_a_streamed_body_arrives_as_it_is_sent(make):
    release = asyncio.Event()

    async def two_parts(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()  # the second part only once the client has read the first
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()

    async with (
        _server(two_parts) as url,
        httpx.AsyncClient(transport=make(), timeout=2.0) as client,
        client.stream("GET", url) as response,
    ):
        parts = response.aiter_bytes()
        assert await anext(parts) == b"first"
        release.set()
        assert b"".join([part async for part in parts]) == b"second"


async def test_a_body_cut_after_it_all_arrived_is_read_whole_before_its_error(make):
    """The provider sends its whole answer, then closes without the chunked body's end; the
    client reads only after the close has reached it (a busy gateway): every byte sent comes
    first, then the cut. aiohttp's own reader raises before what it already holds."""
    closed = asyncio.Event()

    async def all_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"5\r\nfirst\r\n6\r\nsecond\r\n")  # fmt: skip
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed.set()

    async with (
        _server(all_then_close) as url,
        httpx.AsyncClient(transport=make(), timeout=2.0) as client,
        client.stream("GET", url) as response,
    ):
        await closed.wait()
        for _ in range(50):  # loop turns, not time: the FIN is already on the loopback socket
            await asyncio.sleep(0)
        received = []
        with pytest.raises(httpx.RemoteProtocolError):
            async for part in response.aiter_raw():
                received.append(part)
        assert b"".join(received) == b"firstsecond"


async def test_closing_the_transport_closes_its_connections(make):
    closed = asyncio.Event()

    async def watching(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK_HEAD + b"ok")
        await writer.drain()
        await reader.read()  # until the client closes its end
        closed.set()

    transport = make()
    async with _server(watching) as url:
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get(url)
            assert not closed.is_set()
        await asyncio.wait_for(closed.wait(), 2.0)


async def test_the_request_goes_out_byte_for_byte_as_httpx_writes_it():
    seen: list[bytes] = []

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n", 2)[2] + await reader.readexactly(7))  # less the Host
        writer.write(OK_HEAD + b"ok")
        await writer.drain()

    async with _server(recording) as url:
        for make in TRANSPORTS.values():
            async with httpx.AsyncClient(transport=make(), headers={"X-Key": "k"}) as client:
                await client.post(url + "/v1/a%2Fb?q=%20", json={"a": 1}, headers={"x-b": "2"})
    assert len(seen) == 2
    assert seen[0] == seen[1]


# --- the aiohttp transport alone ---------------------------------------------------------------


async def test_a_reset_before_the_body_is_written_is_a_write_error():
    """The provider cannot act on half a body, so this is "not sent". httpx's own transport
    reports the read error that follows instead (httpcore ignores a failed write to look for
    an early answer), which the engine would record as maybe billed."""

    async def impatient(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1000)
        _reset(writer)

    async with _server(impatient) as url, httpx.AsyncClient(transport=AiohttpTransport()) as c:
        with pytest.raises(httpx.WriteError):
            await c.post(url, content=b"x" * 32_000_000, timeout=5.0)


def test_it_can_serve_one_event_loop_after_another():
    """As the sync facade or a test runner may do; each loop gets its own connections."""

    async def serve_twice(transport: AiohttpTransport) -> str:
        async with _server(_answer_each_request) as url:
            return (await httpx.AsyncClient(transport=transport).get(url)).text

    transport = AiohttpTransport()
    assert asyncio.run(serve_twice(transport)) == "ok"
    assert asyncio.run(serve_twice(transport)) == "ok"
    asyncio.run(transport.aclose())


@pytest.fixture
def no_proxy_configured(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for scheme in ("http", "https", "all"):
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)
    return monkeypatch


def test_providers_use_it_unless_given_a_transport(no_proxy_configured):
    default = OpenAIProvider("gpt", base_url="http://localhost:1/v1", api_key=None)
    given = OpenAIProvider(
        "gpt", base_url="http://localhost:1/v1", api_key=None, transport=httpx.MockTransport(print)
    )
    assert isinstance(default._client._transport, AiohttpTransport)
    assert isinstance(given._client._transport, httpx.MockTransport)


def test_a_proxy_in_the_environment_keeps_httpx_own_transport(no_proxy_configured):
    """httpx follows HTTPS_PROXY only with its own transport; going around a proxy the operator
    configured would be worse than being slower."""
    assert isinstance(default_transport(), AiohttpTransport)
    no_proxy_configured.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert default_transport() is None
