"""Requests HTTP/1.1 itself refuses, over raw sockets: every answer the gateway gives before
the application sees a request is JSON both SDKs read, and an absolute-form target is routed
like any other (issue 18, item 8). The raw-socket helpers here serve test_slow_clients too."""

from __future__ import annotations

import json
import selectors
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from engine.gateway.protocol import error_response, origin_form

from .conftest import GATEWAY_KEY, GatewayFactory

# --- raw HTTP over a socket --------------------------------------------------------------


@dataclass
class Raw:
    """What came back on one connection before it closed."""

    data: bytes
    reset: bool = False  # the connection ended with a reset rather than a close
    closed_at: float = 0.0  # time.monotonic() when the end was seen

    @property
    def status(self) -> int:
        return int(self.data.split(b" ", 2)[1]) if self.data else 0

    @property
    def headers(self) -> dict[str, str]:
        head = self.data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
        return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head)}

    def json(self) -> Any:
        return json.loads(self.data.partition(b"\r\n\r\n")[2])


def send(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(data)
    return sock


def until_closed(sock: socket.socket, timeout_s: float = 10) -> Raw:
    """Everything the server sends until it closes the connection (AssertionError past the
    deadline: the server held it open)."""
    return until_all_closed([sock], timeout_s)[sock]


def until_all_closed(
    socks: Iterable[socket.socket], timeout_s: float = 20
) -> dict[socket.socket, Raw]:
    """Read every socket until the server closes it; the answers, by socket."""
    deadline = time.monotonic() + timeout_s
    answers: dict[socket.socket, Raw] = {}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, Raw(b""))
        while selector.get_map():
            left = deadline - time.monotonic()
            assert left > 0, f"{len(selector.get_map())} connections still open"
            for key, _ in selector.select(timeout=left):
                sock, raw = key.fileobj, key.data
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    raw.reset, chunk = True, b""
                if chunk:
                    raw.data += chunk
                    continue
                selector.unregister(sock)
                raw.closed_at = time.monotonic()
                answers[sock] = raw
    return answers


def request(method: str, target: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "host: gateway"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def assert_protocol_error(raw: Raw, status: int) -> str:
    """The shape of every answer the protocol gives itself; its message."""
    assert raw.status == status, raw.data[:200]
    assert raw.headers["content-type"] == "application/json"
    assert raw.headers["connection"] == "close"
    body = raw.json()
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message", "code", "param"}
    return body["error"]["message"]


@pytest.fixture
def running(gateway: GatewayFactory) -> Iterator[Any]:
    yield gateway({"support": ["claude/primary"]}, keys=[GATEWAY_KEY])


# --- what h11 refuses ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"POST /v1/messages HTTP/1.1\r\nhost: g\r\nx-a: a\x00b\r\n\r\n", id="nul"),
        pytest.param(b"GET /v1/caf\xc3\xa9 HTTP/1.1\r\nhost: g\r\n\r\n", id="non-ascii-path"),
        pytest.param(b"GARBAGE\r\n\r\n", id="malformed-request-line"),
        pytest.param(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", id="header-without-colon"),
        pytest.param(b"POST / HTTP/1.1\r\nhost: g\r\ncontent-length: ten\r\n\r\n", id="length"),
        pytest.param(
            b"POST /v1/messages HTTP/1.1\r\nhost: g\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            id="broken-chunk",
        ),
    ],
)
def test_a_request_http_cannot_parse_gets_a_json_400(running: Any, data: bytes):
    message = assert_protocol_error(until_closed(send(running.server.port, data)), 400)
    assert "malformed" in message


def test_a_head_over_h11s_buffer_gets_a_431(running: Any):
    """h11 buffers at most 16 KiB of a head that has not ended yet."""
    sock = send(running.server.port, b"GET / HTTP/1.1\r\nhost: g\r\nx-big: " + b"a" * 20_000)
    message = assert_protocol_error(until_closed(sock), 431)
    assert "16 KiB" in message


def test_the_error_answer_is_one_well_formed_response():
    raw = Raw(error_response(503, "at the limit"))
    assert int(raw.headers["content-length"]) == len(raw.data.partition(b"\r\n\r\n")[2])
    assert raw.json()["error"] == {
        "type": "overloaded_error",
        "message": "at the limit",
        "code": None,
        "param": None,
    }


# --- the absolute form ----------------------------------------------------------------------


def test_an_absolute_form_target_reaches_the_anthropic_face(running: Any):
    port = running.server.port
    body = json.dumps(
        {"model": "support", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    target = f"http://127.0.0.1:{port}/v1/messages"
    headers = {"x_api_key": GATEWAY_KEY, "content_type": "application/json", "connection": "close"}
    answer = until_closed(send(port, request("POST", target, body, **headers)))
    assert answer.status == 200 and answer.json()["type"] == "message"
    assert answer.headers["x-switchover-route"] == "support"

    missing = until_closed(send(port, request("POST", target, b"", **headers)))
    assert missing.status == 400
    error = missing.json()  # Anthropic's shape: the face of the path, not OpenAI's default
    assert error["type"] == "error" and error["request_id"] == missing.headers["request-id"]


@pytest.mark.parametrize(
    ("target", "path"),
    [
        ("http://127.0.0.1:8787/v1/messages", "/v1/messages"),
        ("https://gateway.example/v1/chat/completions", "/v1/chat/completions"),
        ("HTTP://host", "/"),
        ("http://host/", "/"),
        (b"http://host/v1/models", "/v1/models"),
        ("/v1/messages", "/v1/messages"),
        ("ftp://host/x", "ftp://host/x"),
    ],
)
def test_the_absolute_form_loses_its_scheme_and_authority(target: str | bytes, path: str):
    assert origin_form(target) == path


def test_every_accepted_connection_sends_without_waiting_for_nagle(gateway: GatewayFactory):
    """asyncio sets TCP_NODELAY only on sockets listening with protocol IPPROTO_TCP, and
    uvicorn's are made with protocol 0: without it each answer waited ~40 ms for the caller's
    delayed ACK."""
    gw = gateway({"support": ["claude/primary"]})
    with socket.create_connection(("127.0.0.1", gw.server.port)) as caller:
        caller.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert caller.recv(4096).startswith(b"HTTP/1.1 200")
        [connection] = list(gw.server.server.server_state.connections)
        accepted = connection.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
