"""How a stream can end badly, in both dialects: finished without its terminator (no_done),
silent after N events (stream_stall), late to its first content (late_first_token), never
answered (read_timeout), or long with one unreadable event in it (bad_event)."""

from __future__ import annotations

import json

import httpx
import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, an_body, oa_body, sse, with_fault

from engine.core.clock import VirtualClock
from simulations.fakes import FakeTransport
from simulations.fakes.model import words_text

from .test_fake_streams import LONG, _text, _unreadable

DIALECTS = ["anthropic", "openai"]
SHORT_READ = httpx.Timeout(5.0, read=0.5)
# The events each dialect sends before its first content: message_start, ping and
# content_block_start; OpenAI's role-only chunk.
BEFORE_CONTENT = {"anthropic": 3, "openai": 1}


def _content_events(dialect: str, data: list) -> list:
    if dialect == "anthropic":
        return [d for d in data if d["type"] == "content_block_delta"]
    return [c for c in data if c["choices"] and c["choices"][0]["delta"].get("content")]


# --- no_done: finished, but no [DONE] / message_stop -----------------------------------------


async def test_anthropic_no_done_sends_everything_up_to_message_delta_then_ends(backend):
    healthy = await backend.stream("anthropic", text=LONG)
    streamed = await backend.stream("anthropic", "no_done", text=LONG)
    assert streamed.error is None, "the body ends cleanly"
    assert streamed.names == healthy.names[:-1] and streamed.names[-1] == "message_delta"
    last = streamed.data[-1]
    assert last["delta"]["stop_reason"] == "end_turn" and last["usage"]["output_tokens"] > 1
    assert _text(streamed.data) == "echo: " + LONG


async def test_openai_no_done_sends_the_finish_reason_and_usage_but_no_done(backend):
    streamed = await backend.stream(
        "openai", "no_done", text=LONG, stream_options={"include_usage": True}
    )
    assert streamed.error is None
    assert all(data != "[DONE]" for _, data in streamed.events)
    finish, usage = streamed.data[-2:]
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    assert _text(streamed.data) == "echo: " + LONG


async def test_openai_no_done_without_include_usage_ends_on_the_finish_reason(backend):
    streamed = await backend.stream("openai", "no_done", text=LONG)
    assert streamed.data[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in streamed.data)
    assert streamed.events[-1][1] != "[DONE]"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_no_done_can_drop_the_connection_after_the_finish_reason(backend, dialect):
    streamed = await backend.stream(dialect, "no_done:close=abrupt", text=LONG)
    assert isinstance(streamed.error, httpx.RemoteProtocolError)
    healthy = await backend.stream(dialect, text=LONG)
    assert streamed.names == healthy.names[:-1]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_no_done_without_a_stream_is_the_healthy_answer(backend, dialect):
    response = await backend.call(dialect, "no_done")
    assert response.status_code == 200
    body = response.json()
    text = body["content"][0]["text"] if dialect == "anthropic" else None
    text = text or body["choices"][0]["message"]["content"]
    assert text == "echo: hello"


# --- stream_stall: N events, then silence on an open connection --------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stream_stall_sends_n_events_then_nothing_until_the_client_gives_up(
    realtime, dialect
):
    streamed = await realtime.stream(
        dialect, "stream_stall:after_events=5", timeout=SHORT_READ, text=LONG
    )
    assert isinstance(streamed.error, httpx.ReadTimeout)
    healthy = await realtime.stream(dialect, text=LONG)
    assert streamed.names == healthy.names[:5]
    sent = _text(streamed.data)
    assert sent and ("echo: " + LONG).startswith(sent), "the stall comes after some content"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stream_stall_by_default_stalls_before_any_content(realtime, dialect):
    streamed = await realtime.stream(dialect, "stream_stall", timeout=SHORT_READ, text=LONG)
    assert isinstance(streamed.error, httpx.ReadTimeout)
    assert len(streamed.events) == 1 < BEFORE_CONTENT[dialect] + 1
    assert _text(streamed.data) == ""


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stream_stall_without_a_stream_sends_half_the_body_then_stalls(realtime, dialect):
    path, headers, body = (
        ("/v1/messages", AN_HEADERS, an_body())
        if dialect == "anthropic"
        else ("/v1/chat/completions", OA_HEADERS, oa_body())
    )
    received = b""
    async with realtime.client.stream(
        "POST", path, headers=with_fault(headers, "stream_stall"), json=body, timeout=SHORT_READ
    ) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            async for chunk in response.aiter_bytes():
                received += chunk
    assert received.startswith(b'{"id":')
    with pytest.raises(ValueError):
        json.loads(received)  # half a body


