"""The official `openai` and `anthropic` SDKs, unchanged but for base_url, against the gateway:
either dialect in, either provider behind, fallback invisible, failures raised once."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from simulations.fakes import FakeProviders

from .conftest import (
    GATEWAY_KEY,
    WEATHER_TOOL_ANTHROPIC,
    WEATHER_TOOL_OPENAI,
    GatewayFactory,
    paid_calls,
    user,
)

PROVIDERS = ["claude", "gpt"]  # the fake's Anthropic and OpenAI dialects behind the gateway


def openai_client(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.openai_url, api_key=GATEWAY_KEY)


def anthropic_client(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=GATEWAY_KEY)


# --- answers -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_openai_sdk_gets_an_answer(gateway: GatewayFactory, provider: str):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    raw = openai_client(gw).chat.completions.with_raw_response.create(
        model="chat", messages=user("hello there")
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "model-a" and completion.usage.completion_tokens > 0
    assert raw.headers["x-switchover-provider"] == provider
    assert raw.headers["x-switchover-fallback"] == "false"
    assert raw.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_anthropic_sdk_gets_an_answer(gateway: GatewayFactory, provider: str):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    raw = anthropic_client(gw).messages.with_raw_response.create(
        model="chat", max_tokens=64, messages=user("hello there")
    )
    message = raw.parse()
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.model == "model-a"
    assert message.usage.output_tokens > 0
    assert raw.headers["request-id"].startswith("req_")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_openai_sdk_streams(gateway: GatewayFactory, provider: str):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    chunks = list(
        openai_client(gw).chat.completions.create(
            model="chat",
            messages=user("a question long enough to stream"),
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: a question long enough to stream"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_anthropic_sdk_streams(gateway: GatewayFactory, provider: str):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    with anthropic_client(gw).messages.stream(
        model="chat", max_tokens=64, messages=user("a question long enough to stream")
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "echo: a question long enough to stream"
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


# --- tool calls ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_openai_sdk_tool_calls(gateway: GatewayFactory, provider: str, stream: bool):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    client = openai_client(gw)
    ask = {"model": "chat", "messages": user("weather in Paris?"), "tools": [WEATHER_TOOL_OPENAI]}
    if stream:
        with client.chat.completions.stream(**ask) as events:  # type: ignore[arg-type]
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(**ask)  # type: ignore[arg-type]
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert "city" in json.loads(call.function.arguments)  # type: ignore[union-attr]

    # The tool's result goes back through the gateway, and the model answers with it.
    follow_up = client.chat.completions.create(
        model="chat",
        tools=[WEATHER_TOOL_OPENAI],  # type: ignore[list-item]
        messages=[
            *user("weather in Paris?"),
            choice.message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
    )
    assert follow_up.choices[0].message.content == f"tool results: {call.id}=sunny"


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_anthropic_sdk_tool_calls(gateway: GatewayFactory, provider: str, stream: bool):
    gw = gateway({"chat": [f"{provider}/model-a"]}, keys=[GATEWAY_KEY])
    client = anthropic_client(gw)
    ask = {
        "model": "chat",
        "max_tokens": 64,
        "messages": user("weather in Paris?"),
        "tools": [WEATHER_TOOL_ANTHROPIC],
    }
    if stream:
        with client.messages.stream(**ask) as events:  # type: ignore[arg-type]
            message = events.get_final_message()
    else:
        message = client.messages.create(**ask)  # type: ignore[arg-type]
    assert message.stop_reason == "tool_use"
    (call,) = [b for b in message.content if b.type == "tool_use"]
    assert call.name == "get_weather" and "city" in call.input  # type: ignore[operator]

    follow_up = client.messages.create(
        model="chat",
        max_tokens=64,
        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
        messages=[
            *user("weather in Paris?"),
            {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
            },
        ],  # type: ignore[list-item]
    )
    assert follow_up.content[0].text == f"tool results: {call.id}=sunny"  # type: ignore[union-attr]


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_overloaded_primary_is_invisible(gateway: GatewayFactory, fake: FakeProviders, sdk):
    gw = gateway({"chat": ["claude/primary#529", "gpt/backup"]}, keys=[GATEWAY_KEY])
    if sdk == "openai":
        model = openai_client(gw).chat.completions.create(model="chat", messages=user()).model
    else:
        answer = anthropic_client(gw).messages.create(model="chat", max_tokens=64, messages=user())
        model = answer.model
    assert model == "backup"
    assert (paid_calls(fake, "primary"), paid_calls(fake, "backup")) == (2, 1)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_request_fault_raises_the_sdks_400_and_never_reaches_the_backup(
    gateway: GatewayFactory, fake: FakeProviders, sdk: str
):
    gw = gateway({"chat": ["claude/primary#invalid_request", "gpt/backup"]}, keys=[GATEWAY_KEY])
    if sdk == "openai":
        with pytest.raises(openai.BadRequestError) as raised:
            openai_client(gw).chat.completions.create(model="chat", messages=user())
    else:
        with pytest.raises(anthropic.BadRequestError) as raised:
            anthropic_client(gw).messages.create(model="chat", max_tokens=64, messages=user())
    assert "text content blocks must be non-empty" in raised.value.message
    assert paid_calls(fake, "primary") == 1
    assert paid_calls(fake, "backup") == 0


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_total_failure_raises_once_and_the_chain_ran_once(
    gateway: GatewayFactory, fake: FakeProviders, sdk: str, stream: bool
):
    """The SDKs retry 5xx twice by default; `x-should-retry: false` must stop them, or each
    call would run the whole chain three times."""
    gw = gateway({"chat": ["claude/primary#529", "gpt/backup#529"]}, keys=[GATEWAY_KEY])
    if sdk == "openai":
        with pytest.raises(openai.InternalServerError) as raised:
            openai_client(gw).chat.completions.create(model="chat", messages=user(), stream=stream)
        assert raised.value.status_code == 503
    else:
        with pytest.raises(anthropic.OverloadedError) as raised:
            anthropic_client(gw).messages.create(
                model="chat", max_tokens=64, messages=user(), stream=stream
            )
        assert raised.value.status_code == 529
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert (paid_calls(fake, "primary"), paid_calls(fake, "backup")) == (2, 1)


def test_both_sdks_list_the_routes_as_models(gateway: GatewayFactory):
    gw = gateway({"support": ["claude/a"], "cheap": ["gpt/b"]}, keys=[GATEWAY_KEY])
    assert [m.id for m in openai_client(gw).models.list()] == ["support", "cheap"]
    assert [m.id for m in anthropic_client(gw).models.list()] == ["support", "cheap"]


def test_both_sdks_raise_on_an_in_band_error_after_the_first_content(gateway: GatewayFactory):
    """A committed stream that fails ends with the dialect's error event, which each SDK
    turns into an exception, never into a stream that looks complete."""
    gw = gateway({"chat": ["claude/primary#stream_cut:after_events=6", "gpt/backup"]})
    long = user("a question long enough to stream in pieces")
    with pytest.raises(openai.APIError, match="stream"):
        for _ in openai_client(gw).chat.completions.create(
            model="chat", messages=long, stream=True
        ):
            pass
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        anthropic_client(gw).messages.stream(model="chat", max_tokens=64, messages=long) as s,
    ):
        s.get_final_message()
    assert raised.value.status_code == 200 and raised.value.type == "api_error"  # type: ignore[attr-defined]
