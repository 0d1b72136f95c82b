"""The Anthropic Messages dialect of the fake: read a request into a `Conversation`, and
write answers, errors and SSE events in Anthropic's wire format (`anthropic_checks` checks
the request first). It offers the same names as `openai.py`, listed there.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from simulations.fakes.anthropic_checks import check_auth as check_auth  # re-exported: part of
from simulations.fakes.anthropic_checks import validate as validate  # the dialect interface
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
from simulations.fakes.reply import Event

NAME = "anthropic"
REQUEST_ID_HEADER = "request-id"
HOST = "api.anthropic.com"
CONTEXT_WINDOW = 200_000


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# --- the request ------------------------------------------------------------------------


def conversation(body: dict[str, Any], model: str) -> Conversation:
    messages = body["messages"]
    users = [m for m in messages if m.get("role") == "user"]
    text, results = "", []
    if users:
        blocks = _blocks(users[-1].get("content"))
        text = " ".join(b["text"] for b in blocks if b.get("type") == "text")
        results = [
            (b["tool_use_id"], _text_of(b.get("content")))
            for b in blocks
            if b.get("type") == "tool_result"
        ]
    prefill = None
    if messages[-1].get("role") == "assistant":  # prefill: the answer continues this text
        prefill = "".join(
            b["text"] for b in _blocks(messages[-1].get("content")) if b.get("type") == "text"
        )
    tools = tuple(
        Tool(t["name"], t.get("input_schema") or {})
        for t in body.get("tools") or []
        if "input_schema" in t
    )
    choice = body.get("tool_choice") or {}
    return Conversation(
        model=model,
        last_user_text=text,
        tool_results=tuple(results),
        tools=tools,
        tool_choice=choice.get("name") if choice.get("type") == "tool" else choice.get("type"),
        max_tokens=body.get("max_tokens"),
        stream=bool(body.get("stream")),
        prefill=prefill,
    )


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content or []


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def prompt_usage(
    body: dict[str, Any], model: str, cache: PromptCache, provider: str
) -> PromptUsage:
    """Cut the prompt into blocks in cache order (tools, system, messages) for `provider`'s
    cache."""
    segments: list[tuple[str, bool]] = []

    def add(prefix: str, block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        plain = {k: v for k, v in block.items() if k != "cache_control"} if marked else block
        segments.append((prefix + json.dumps(plain, sort_keys=True), marked))

    for tool in body.get("tools") or []:
        add("tool:", tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        add("system:", block)
    for message in body.get("messages", []):
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            add(message.get("role", "") + ":", block)
    return cache.anthropic(provider, model, segments)


# --- the answer --------------------------------------------------------------------------


def _usage(answer: Answer, output_tokens: int | None = None) -> dict[str, Any]:
    p = answer.prompt
    return {
        "input_tokens": max(p.total - p.cache_read - p.cache_write, 0),
        "cache_creation_input_tokens": p.cache_write,
        "cache_read_input_tokens": p.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": p.cache_write,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": answer.output_tokens if output_tokens is None else output_tokens,
        "service_tier": "standard",
    }


def _content(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    for call in answer.tool_calls:
        try:
            arguments: Any = json.loads(call.arguments)
        except ValueError:
            arguments = call.arguments  # bad_tool_args: compatible servers send the raw string
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def message(answer: Answer, model: str, created: int) -> dict[str, Any]:
    return {
        "id": answer.id, "type": "message", "role": "assistant", "model": model,
        "content": _content(answer), "stop_reason": answer.stop, "stop_sequence": None,
        "usage": _usage(answer),
    }  # fmt: skip


def empty_choices(answer: Answer, model: str, created: int) -> dict[str, Any]:
    return {**message(answer, model, created), "content": [], "stop_reason": None}


def missing_fields(answer: Answer, model: str, created: int) -> dict[str, Any]:
    return {"id": answer.id, "type": "message", "model": model}


def _event(data: dict[str, Any], content: bool = False) -> Event:
    return Event(b"event: " + data["type"].encode() + b"\ndata: " + _dumps(data) + b"\n\n", content)


def keepalive() -> Event:
    return _event({"type": "ping"})


def events(answer: Answer, model: str, conv: Conversation, created: int) -> list[Event]:
    start = {**message(answer, model, created), "content": [], "stop_reason": None}
    start["usage"] = _usage(answer, output_tokens=1)
    out = [_event({"type": "message_start", "message": start}), keepalive()]
    for index, block in enumerate(_content(answer)):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in split_text(block["text"])]
        else:
            opening = {**block, "input": {}}
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in ["", *split_json(raw)]
            ]
        out.append(
            _event({"type": "content_block_start", "index": index, "content_block": opening})
        )
        out += [
            _event({"type": "content_block_delta", "index": index, "delta": d}, True)
            for d in deltas
        ]
        out.append(_event({"type": "content_block_stop", "index": index}))
    final = {"stop_reason": answer.stop, "stop_sequence": None}
    out.append(_event({"type": "message_delta", "delta": final, "usage": _usage(answer)}))
    out.append(_event({"type": "message_stop"}))
    return out


def done() -> list[Event]:
    return []  # message_stop ends an Anthropic stream; there is no terminator after it


# --- errors ------------------------------------------------------------------------------


def error_body(shape: ErrorShape, request_id: str) -> dict[str, Any]:
    error: dict[str, Any] = {"type": shape.type, "message": shape.message}
    if shape.details:
        error["details"] = dict(shape.details)
    return {"type": "error", "error": error, "request_id": request_id}


def error_headers(shape: ErrorShape) -> list[tuple[str, str]]:
    if shape.should_retry is None:
        return []
    return [("x-should-retry", "true" if shape.should_retry else "false")]


def stream_error(shape: ErrorShape, request_id: str) -> Event:
    return _event({"type": "error", "error": {"type": shape.type, "message": shape.message}})


def unreadable_event() -> Event:
    """A named event whose data is not JSON (not an `error` event: that one says it failed)."""
    return Event(b'event: content_block_delta\ndata: {"broken\n\n')


def reset_headers(reset_at: datetime, seconds: float) -> list[tuple[str, str]]:
    """Only the anthropic-ratelimit-* headers: their reset times are RFC 3339."""
    wall_reset = reset_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    headers = []
    for kind, limit in (("requests", 50), ("tokens", 40000), ("input-tokens", 30000)):
        headers += [
            (f"anthropic-ratelimit-{kind}-limit", str(limit)),
            (f"anthropic-ratelimit-{kind}-remaining", "0" if kind == "requests" else str(limit)),
            (f"anthropic-ratelimit-{kind}-reset", wall_reset),
        ]
    return headers
