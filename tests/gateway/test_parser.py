"""The gateway parses HTTP/1.1 with llhttp, through uvicorn's httptools protocol (issue 23, item
7): what it refuses that h11 let through, and what the guarded protocol keeps on it, over raw
sockets with the helpers of test_protocol_errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import GATEWAY_KEY, GatewayFactory
from .test_protocol_errors import assert_protocol_error, request, send, until_closed


@pytest.fixture
def running(gateway: GatewayFactory) -> Iterator[Any]:
    yield gateway({"support": ["claude/primary"]}, keys=[GATEWAY_KEY])


def test_a_body_framed_by_both_length_and_chunks_gets_a_400(running: Any):
    """Two framings of one body are how requests are smuggled past a proxy in front; h11
    took the chunks and served it."""
    data = (
        b"POST /v1/messages HTTP/1.1\r\nhost: g\r\ncontent-length: 5\r\n"
        b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    message = assert_protocol_error(until_closed(send(running.server.port, data)), 400)
    assert "malformed" in message


def test_a_head_over_16_kib_that_arrives_whole_is_served(running: Any):
    """The 431 is for a head still arriving past 16 KiB; one read (loopback carries 20 KB in
    one) holding the whole head is parsed, as with h11."""
    data = request("GET", "/healthz", x_big="a" * 20_000, connection="close")
    assert until_closed(send(running.server.port, data)).status == 200


def test_pipelined_requests_are_answered_in_order_on_one_connection(running: Any):
    """The second and third requests arrive while the first is being served: each waits its
    turn on the same connection, none is lost to the head timer or the idle timer."""
    data = (
        request("GET", "/healthz")
        + request("GET", "/no-such-page")
        + request("GET", "/healthz", connection="close")
    )
    answer = until_closed(send(running.server.port, data))
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answer.data) == [b"200", b"404", b"200"]
    assert not answer.reset
