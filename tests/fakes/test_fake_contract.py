"""One contract for both peers: every fault in the catalogue looks the same to an httpx client
whether it comes over a socket from FakeProviders or in process from FakeTransport."""

from __future__ import annotations

import json

import httpx
import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, an_body, oa_body

from simulations.fakes import CATALOGUE, FakeProviders, FakeTransport

# Short waits, so that the contract runs in real time in well under a second per fault.
QUICK = {
    "timeout_504": "timeout_504:delay=0",
    "slow_drip": "slow_drip:interval=0,count=2",
    "slow_tokens": "slow_tokens:interval=0",
}
TIMEOUT = httpx.Timeout(2.0, read=0.1)
SOCKET_FAULTS = [f.name for f in CATALOGUE if not f.name.startswith(("connect_", "dns_", "tls_"))]


async def outcome(client: httpx.AsyncClient, dialect: str, fault: str, stream: bool) -> tuple:
    """What a client can observe, without the random ids."""
    if dialect == "anthropic":
        path, headers, body = "/v1/messages", AN_HEADERS, an_body(stream=stream)
    else:
        path, headers, body = "/v1/chat/completions", OA_HEADERS, oa_body(stream=stream)
    headers = {**headers, "x-fake-fault": QUICK.get(fault, fault)}
    try:
        async with client.stream(
            "POST", path, headers=headers, json=body, timeout=TIMEOUT
        ) as response:
            head = (response.status_code, response.headers.get("content-type"))
            data = b""
            try:
                async for chunk in response.aiter_bytes():
                    data += chunk
            except httpx.TransportError as e:
                return (*head, type(e).__name__, len(data) > 0)
    except httpx.TransportError as e:
        return (type(e).__name__,)
    return (*head, _shape(data))


def _shape(data: bytes) -> object:
    text = data.decode()
    try:
        parsed = json.loads(text)
    except ValueError:
        lines = [line.split(":")[0] for line in text.splitlines() if line]
        return lines  # SSE field names in order, or the first words of an HTML page
    return sorted(parsed) if isinstance(parsed, dict) else parsed


@pytest.fixture
async def peers():
    async with (
        FakeProviders() as server,
        httpx.AsyncClient(base_url=server.base_url) as over_socket,
        httpx.AsyncClient(transport=FakeTransport(), base_url="http://fake") as in_process,
    ):
        yield over_socket, in_process


@pytest.mark.parametrize("fault", SOCKET_FAULTS)
async def test_the_server_and_the_transport_serve_each_fault_alike(peers, fault):
    over_socket, in_process = peers
    for dialect in ("anthropic", "openai"):
        for stream in (False, True):
            expected = await outcome(over_socket, dialect, fault, stream)
            assert await outcome(in_process, dialect, fault, stream) == expected, (dialect, stream)
