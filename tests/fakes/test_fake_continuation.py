"""Continuing an assistant message (prefill), the models that refuse it (prefill_rejected),
and context overflows that only a larger window escapes, in both dialects."""

from __future__ import annotations

import json

import pytest

from simulations.fakes.model import words_text

from .test_fake_streams import _text

DIALECTS = ["anthropic", "openai"]
WHOLE = "echo: Where is my order?"
REFUSED = {
    "anthropic": "This model does not support assistant message prefill. The conversation must "
    "end with a user message.",
    "openai": "Invalid 'messages': the last message must have role 'user' or 'tool'; continuing "
    "an assistant message (prefill) is not supported by this model.",
}


def prefilled(text: str, prefill: str) -> dict:
    return {
        "messages": [
            {"role": "user", "content": text},
            {"role": "assistant", "content": prefill},
        ]
    }


def text_of(dialect: str, body: dict) -> str:
    if dialect == "anthropic":
        return "".join(b["text"] for b in body["content"] if b["type"] == "text")
    return body["choices"][0]["message"]["content"]


async def answer(backend, dialect: str, fault: str | None, stream: bool, **body) -> tuple:
    """(status, the JSON body or the streamed text) of one request, streamed or not."""
    if stream:
        streamed = await backend.stream(dialect, fault, **body)
        if streamed.response.status_code != 200:
            return streamed.response.status_code, json.loads(streamed.text)
        return 200, _text(streamed.data)
    response = await backend.call(dialect, fault, **body)
    if response.status_code != 200:
        return response.status_code, response.json()
    return 200, text_of(dialect, response.json())


# --- continuation -------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_prefilled_request_gets_the_rest_of_the_answer_never_the_prefill(backend, dialect):
    response = await backend.call(dialect, **prefilled("Where is my order?", "echo: Where is"))
    assert response.status_code == 200
    assert text_of(dialect, response.json()) == " my order?"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_prefilled_stream_continues_the_text(backend, dialect):
    prefill = "echo: Where"
    streamed = await backend.stream(dialect, **prefilled("Where is my order?", prefill))
    assert streamed.error is None
    assert prefill + _text(streamed.data) == WHOLE


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_stream_cut_on_one_model_and_continued_on_another_reads_as_one_answer(
    backend, dialect
):
    cut = await backend.stream(dialect, "stream_cut:after_events=6,words=40", model="primary")
    sent = _text(cut.data).rstrip()  # Anthropic refuses a prefill that ends with whitespace
    assert 0 < len(sent) < len(words_text(40))
    rest = await backend.stream(dialect, model="backup#ok:words=40", **prefilled("hello", sent))
    assert sent + _text(rest.data) == words_text(40)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_prefill_that_is_not_the_start_of_the_answer_gets_the_whole_answer(
    backend, dialect
):
    response = await backend.call(dialect, **prefilled("Where is my order?", "Sure"))
    assert text_of(dialect, response.json()) == WHOLE


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_continuation_bills_only_the_new_text_as_output(backend, dialect):
    whole = await backend.call(dialect, text="Where is my order?")
    rest = await backend.call(dialect, **prefilled("Where is my order?", "echo: Where is my"))
    whole_usage, rest_usage = (c.usage for c in backend.fake.calls())
    assert rest_usage["output_tokens"] < whole_usage["output_tokens"]
    assert rest_usage["input_tokens"] > whole_usage["input_tokens"], "the prefill is prompt"
    assert whole.status_code == rest.status_code == 200


async def test_anthropic_refuses_a_prefill_that_ends_with_whitespace(backend):
    response = await backend.anthropic(**prefilled("Where is my order?", "echo: Where "))
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": "messages: final assistant content cannot end with trailing whitespace",
    }


# --- prefill_rejected ------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_prefill_rejected_refuses_a_request_that_ends_with_the_assistant(backend, dialect):
    response = await backend.call(dialect, "prefill_rejected", **prefilled("hi", "echo:"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["message"]) == ("invalid_request_error", REFUSED[dialect])
    assert backend.fake.calls()[0].paid is False


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_prefill_rejected_refuses_a_prefilled_stream_before_it_opens(backend, dialect):
    streamed = await backend.stream(dialect, "prefill_rejected", **prefilled("hi", "echo:"))
    assert streamed.response.status_code == 400
    assert streamed.response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_prefill_rejected_answers_a_request_that_ends_with_the_user(backend, dialect):
    response = await backend.call(dialect, "prefill_rejected")
    assert response.status_code == 200 and text_of(dialect, response.json()) == "echo: hello"
    streamed = await backend.stream(dialect, "prefill_rejected")
    assert streamed.error is None and _text(streamed.data) == "echo: hello"


async def test_prefill_rejected_is_an_openai_invalid_value_on_messages(backend):
    response = await backend.openai(fault="prefill_rejected", **prefilled("hi", "echo:"))
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_value", "messages")


# --- context overflow with a larger backup -----------------------------------------------------

STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])


@STREAMED
async def test_one_overflow_spec_fails_the_small_window_and_answers_the_large_one(backend, stream):
    spec = "context_overflow:window={window},tokens=150000"
    small = await answer(backend, "openai", spec.format(window=128000), stream)
    large = await answer(backend, "openai", spec.format(window=1000000), stream)
    assert small[0] == 400 and small[1]["error"]["code"] == "context_length_exceeded"
    assert large == (200, "echo: hello")


@STREAMED
async def test_without_a_window_the_dialects_own_window_decides(backend, stream):
    """150,000 tokens overflow OpenAI's 128,000 but fit Anthropic's 200,000."""
    an = await answer(backend, "anthropic", "context_overflow:tokens=150000", stream)
    oa = await answer(backend, "openai", "context_overflow:tokens=150000", stream)
    assert (an[0], oa[0]) == (200, 400)


@STREAMED
async def test_context_overflow_says_it_as_each_provider_does(backend, stream):
    spec = "context_overflow:window=8000,tokens=9000"
    an_status, an = await answer(backend, "anthropic", spec, stream)
    oa_status, oa = await answer(backend, "openai", spec, stream)
    assert (an_status, oa_status) == (400, 400)
    assert an["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 9000 tokens > 8000 maximum",
    }
    error = oa["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )
    assert error["message"] == (
        "This model's maximum context length is 8000 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages."
    )


async def test_an_overflow_without_tokens_always_overflows(backend):
    status, body = await answer(backend, "anthropic", "context_overflow:window=1000000", False)
    assert status == 400
    assert body["error"]["message"].endswith("tokens > 1000000 maximum")
