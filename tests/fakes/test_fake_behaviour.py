"""The fake model's answers, the request checks, and the 200s that are not usable answers
(usage and prompt caching: test_fake_caches.py)."""

from __future__ import annotations

import json

import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, SEARCH_AN, SEARCH_OA, an_body, oa_body

SEARCH_PARIS_AN = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "search",
    "input": {"query": "Paris"},
}
SEARCH_PARIS_OA = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search", "arguments": '{"query": "Paris"}'},
}
TOOL_TURN_AN = [
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": [SEARCH_PARIS_AN]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny, 21C"}],
    },
]
TOOL_TURN_OA = [
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [SEARCH_PARIS_OA]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
]


async def post_an(backend, body, headers=AN_HEADERS):
    return await backend.client.post("/v1/messages", headers=headers, json=body)


async def post_oa(backend, body, headers=OA_HEADERS):
    return await backend.client.post("/v1/chat/completions", headers=headers, json=body)


# --- answers ---------------------------------------------------------------------------


async def test_plain_text_is_echoed_in_both_dialects(backend):
    an = (await backend.anthropic("hi there")).json()
    assert an["content"] == [{"type": "text", "text": "echo: hi there"}]
    assert an["stop_reason"] == "end_turn" and an["id"].startswith("msg_")
    oa = (await backend.openai("hi there")).json()
    assert oa["choices"][0]["message"]["content"] == "echo: hi there"
    assert oa["choices"][0]["finish_reason"] == "stop" and oa["id"].startswith("chatcmpl-")


async def test_offered_tools_are_called_with_arguments_from_their_schema(backend):
    an = (await backend.anthropic("weather in Paris?", tools=[SEARCH_AN])).json()
    assert an["stop_reason"] == "tool_use"
    assert an["content"][0]["name"] == "search" and an["content"][0]["input"] == {
        "query": "weather in Paris?"
    }
    oa = (await backend.openai("weather in Paris?", tools=[SEARCH_OA])).json()
    call = oa["choices"][0]["message"]["tool_calls"][0]
    assert oa["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(call["function"]["arguments"]) == {"query": "weather in Paris?"}


async def test_tool_results_are_quoted_back_with_their_ids(backend):
    an = (await post_an(backend, an_body(messages=TOOL_TURN_AN, tools=[SEARCH_AN]))).json()
    assert an["content"][0]["text"] == "tool results: toolu_1=sunny, 21C"
    oa = (await post_oa(backend, oa_body(messages=TOOL_TURN_OA, tools=[SEARCH_OA]))).json()
    assert oa["choices"][0]["message"]["content"] == "tool results: call_1=sunny, 21C"


async def test_reply_text_can_be_set_per_request(backend):
    body = (await backend.anthropic(fault="ok:text=Bonjour")).json()
    assert body["content"][0]["text"] == "Bonjour"


async def test_max_tokens_cuts_the_answer(backend):
    body = (await backend.anthropic("x" * 200, max_tokens=5)).json()
    assert body["stop_reason"] == "max_tokens" and len(body["content"][0]["text"]) == 20


# --- the request checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b.pop("max_tokens"), "max_tokens: Field required"),
        (
            lambda b: b["messages"].insert(0, {"role": "system", "content": "be brief"}),
            'Unexpected role "system"',
        ),
        (
            lambda b: b["messages"].insert(0, {"role": "assistant", "content": "hi"}),
            "first message",
        ),
        (lambda b: b["messages"].append({"role": "user", "content": "again"}), "must alternate"),
        (
            lambda b: b["messages"][2]["content"][0].update(tool_use_id="toolu_2"),
            "unexpected `tool_use_id`",
        ),
        (lambda b: b["messages"].pop(), "without `tool_result` blocks immediately after: toolu_1"),
        (
            lambda b: b["messages"][1]["content"][0].update(id="functions.search:0"),
            "String should match pattern",
        ),
        (lambda b: b["messages"][1]["content"][0].update(input='{"q": 1}'), "valid dictionary"),
        (lambda b: b["tools"][0]["input_schema"].update(type="array"), "input_schema.type"),
        (
            lambda b: b["messages"][2]["content"].insert(0, {"type": "text", "text": "here"}),
            "must come first",
        ),
    ],
)
async def test_anthropic_rejects_what_the_real_api_rejects(backend, change, message):
    body = json.loads(json.dumps(an_body(messages=TOOL_TURN_AN, tools=[SEARCH_AN])))
    change(body)
    response = await post_an(backend, body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert message in response.json()["error"]["message"]
    assert [c.status for c in backend.fake.calls()] == [400]


def _arguments_as_object(body):
    body["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"query": "Paris"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b["messages"][2].update(tool_call_id="call_2"), "must be a response to a"),
        (lambda b: b["messages"].pop(), "did not have response messages: call_1"),
        (_arguments_as_object, "expected a string"),
        (lambda b: b["messages"][0].update(role="human"), "Invalid value: 'human'"),
        (lambda b: b.update(stream_options={"include_usage": True}), "only allowed when 'stream'"),
        (lambda b: b["tools"][0]["function"].update(name="a.b"), "does not match pattern"),
    ],
)
async def test_openai_rejects_what_the_real_api_rejects(backend, change, message):
    body = json.loads(json.dumps(oa_body(messages=TOOL_TURN_OA, tools=[SEARCH_OA])))
    change(body)
    response = await post_oa(backend, body)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


