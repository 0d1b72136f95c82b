"""What the two dialect codecs share: the malformed-answer signal and the replay of a whole
`Response` as stream events.

Pure: no I/O and no classification. A codec raises `MalformedAnswer` and the adapter turns it
into the protocol fault the chain understands (`engine.core.classify` is the only place that builds
errors).
"""

from __future__ import annotations

import json
from typing import Any

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
    "response_events",
    "split_data_url",
    "tool_input",
]

# Where a tool call's arguments were not valid JSON (an OpenAI-dialect server produced them),
# Anthropic still needs an object. We keep the raw string under this key instead of guessing or
# dropping it: the model sees exactly what it produced, and nothing is silently lost.
RAW_ARGUMENTS_KEY = "_raw_arguments"


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
