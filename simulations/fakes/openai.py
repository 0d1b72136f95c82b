"""The OpenAI Chat Completions dialect of the fake: read a request into a `Conversation`,
and write answers, errors and SSE chunks in OpenAI's wire format (`openai_checks` checks the
request first).

Every dialect module offers the same names, which `app.py` and `render.py` use without
knowing which dialect they hold: NAME, REQUEST_ID_HEADER, HOST, CONTEXT_WINDOW, check_auth,
validate, conversation, prompt_usage, message, events, done, keepalive, empty_choices,
missing_fields, error_body, error_headers, stream_error, unreadable_event, reset_headers.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from simulations.fakes.cache import PromptCache
from simulations.fakes.faults import ErrorShape
from simulations.fakes.model import (
    Answer,
    Conversation,
    PromptUsage,
    Tool,
    split_json,
    split_text,
)
from simulations.fakes.openai_checks import check_auth as check_auth  # re-exported: part of
from simulations.fakes.openai_checks import validate as validate  # the dialect interface
from simulations.fakes.reply import Event

NAME = "openai"
REQUEST_ID_HEADER = "x-request-id"
HOST = "api.openai.com"
CONTEXT_WINDOW = 128_000

_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_FINGERPRINT = "fp_f4ke0001"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# --- the request ------------------------------------------------------------------------


def conversation(body: dict[str, Any], model: str) -> Conversation:
    messages = body["messages"]
    results: list[tuple[str, str]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, (message["tool_call_id"], _text_of(message.get("content"))))
    users = [m for m in messages if m.get("role") == "user"]
    text = _text_of(users[-1].get("content")) if users else ""
    tools = tuple(
        Tool(
            t["function"]["name"],
            t["function"].get("parameters") or {"type": "object", "properties": {}},
        )
        for t in body.get("tools") or []
    )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name")
    elif choice == "required":
        choice = "any"
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    last, prefill = messages[-1], None
    if last.get("role") == "assistant" and not last.get("tool_calls"):
        prefill = _text_of(last.get("content"), "")  # the answer continues this text
    return Conversation(
        model=model,
        last_user_text=text,
        tool_results=tuple(results),
        tools=tools,
        tool_choice=choice,
        max_tokens=max_tokens,
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        prefill=prefill,
    )


def _text_of(content: Any, joint: str = " ") -> str:
    if isinstance(content, list):
        return joint.join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def prompt_usage(
    body: dict[str, Any], model: str, cache: PromptCache, provider: str
) -> PromptUsage:
    # OpenAI caches the exact prompt prefix: tools first, then the messages in order.
    parts = [json.dumps(body.get("tools"), sort_keys=True)]
    parts += [json.dumps(m, sort_keys=True) for m in body.get("messages", [])]
    return cache.openai(provider, model, "".join(parts))


# --- the answer --------------------------------------------------------------------------


def _usage(answer: Answer) -> dict[str, Any]:
    p, out = answer.prompt, answer.output_tokens
    return {
        "prompt_tokens": p.total, "completion_tokens": out, "total_tokens": p.total + out,
        "prompt_tokens_details": {"cached_tokens": p.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
        },
    }  # fmt: skip


def _calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in answer.tool_calls
    ]


def message(answer: Answer, model: str, created: int) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text,
        "refusal": None,
        "annotations": [],
    }
    if answer.tool_calls:
        reply["tool_calls"] = _calls(answer)
    choice = {"index": 0, "message": reply, "logprobs": None, "finish_reason": _FINISH[answer.stop]}
    return {
        **_head(answer, model, created, "chat.completion"),
        "choices": [choice],
        "usage": _usage(answer),
    }


def _head(answer: Answer, model: str, created: int, kind: str) -> dict[str, Any]:
    return {
        "id": answer.id, "object": kind, "created": created, "model": model,
        "service_tier": "default", "system_fingerprint": _FINGERPRINT,
    }  # fmt: skip


def empty_choices(answer: Answer, model: str, created: int) -> dict[str, Any]:
    return {**message(answer, model, created), "choices": []}


def missing_fields(answer: Answer, model: str, created: int) -> dict[str, Any]:
    return {"id": answer.id, "object": "chat.completion", "created": created, "model": model}


def _data(obj: Any, content: bool = False) -> Event:
    return Event(b"data: " + _dumps(obj) + b"\n\n", content)


def keepalive() -> Event:
    return Event(b": keep-alive\n\n")


def events(answer: Answer, model: str, conv: Conversation, created: int) -> list[Event]:
    head = _head(answer, model, created, "chat.completion.chunk")
    if conv.include_usage:
        head["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None, content: bool = False) -> Event:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _data({**head, "choices": [choice]}, content)

    first = "" if answer.text or not answer.tool_calls else None
    out = [chunk({"role": "assistant", "content": first, "refusal": None})]
    if answer.text:
        out += [chunk({"content": piece}, content=True) for piece in split_text(answer.text)]
    for index, call in enumerate(answer.tool_calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        out.append(chunk({"tool_calls": [opening]}, content=True))
        for piece in split_json(call.arguments):
            out.append(
                chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                    content=True,
                )
            )
    out.append(chunk({}, _FINISH[answer.stop]))
    if conv.include_usage:
        out.append(_data({**head, "choices": [], "usage": _usage(answer)}))
    return [*out, *done()]


def done() -> list[Event]:
    return [Event(b"data: [DONE]\n\n")]


# --- errors ------------------------------------------------------------------------------


def error_body(shape: ErrorShape, request_id: str) -> dict[str, Any]:
    error = {"message": shape.message, "type": shape.type, "param": shape.param, "code": shape.code}
    return {"error": {**error, **(shape.details or {})}}  # details: Azure's innererror


def error_headers(shape: ErrorShape) -> list[tuple[str, str]]:
    return []


def stream_error(shape: ErrorShape, request_id: str) -> Event:
    return _data(error_body(shape, request_id))


def unreadable_event() -> Event:
    """A data line that is not JSON, as a proxy that mangles one chunk sends it."""
    return Event(b'data: {"broken\n\n')


def reset_headers(reset_at: datetime, seconds: float) -> list[tuple[str, str]]:
    """Only the x-ratelimit-* headers: their resets are Go durations such as 6m0s."""
    go_duration = go_duration_text(seconds)
    return [
        ("x-ratelimit-limit-requests", "500"), ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", go_duration),
        ("x-ratelimit-limit-tokens", "30000"), ("x-ratelimit-remaining-tokens", "30000"),
        ("x-ratelimit-reset-tokens", "0s"),
    ]  # fmt: skip


def go_duration_text(seconds: float) -> str:
    """Go's time.Duration.String(): 12ms, 1.5s, 6m0s, 1h0m0s."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text
