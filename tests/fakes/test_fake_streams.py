"""SSE streams in both dialects: the normal sequence and the streaming faults."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from helpers.wire import SEARCH_AN, SEARCH_OA

LONG = "the quick brown fox jumps over the lazy dog " * 3


async def test_anthropic_stream_follows_the_documented_event_order(backend):
    streamed = await backend.stream("anthropic", text=LONG)
    assert streamed.error is None
    assert streamed.response.headers["content-type"].startswith("text/event-stream")
    names = streamed.names
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"} and len(names[3:-3]) > 1
    assert [d["type"] for d in streamed.data] == names  # the event name is data.type
    text = "".join(d["delta"]["text"] for d in streamed.data if d["type"] == "content_block_delta")
    assert text == "echo: " + LONG
    start, delta = streamed.data[0], streamed.data[-2]
    assert start["message"]["content"] == [] and start["message"]["stop_reason"] is None
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > start["message"]["usage"]["output_tokens"]


async def test_openai_stream_sends_role_first_then_content_then_usage_then_done(backend):
    streamed = await backend.stream("openai", text=LONG, stream_options={"include_usage": True})
    chunks = streamed.data
    assert streamed.events[-1] == (None, "[DONE]")
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "echo: " + LONG
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


async def test_openai_stream_without_include_usage_has_no_usage_chunk(backend):
    chunks = (await backend.stream("openai")).data
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)


async def test_anthropic_streams_a_tool_call_as_partial_json(backend):
    data = (await backend.stream("anthropic", text="weather in Paris", tools=[SEARCH_AN])).data
    start = next(d for d in data if d["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["input"] == {}
    partial = [d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta"]
    assert partial[0] == ""
    assert json.loads("".join(partial)) == {"query": "weather in Paris"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"


async def test_openai_streams_a_tool_call_with_id_and_name_only_first(backend):
    chunks = (await backend.stream("openai", text="weather in Paris", tools=[SEARCH_OA])).data
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "search"
    assert all(
        set(c) == {"index", "function"} and set(c["function"]) == {"arguments"} for c in calls[1:]
    )
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {
        "query": "weather in Paris"
    }
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_stream_cut_drops_the_connection_after_n_events(backend, dialect):
    streamed = await backend.stream(dialect, "stream_cut:after_events=4", text=LONG)
    assert isinstance(streamed.error, httpx.RemoteProtocolError)
    assert len(streamed.events) == 4
    assert "message_stop" not in streamed.names and (None, "[DONE]") not in streamed.events


async def test_a_cleanly_closed_cut_stream_just_ends_early(backend):
    streamed = await backend.stream("anthropic", "stream_cut:after_events=2,close=clean")
    assert streamed.error is None
    assert streamed.names == ["message_start", "ping"]


@pytest.mark.parametrize(
    ("type_", "anthropic_type", "openai_type"),
    [("overloaded_error", "overloaded_error", "service_unavailable_error"),
     ("api_error", "api_error", "server_error"),
     ("rate_limit_error", "rate_limit_error", "requests")],
)  # fmt: skip
async def test_stream_error_sends_an_in_band_error_in_each_dialect(
    backend, type_, anthropic_type, openai_type
):
    an = await backend.stream("anthropic", f"stream_error:type={type_},after_events=4", text=LONG)
    assert an.error is None and an.names[-1] == "error" and len(an.names) == 5
    assert an.data[-1] == {
        "type": "error",
        "error": {"type": anthropic_type, "message": an.data[-1]["error"]["message"]},
    }
    oa = await backend.stream("openai", f"stream_error:type={type_},after_events=2", text=LONG)
    assert oa.data[-1]["error"]["type"] == openai_type
    assert (None, "[DONE]") not in oa.events


def _text(data: list) -> str:
    """The answer's text in the parsed events of either dialect."""
    return "".join(
        d["delta"].get("text", "")
        if d.get("type") == "content_block_delta"
        else (d["choices"][0]["delta"].get("content") or "" if d.get("choices") else "")
        for d in data
    )


