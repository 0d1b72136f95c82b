"""The OpenAI adapter against a fake Chat Completions API (httpx.MockTransport) with real wire
bodies, including the habits of OpenAI-compatible servers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from helpers.provider_recorder import make_provider

from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    ProviderFault,
    RateLimited,
    RequestFault,
)
from engine.core.messages import (
    Image,
    Message,
    MessageEnd,
    Request,
    Text,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
    Usage,
    UsageUpdate,
)
from engine.providers import OpenAIProvider, Provider
from engine.providers.codec import parse_arguments
from engine.providers.openai import max_tokens_field_for
from engine.providers.openai_codec import encode_request

API_KEY = "sk-proj-test-SECRET"
MODEL = "gpt-4.1-mini"
REPORTED_MODEL = "gpt-4.1-mini-2025-04-14"
HI = Request(messages=(Message.user("hi"),))


# --- a fake Chat Completions API -------------------------------------------------------------


def make(answer: Callable[[httpx.Request], httpx.Response], **kwargs) -> tuple:
    return make_provider(OpenAIProvider, "gpt", API_KEY, answer, **kwargs)


def completion(
    message: dict, finish_reason: str | None = "stop", usage: dict | None = None
) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767600000,
        "model": REPORTED_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }


def ok(body: dict) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, json=body, headers={"x-request-id": "req_1"})


def chunk(delta: dict | None = None, finish_reason: str | None = None, **extra) -> dict:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1767600000,
        "model": REPORTED_MODEL,
        "choices": choices,
        "usage": None,
        **extra,
    }


def sse(*chunks: dict, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def streamed(body: bytes) -> Callable[[httpx.Request], httpx.Response]:
    headers = {"content-type": "text/event-stream; charset=utf-8", "x-request-id": "req_s"}
    return lambda request: httpx.Response(200, content=body, headers=headers)


def tool_delta(
    index: int, *, id: str | None = None, name: str | None = None, args: str = ""
) -> dict:
    call: dict = {"index": index, "function": {"arguments": args}}
    if id is not None:
        call.update(id=id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}


async def collect(provider: OpenAIProvider, request: Request = HI) -> list:
    return [event async for event in provider.stream(request, MODEL, timeout_s=30)]


def encode(request: Request, **kwargs) -> dict:
    return encode_request(request, MODEL, **kwargs)


# --- the request on the wire ---------------------------------------------------------------


async def test_request_goes_to_chat_completions_with_a_bearer_key():
    provider, fake = make(ok(completion({"content": "hello"})))
    await provider.complete(HI, MODEL, timeout_s=30)
    sent = fake.requests[0]
    assert sent.url == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert isinstance(provider, Provider) and API_KEY not in repr(provider)


async def test_any_compatible_base_url_gets_chat_completions_appended():
    provider, fake = make(ok(completion({"content": "x"})), base_url="http://vllm.local:8000/v1/")
    await provider.complete(HI.replace(max_tokens=50), MODEL, timeout_s=30)
    assert fake.requests[0].url == "http://vllm.local:8000/v1/chat/completions"
    assert fake.body["max_tokens"] == 50 and "max_completion_tokens" not in fake.body


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://myco.openai.azure.com/openai/v1", "max_completion_tokens"),
        ("http://localhost:8000/v1", "max_tokens"),
        ("https://api.deepseek.com/v1", "max_tokens"),
        ("https://openrouter.ai/api/v1", "max_tokens"),
    ],
)
def test_max_tokens_field_is_the_new_name_only_on_openais_own_hosts(base_url, field):
    assert max_tokens_field_for(base_url) == field


async def test_no_token_limit_is_sent_unless_asked_for():
    provider, fake = make(ok(completion({"content": "x"})))
    await provider.complete(HI, MODEL, timeout_s=30)
    assert "max_tokens" not in fake.body and "max_completion_tokens" not in fake.body
    provider, fake = make(ok(completion({"content": "x"})), default_max_tokens=256)
    await provider.complete(HI, MODEL, timeout_s=30)
    assert fake.body["max_completion_tokens"] == 256


def test_system_prompt_is_the_first_message_and_cache_marks_are_dropped():
    request = Request(
        messages=(Message("user", (Text("doc", cache=True),)),),
        system="Be brief.",
        cache_system=True,
    )
    assert encode(request)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "doc"},
    ]


def test_parameters_pass_through_without_clamping():
    body = encode(HI.replace(temperature=1.7, stop=("END", "STOP"), user="u-42"))
    assert body["temperature"] == pytest.approx(1.7)
    assert body["stop"] == ["END", "STOP"]
    assert body["user"] == "u-42"


def test_tool_calls_become_assistant_tool_calls_with_string_arguments():
    request = Request(
        messages=(
            Message.user("weather?"),
            Message(
                "assistant",
                (
                    ToolCall("toolu_01", "weather", {"city": "Paris"}),
                    ToolCall("call_2", "f", None, raw_arguments='{"broken": '),
                ),
            ),
        )
    )
    assistant = encode(request)["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_01",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "f", "arguments": '{"broken": '},
            },
        ],
    }


def test_assistant_text_is_kept_next_to_its_tool_calls():
    message = Message("assistant", (Text("Checking."), ToolCall("c1", "f", {})))
    assistant = encode(Request(messages=(message,)))["messages"][0]
    assert assistant["content"] == "Checking."
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


def test_each_tool_result_is_its_own_tool_message_before_the_user_text():
    message = Message(
        "user",
        (
            Text("which is warmer?"),
            ToolResult("call_a", (Text("18C"),)),
            ToolResult("call_b", (Text("24"), Text("C")), is_error=True),
        ),
    )
    assert encode(Request(messages=(message,)))["messages"] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_b", "content": "24C"},
        {"role": "user", "content": "which is warmer?"},
    ]


def test_image_in_a_tool_result_becomes_a_text_note():
    result = ToolResult("c1", (Text("screenshot: "), Image(media_type="image/png", data="AAA")))
    messages = encode(Request(messages=(Message("user", (result,)),)))["messages"]
    assert messages == [
        {"role": "tool", "tool_call_id": "c1", "content": "screenshot: [image omitted]"}
    ]


def test_user_images_become_image_url_parts_with_data_urls_for_inline_images():
    message = Message(
        "user",
        (
            Text("compare"),
            Image(media_type="image/png", data="iVBORw0"),
            Image(url="https://x/y.jpg"),
        ),
    )
    assert encode(Request(messages=(message,)))["messages"][0]["content"] == [
        {"type": "text", "text": "compare"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}},
    ]


def test_tools_become_functions():
    tools = (Tool("weather", "Current weather", {"type": "object", "properties": {"city": {}}}),)
    assert encode(HI.replace(tools=tools))["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {}}},
            },
        }
    ]


@pytest.mark.parametrize(
    ("choice", "wire", "parallel"),
    [
        (ToolChoice("auto"), "auto", None),
        (ToolChoice("any"), "required", None),
        (ToolChoice("none"), "none", None),
        (ToolChoice("tool", name="f"), {"type": "function", "function": {"name": "f"}}, None),
        (ToolChoice("auto", parallel=False), "auto", False),
        (ToolChoice("any", parallel=True), "required", True),
    ],
)
def test_tool_choice_maps_to_openai_values(choice, wire, parallel):
    body = encode(HI.replace(tools=(Tool("f"),), tool_choice=choice))
    assert body["tool_choice"] == wire
    assert body.get("parallel_tool_calls") == parallel


def test_tool_choice_is_not_sent_without_tools():
    body = encode(HI.replace(tool_choice=ToolChoice("auto", parallel=False)))
    assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_stream_requests_always_ask_for_usage():
    body = encode(HI, stream=True)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


# --- the answer ------------------------------------------------------------------------------


async def test_complete_maps_usage_so_that_input_excludes_cached_tokens():
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "cache_write_tokens": 50},
        "completion_tokens_details": {"reasoning_tokens": 100},
    }
    provider, _ = make(ok(completion({"content": "hello"}, usage=usage)))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.content == (Text("hello"),)
    assert response.usage == Usage(36, 300, cache_read_tokens=1920, cache_write_tokens=50)
    assert response.usage.total_input_tokens == 2006
    assert response.model == REPORTED_MODEL
    assert response.provider == "gpt"
    assert response.provider_request_id == "req_1"


def tool_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_content_null_with_tool_calls_is_a_valid_answer_and_arguments_are_parsed():
    message = {
        "content": None,
        "tool_calls": [
            tool_call("call_a", "weather", '{"city": "Paris"}'),
            tool_call("call_b", "now", ""),
            tool_call("call_c", "f", '{"city": "Ro'),
        ],
    }
    provider, _ = make(ok(completion(message, "tool_calls")))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.stop_reason == "tool_use"
    assert response.content == (
        ToolCall("call_a", "weather", {"city": "Paris"}, raw_arguments='{"city": "Paris"}'),
        ToolCall("call_b", "now", {}, raw_arguments=""),
        ToolCall("call_c", "f", None, raw_arguments='{"city": "Ro'),
    )


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [("", {}), ("  ", {}), ('{"a": [1]}', {"a": [1]}), ("[1, 2]", None), ("{'a': 1}", None)],
)
def test_arguments_that_are_not_a_json_object_give_none_and_keep_the_raw_string(raw, arguments):
    assert parse_arguments(raw) == (arguments, raw)


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("eos", "end_turn"),
    ],
)
async def test_finish_reasons_map_to_neutral_stop_reasons(finish, stop):
    provider, _ = make(ok(completion({"content": "x"}, finish)))
    assert (await provider.complete(HI, MODEL, timeout_s=30)).stop_reason == stop


async def test_tool_calls_with_finish_reason_stop_still_stop_for_tool_use():
    """Ollama and older vLLM say `stop` while returning tool calls."""
    message = {"content": "", "tool_calls": [tool_call("c1", "f", "{}")]}
    provider, _ = make(ok(completion(message, "stop")))
    assert (await provider.complete(HI, MODEL, timeout_s=30)).stop_reason == "tool_use"


async def test_content_filter_with_no_content_is_a_refusal_not_an_error():
    provider, _ = make(ok(completion({"content": None}, "content_filter")))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.stop_reason == "refusal" and response.content == ()


async def test_a_refusal_message_is_text_with_stop_reason_refusal():
    provider, _ = make(ok(completion({"content": None, "refusal": "I can't help with that."})))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.text == "I can't help with that."
    assert response.stop_reason == "refusal"


# --- failures ----------------------------------------------------------------------------------


async def test_insufficient_quota_is_an_account_fault_not_a_rate_limit():
    error = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    provider, _ = make(lambda r: httpx.Response(429, json=error, headers={"x-request-id": "req_q"}))
    with pytest.raises(AccountFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.status == 429 and caught.value.provider_request_id == "req_q"


async def test_rate_limit_carries_retry_after_ms_and_request_id():
    error = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    headers = {"retry-after-ms": "1500", "x-request-id": "req_r"}
    provider, _ = make(lambda r: httpx.Response(429, json=error, headers=headers))
    with pytest.raises(RateLimited) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.retry_after_s == pytest.approx(1.5)
    assert caught.value.provider_request_id == "req_r"


async def test_context_overflow_is_a_request_fault():
    error = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    provider, _ = make(lambda r: httpx.Response(400, json=error))
    with pytest.raises(RequestFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.status == 400


async def test_200_whose_body_is_an_error_object_is_classified_by_it():
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    provider, _ = make(ok(error))
    with pytest.raises(ProviderFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_type == "server_error"


@pytest.mark.parametrize(
    "body",
    [
        {**completion({"content": "x"}), "choices": []},
        {"id": "chatcmpl-1", "object": "chat.completion", "model": MODEL},
        {**completion({"content": "x"}), "choices": [{"index": 0, "finish_reason": "stop"}]},
        completion({"content": None}, "stop"),
    ],
    ids=["no-choices", "no-choices-key", "no-message", "null-content-nothing-else"],
)
async def test_an_answer_without_an_answer_is_an_ambiguous_empty_fault(body):
    provider, _ = make(ok(body))
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_class == "empty"
    assert caught.value.provider_request_id == "req_1"


async def test_json_under_a_wrong_content_type_is_still_read():
    """A compatible server that labels its JSON text/plain still answered; only a body that
    is not JSON at all is a not_json fault."""
    body = json.dumps(completion({"content": "fine"})).encode()
    provider, _ = make(
        lambda r: httpx.Response(200, content=body, headers={"content-type": "text/plain"})
    )
    assert (await provider.complete(HI, MODEL, timeout_s=30)).text == "fine"


# --- streaming ---------------------------------------------------------------------------------


async def test_stream_yields_text_usage_and_end_skipping_role_only_chunks():
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        chunk(
            None,
            usage={
                "prompt_tokens": 2006,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 1920},
            },
        ),
    )
    provider, fake = make(streamed(body))
    events = await collect(provider)
    assert fake.body["stream_options"] == {"include_usage": True}
    usage = Usage(86, 2, cache_read_tokens=1920)
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageUpdate(usage),
        MessageEnd("end_turn", usage, REPORTED_MODEL, "req_s"),
    ]


async def test_stream_tool_call_deltas_follow_their_index():
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, id="call_a", name="weather")),
        chunk(tool_delta(0, args='{"city":')),
        chunk(tool_delta(1, id="call_b", name="weather", args='{"city": "Rome"}')),
        chunk(tool_delta(0, args=' "Paris"}')),
        chunk({}, "tool_calls"),
    )
    provider, _ = make(streamed(body))
    events = await collect(provider)
    assert events == [
        ToolCallStart(0, "call_a", "weather"),
        ToolCallDelta(0, '{"city":'),
        ToolCallStart(1, "call_b", "weather"),
        ToolCallDelta(1, '{"city": "Rome"}'),
        ToolCallDelta(0, ' "Paris"}'),
        MessageEnd("tool_use", Usage(), REPORTED_MODEL, "req_s"),
    ]


async def test_parallel_calls_that_reuse_index_zero_are_told_apart_by_id():
    body = sse(
        chunk(tool_delta(0, id="call_a", name="f", args='{"n": 1}')),
        chunk(tool_delta(0, id="call_a", name="f", args="")),  # same id repeated: same call
        chunk(tool_delta(0, id="call_b", name="g", args='{"n": 2}')),
        chunk({}, "tool_calls"),
    )
    provider, _ = make(streamed(body))
    starts = [e for e in await collect(provider) if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "call_a", "f"), ToolCallStart(1, "call_b", "g")]


async def test_in_band_error_chunk_raises_the_classified_error():
    body = (
        sse(chunk({"content": "Hel"}), done=False)
        + b'data: {"error": {"message": "Overloaded", "type": "server_error", '
        + b'"code": "server_is_overloaded"}}\n\n'
    )
    provider, _ = make(streamed(body))
    seen = []
    with pytest.raises(ProviderFault) as caught:
        async for event in provider.stream(HI, MODEL, timeout_s=30):
            seen.append(event)
    assert seen == [TextDelta("Hel")]
    assert caught.value.provider_request_id == "req_s"


async def test_error_event_of_a_compatible_server_raises():
    body = sse(chunk({"content": "x"}), done=False) + b"event: error\ndata: upstream timed out\n\n"
    provider, _ = make(streamed(body))
    with pytest.raises(ProviderFault):
        await collect(provider)


async def test_stream_without_a_finish_reason_or_done_is_a_cut_stream():
    """A finish reason without [DONE] is a whole answer (tests/providers/test_stream_completion);
    without either, the body ended mid-answer."""
    body = sse(chunk({"content": "Hel"}), done=False)
    provider, _ = make(streamed(body))
    with pytest.raises(ProviderFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "stream_cut"
    assert caught.value.status == 200


async def test_stream_cut_inside_an_event_is_a_cut_stream_not_garbage():
    body = sse(chunk({"content": "Hel"}), done=False) + b'data: {"id": "chatcmpl-1", "cho'
    provider, _ = make(streamed(body))
    with pytest.raises(ProviderFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "stream_cut"


class Breaking(httpx.AsyncByteStream):
    def __init__(self, head: bytes) -> None:
        self.head, self.closed = head, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        raise httpx.ReadError("[Errno 104] Connection reset by peer")

    async def aclose(self) -> None:
        self.closed = True


async def test_connection_reset_mid_stream_is_a_cut_stream_and_the_response_is_closed():
    """Catalogue row 21: the stream died after its head; the chain decides by commit."""
    stream = Breaking(sse(chunk({"content": "Hel"}), done=False))
    provider, _ = make(
        lambda r: httpx.Response(200, stream=stream, headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ProviderFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "stream_cut"
    assert stream.closed


async def test_stream_answered_with_plain_json_is_adapted():
    message = {"content": "Sure.", "tool_calls": [tool_call("call_a", "f", '{"a": 1')]}
    provider, _ = make(ok(completion(message, "tool_calls")))
    events = await collect(provider)
    assert events == [
        TextDelta("Sure."),
        ToolCallStart(0, "call_a", "f"),
        ToolCallDelta(0, '{"a": 1'),  # invalid arguments pass through untouched
        UsageUpdate(Usage(10, 4)),
        MessageEnd("tool_use", Usage(10, 4), REPORTED_MODEL, "req_1"),
    ]


async def test_stream_refused_by_status_raises_at_the_first_iteration():
    error = {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    provider, _ = make(lambda r: httpx.Response(401, json=error))
    with pytest.raises(AccountFault):
        await anext(provider.stream(HI, MODEL, timeout_s=30))


async def test_read_timeout_before_the_answer_is_ambiguous():
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    provider, _ = make(slow)
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert API_KEY not in caught.value.message


async def test_stream_of_nothing_but_done_is_an_empty_answer():
    body = sse(chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 0}))
    provider, _ = make(streamed(body))
    with pytest.raises(AmbiguousFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "empty"
