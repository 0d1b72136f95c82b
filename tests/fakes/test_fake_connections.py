"""Connection-level faults: what an httpx client sees when the fake drops, cuts or stalls the
connection. The transport must raise exactly what the socket server makes httpx raise."""

from __future__ import annotations

import time

import httpx
import pytest

FAST = httpx.Timeout(5.0, read=0.3)


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_reset_before_headers_is_a_read_error(realtime, dialect):
    with pytest.raises(httpx.ReadError):
        await realtime.call(dialect, "reset")


async def test_a_clean_close_before_headers_is_a_protocol_error(realtime):
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await realtime.anthropic(fault="reset:mode=fin")


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_short_content_length_body_is_a_protocol_error(realtime, dialect):
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        await realtime.call(dialect, "truncated")


async def test_a_cut_chunked_body_is_a_protocol_error(realtime):
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        await realtime.openai(fault="truncated_chunked")


async def test_the_headers_arrive_only_after_the_read_timeout(realtime):
    realtime.client.timeout = FAST
    with pytest.raises(httpx.ReadTimeout):
        await realtime.anthropic(fault="read_timeout")
    assert [c.fault for c in realtime.fake.calls()] == ["read_timeout"]


async def test_a_slow_first_byte_within_the_timeout_is_a_normal_answer(realtime):
    started = time.monotonic()
    response = await realtime.openai(fault="read_timeout:delay=0.1")
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.1


async def test_gateway_timeout_comes_after_its_delay(realtime):
    started = time.monotonic()
    response = await realtime.anthropic(fault="timeout_504:delay=0.1")
    assert response.status_code == 504
    assert time.monotonic() - started >= 0.1


async def test_the_connection_is_reused_after_normal_answers_and_errors(server):
    local_ports = set()
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        for fault in ("ok", "529", "bad_gateway", "ok"):
            response = await client.post(
                "/v1/messages",
                headers={
                    "x-api-key": "k",
                    "anthropic-version": "2023-06-01",
                    "x-fake-fault": fault,
                },
                json={
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )
            local_ports.add(response.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(local_ports) == 1


async def test_a_server_cannot_refuse_a_connection_so_it_resets_it(server):
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        with pytest.raises(httpx.ReadError):
            await client.post(
                "/v1/messages",
                headers={
                    "x-api-key": "k",
                    "anthropic-version": "2023-06-01",
                    "x-fake-fault": "connect_refused",
                },
                json={
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "hi"}],
                },
            )


async def test_a_closed_port_is_a_connect_error(server):
    port = server.port
    await server.stop()
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/_fake/health")


async def test_chunked_request_bodies_are_read(server):
    async def body():
        yield b'{"model": "m", "max_tokens": 5, '
        yield b'"messages": [{"role": "user", "content": "chunks"}]}'

    async with httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.post(
            "/v1/messages",
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
            content=body(),
        )
    assert response.json()["content"][0]["text"] == "echo: chunks"
