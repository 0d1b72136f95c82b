"""What the two dialect codecs share, and the helpers the gateway's dialects reuse of them: the
malformed-answer signal, the replay of a whole `Response` as stream events, tool-call
arguments read and written the one way (`parse_arguments`, `arguments_text`, `tool_input`),
tool ids in Anthropic's alphabet (`sanitize_tool_id`) and data URLs.

The gateway imports these, never a provider's codec: the wire shapes of one provider stay in
its own module.

Pure: no I/O and no classification. A codec raises `MalformedAnswer` and the adapter turns it
into the protocol fault the chain understands (`engine.core.classify` is the only place that builds
errors).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from engine.core import bounded_json
from engine.core.messages import (
    MessageEnd,
    Response,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    UsageUpdate,
)

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "MalformedAnswer",
    "arguments_text",
    "count",
    "parse_arguments",
    "response_events",
    "sanitize_tool_id",
    "split_data_url",
    "tool_input",
]

# Where a tool call's arguments were not valid JSON (an OpenAI-dialect server produced them),
# Anthropic still needs an object. We keep the raw string under this key instead of guessing or
# dropping it: the model sees exactly what it produced, and nothing is silently lost.
RAW_ARGUMENTS_KEY = "_raw_arguments"
_VALID_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_INVALID_TOOL_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


class MalformedAnswer(ValueError):
    """A 2xx body that parsed as JSON but is not a usable answer (no choices, no content...)."""


def count(value: Any) -> int:
    """A token count from the wire: null, missing, negative or non-numeric count as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)


def arguments_text(call: ToolCall) -> str:
    """The JSON arguments string of a call: the server's own bytes when it sent a string."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments if call.arguments is not None else {})


def parse_arguments(raw: object) -> tuple[Mapping[str, Any] | None, str | None]:
    """(arguments, raw string) of a tool call. The raw string is always kept so invalid JSON
    can pass through untouched; `""` means no arguments; anything that is not a JSON object
    gives arguments None."""
    if isinstance(raw, Mapping):  # a few compatible servers send the object itself
        return dict(raw), None
    if not isinstance(raw, str):
        return {}, None
    if not raw.strip():
        return {}, raw
    try:  # bounded: NaN, a lone surrogate or deep nesting is not JSON any provider takes
        parsed = bounded_json.loads(raw)
    except bounded_json.JsonRejected:
        return None, raw
    return (parsed, raw) if isinstance(parsed, dict) else (None, raw)


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The arguments of a call as the object Anthropic's `tool_use.input` needs."""
    if call.arguments is not None:
        return dict(call.arguments)
    if call.raw_arguments is not None and call.raw_arguments.strip():
        return {RAW_ARGUMENTS_KEY: call.raw_arguments}
    return {}


def response_events(response: Response) -> list[StreamEvent]:
    """A complete answer as the stream that would have produced it. Used when a server answers
    `stream: true` with plain JSON, which is legal enough to adapt rather than fail."""
    events: list[StreamEvent] = []
    tool_index = 0
    for part in response.content:
        if isinstance(part, ToolCall):
            events.append(ToolCallStart(tool_index, part.id, part.name))
            events.append(ToolCallDelta(tool_index, arguments_text(part)))
            tool_index += 1
        elif part.text:
            events.append(TextDelta(part.text))
    events.append(UsageUpdate(response.usage))
    events.append(
        MessageEnd(
            stop_reason=response.stop_reason,
            usage=response.usage,
            model=response.model,
            provider_request_id=response.provider_request_id,
        )
    )
    return events


def split_data_url(url: str) -> tuple[str, str] | None:
    """`data:image/png;base64,AAAA` → (`image/png`, `AAAA`); None for anything else."""
    if not url.startswith("data:"):
        return None
    header, comma, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if not comma or encoding != "base64" or not media_type:
        return None
    return media_type, data


def sanitize_tool_id(tool_id: str) -> str:
    """An id Anthropic accepts (`^[a-zA-Z0-9_-]+$`). Deterministic, so a call id and the id
    of its result, replayed to any provider on any attempt, always map to the same value; the
    hash suffix keeps two ids that differ only in invalid characters apart."""
    if _VALID_TOOL_ID.match(tool_id):
        return tool_id
    digest = hashlib.sha256(tool_id.encode("utf-8")).hexdigest()[:8]
    return f"{_INVALID_TOOL_ID_CHARS.sub('_', tool_id)}_{digest}"