def _unreadable(streamed) -> list[int]:
    """Positions of the events whose data is not JSON (the [DONE] sentinel aside)."""
    positions = []
    for i, (name, data) in enumerate(streamed.events):
        if name == ":" or data == "[DONE]":
            continue
        try:
            json.loads(data)
        except ValueError:
            positions.append(i)
    return positions


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_bad_event_slips_unreadable_events_into_a_whole_stream(backend, dialect):
    healthy = await backend.stream(dialect, text=LONG)
    streamed = await backend.stream(dialect, "bad_event:after_events=4,count=2", text=LONG)
    assert streamed.error is None
    assert _unreadable(streamed) == [4, 5]
    assert streamed.events[4][1] == '{"broken'
    assert [n for i, n in enumerate(streamed.names) if i not in (4, 5)] == healthy.names
    readable = [
        json.loads(d)
        for i, (_, d) in enumerate(streamed.events)
        if i not in (4, 5) and d != "[DONE]"
    ]
    assert _text(readable) == "echo: " + LONG


async def test_bad_event_in_anthropic_is_a_named_event_but_never_an_error_event(backend):
    streamed = await backend.stream("anthropic", "bad_event", text=LONG)
    assert _unreadable(streamed) == [3]
    assert streamed.names[3] == "content_block_delta"
    assert streamed.names[-1] == "message_stop"


async def test_bad_event_in_openai_is_a_data_line_and_the_stream_still_ends_with_done(backend):
    streamed = await backend.stream("openai", "bad_event", text=LONG)
    assert _unreadable(streamed) == [3]
    assert streamed.names[3] is None
    assert streamed.events[-1] == (None, "[DONE]")


@pytest.mark.parametrize(("dialect", "keepalive"), [("anthropic", "ping"), ("openai", ":")])
async def test_slow_drip_sends_only_keepalives(backend, dialect, keepalive):
    streamed = await backend.stream(dialect, "slow_drip:interval=0.01,count=5")
    assert streamed.names == [keepalive] * 5
    assert isinstance(streamed.error, httpx.RemoteProtocolError)


async def test_slow_drip_can_start_the_message_then_carry_on(backend):
    streamed = await backend.stream(
        "anthropic", "slow_drip:interval=0.01,count=3,start=true,then=ok"
    )
    assert streamed.names[:5] == ["message_start", "ping", "ping", "ping", "ping"]
    assert streamed.names[-1] == "message_stop"


async def test_slow_tokens_space_the_content_deltas(realtime):
    started = time.monotonic()
    streamed = await realtime.stream("openai", "slow_tokens:interval=0.03", text="a b c")
    deltas = [c for c in streamed.data if c["choices"][0]["delta"].get("content")]
    assert time.monotonic() - started >= 0.03 * len(deltas) * 0.9


async def test_latency_token_interval_paces_every_stream(realtime):
    realtime.fake.latency(token_interval_ms=30)
    started = time.monotonic()
    await realtime.stream("anthropic", text="a b c")
    assert time.monotonic() - started >= 0.025


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_stream_as_json_answers_a_stream_request_with_plain_json(backend, dialect):
    streamed = await backend.stream(dialect, "stream_as_json")
    assert streamed.response.headers["content-type"] == "application/json"
    body = json.loads(streamed.text)
    assert body.get("type") == "message" or body.get("object") == "chat.completion"


async def test_refusal_streams_with_the_refusal_stop_reason(backend):
    an = (await backend.stream("anthropic", "refusal")).data
    assert an[-2]["delta"]["stop_reason"] == "refusal"
    oa = (await backend.stream("openai", "refusal")).data
    assert oa[-1]["choices"][0]["finish_reason"] == "content_filter"


async def test_streaming_faults_without_a_stream_take_their_nearest_form(backend):
    with pytest.raises(httpx.RemoteProtocolError):
        await backend.anthropic(fault="stream_cut")
    assert (await backend.anthropic(fault="stream_error")).status_code == 529
    assert (await backend.openai(fault="stream_error:type=api_error")).status_code == 500
    an = await backend.anthropic(fault="bad_event:count=4")  # simply the healthy answer
    assert an.status_code == 200 and an.json()["content"][0]["text"] == "echo: hello"
    oa = await backend.openai(fault="bad_event:count=4")
    assert oa.status_code == 200 and oa.json()["choices"][0]["message"]["content"] == "echo: hello"