async def test_a_fault_never_hides_an_invalid_request(backend):
    body = an_body(messages=TOOL_TURN_AN[:2])
    response = await backend.client.post(
        "/v1/messages", headers={**AN_HEADERS, "x-fake-fault": "529"}, json=body
    )
    assert response.status_code == 400


async def test_a_missing_key_is_401_in_each_dialect(backend):
    an = await post_an(backend, an_body(), headers={"anthropic-version": "2023-06-01"})
    assert (an.status_code, an.json()["error"]["type"]) == (401, "authentication_error")
    oa = await post_oa(backend, oa_body(), headers={})
    assert oa.status_code == 401 and "didn't provide an API key" in oa.json()["error"]["message"]


async def test_only_configured_keys_are_valid_when_keys_are_configured(backend):
    backend.fake.configure(valid_keys=["sk-good"])
    assert (
        await post_oa(backend, oa_body(), headers={"authorization": "Bearer sk-good"})
    ).status_code == 200
    bad = await post_oa(backend, oa_body(), headers={"authorization": "Bearer sk-bad-0000"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (401, "invalid_api_key")


async def test_anthropic_requires_the_version_header(backend):
    response = await post_an(backend, an_body(), headers={"x-api-key": "k"})
    assert (
        response.status_code == 400 and "anthropic-version" in response.json()["error"]["message"]
    )


async def test_a_body_that_is_not_json_is_a_400_in_the_dialect(backend):
    response = await backend.client.post("/v1/messages", headers=AN_HEADERS, content=b"{nope")
    assert response.status_code == 400 and response.json()["type"] == "error"


# --- 200s that are not usable answers ----------------------------------------------------


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_invalid_json_is_a_json_200_that_does_not_parse(backend, dialect):
    response = await backend.call(dialect, "invalid_json")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    with pytest.raises(ValueError):
        response.json()


async def test_not_json_and_empty_bodies(backend):
    html = await backend.openai(fault="not_json")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    empty = await backend.anthropic(fault="empty")
    assert empty.status_code == 200 and empty.content == b""


async def test_empty_choices_and_missing_fields(backend):
    assert (await backend.openai(fault="empty_choices")).json()["choices"] == []
    an = (await backend.anthropic(fault="empty_choices")).json()
    assert an["content"] == [] and an["stop_reason"] is None
    assert "choices" not in (await backend.openai(fault="missing_fields")).json()
    assert "content" not in (await backend.anthropic(fault="missing_fields")).json()


async def test_valid_empty_answers_are_well_formed(backend):
    an = (await backend.anthropic(fault="valid_empty")).json()
    assert an["content"] == [] and an["stop_reason"] == "end_turn"
    oa = (await backend.openai(fault="valid_empty")).json()["choices"][0]
    assert oa["message"]["content"] is None and oa["message"]["tool_calls"]
    assert oa["finish_reason"] == "tool_calls"


async def test_refusal_is_a_200_with_the_refusal_stop(backend):
    assert (await backend.anthropic(fault="refusal")).json()["stop_reason"] == "refusal"
    assert (await backend.openai(fault="refusal")).json()["choices"][0][
        "finish_reason"
    ] == "content_filter"


async def test_bad_tool_args_are_not_json(backend):
    oa = (await backend.openai(fault="bad_tool_args", tools=[SEARCH_OA])).json()
    arguments = oa["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(ValueError):
        json.loads(arguments)
    streamed = await backend.stream("anthropic", "bad_tool_args", tools=[SEARCH_AN])
    partial = "".join(
        d["delta"]["partial_json"] for d in streamed.data if d["type"] == "content_block_delta"
    )
    with pytest.raises(ValueError):
        json.loads(partial)