# --- late_first_token: the stream opens at once, its content comes late -------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_late_first_token_opens_the_stream_but_holds_the_content(realtime, dialect):
    streamed = await realtime.stream(dialect, "late_first_token", timeout=SHORT_READ, text=LONG)
    assert isinstance(streamed.error, httpx.ReadTimeout)
    assert streamed.response.status_code == 200
    assert len(streamed.events) == BEFORE_CONTENT[dialect]
    assert _text(streamed.data) == ""


@pytest.mark.parametrize("dialect", DIALECTS)
def test_late_first_token_sends_the_first_content_after_the_delay_then_the_rest(dialect):
    """On a virtual loop the arrival time of every event is exact."""
    clock = VirtualClock()
    transport = FakeTransport(script=["late_first_token:delay=20"], clock=clock)
    path, headers, body = (
        ("/v1/messages", AN_HEADERS, an_body(LONG, stream=True))
        if dialect == "anthropic"
        else ("/v1/chat/completions", OA_HEADERS, oa_body(LONG, stream=True))
    )

    async def main() -> list[tuple[float, bytes]]:
        arrivals = []
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://fake", timeout=60) as client,
            client.stream("POST", path, headers=headers, json=body) as response,
        ):
            async for chunk in response.aiter_bytes():
                arrivals.append((clock.now(), chunk))
        return arrivals

    started = clock.now()
    arrivals = clock.run(main())
    at = [round(when - started, 6) for when, _ in arrivals]
    n = BEFORE_CONTENT[dialect]
    assert at[:n] == [0.0] * n, "head and message start at once"
    assert at[n:] == [20.0] * (len(at) - n), "the first content after the delay, then the rest"
    streamed = b"".join(chunk for _, chunk in arrivals).decode()
    data = [json.loads(d) for _, d in sse(streamed) if d != "[DONE]"]
    assert _text(data) == "echo: " + LONG


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_late_first_token_without_a_stream_answers_whole_after_the_delay(backend, dialect):
    backend.client.timeout = httpx.Timeout(None)  # the wait is virtual: no read timeout
    started = backend.clock.now()
    response = await backend.call(dialect, "late_first_token:delay=25")
    assert response.status_code == 200
    assert backend.clock.now() - started >= 25


# --- a connection that never answers lets go when the client does ---------------------------


@pytest.mark.parametrize(
    ("fault", "stream"),
    [
        ("read_timeout", False),
        ("read_timeout", True),
        ("stream_stall", True),
        ("stream_stall", False),
        ("late_first_token", True),
    ],
)
async def test_a_fault_that_never_answers_ends_its_connection_when_the_client_gives_up(
    server, fault, stream
):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=SHORT_READ) as client:
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream(
                "POST",
                "/v1/messages",
                headers=with_fault(AN_HEADERS, fault),
                json=an_body(stream=stream),
            ) as response:
                await response.aread()
    assert await server.connections_closed(timeout=10), "nothing left waiting on the server"
    assert [c.fault for c in server.calls()] == [fault]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_read_timeout_holds_a_stream_head_back_too(realtime, dialect):
    with pytest.raises(httpx.ReadTimeout):  # no head: the error comes before any response
        await realtime.stream(dialect, "read_timeout", timeout=SHORT_READ)
    assert [c.stream for c in realtime.fake.calls()] == [True]


# --- bad_event in a long stream ---------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_one_bad_event_after_nine_of_a_sixty_event_stream_is_the_tenth(backend, dialect):
    healthy = await backend.stream(dialect, "ok:words=120")
    assert len(healthy.events) >= 60
    streamed = await backend.stream(dialect, "bad_event:after_events=9,count=1,words=120")
    assert _unreadable(streamed) == [9]
    assert [n for i, n in enumerate(streamed.names) if i != 9] == healthy.names
    readable = [
        json.loads(d) for i, (_, d) in enumerate(streamed.events) if i != 9 and d != "[DONE]"
    ]
    assert _text(readable) == _text(healthy.data) == words_text(120)
    assert len(_content_events(dialect, readable)) > 50
