"""The gateway's Anthropic Messages face: a caller's `POST /v1/messages` body into the neutral
`Request` (`anthropic_request`), and neutral answers, streams and errors back in the shapes the
official `anthropic` SDK parses.

The mirror image of `engine.providers.anthropic_codec`, whose shared helpers it reuses
(engine.providers.codec). Toward the caller: tool ids in Anthropic's alphabet (sanitized as the
provider codec does), arguments that were not JSON wrapped as `{"_raw_arguments": ...}` exactly
as the provider codec wraps them, `input_tokens` without cached tokens, and a stream's blocks
numbered across text and tool calls. Never does I/O; the app decides statuses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.core.messages import (
    MessageEnd,
    Response,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from engine.gateway.dialects.anthropic_request import parse
from engine.gateway.dialects.base import EncoderBase, Parsed, sse_event
from engine.providers.codec import parse_arguments, sanitize_tool_id, tool_input

__all__ = ["ANTHROPIC", "AnthropicDialect", "AnthropicStreamEncoder", "error_type_for"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type_for(status: int) -> str:
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def usage_body(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,  # uncached only, as Anthropic counts it
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


class AnthropicDialect:
    name = "anthropic"
    path = "/v1/messages"

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Parsed:
        return parse(body, headers)

    def encode(self, response: Response, *, model: str, request_id: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for part in response.content:
            if isinstance(part, ToolCall):
                content.append(_tool_use(part))
            elif part.text:  # Anthropic never sends (and rejects on replay) empty text blocks
                content.append({"type": "text", "text": part.text})
        return {
            "id": f"msg_{request_id}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": response.stop_reason,  # neutral stop reasons are Anthropic's
            "stop_sequence": None,  # not every provider says which stop sequence matched
            "usage": usage_body(response.usage),
        }

    def stream_encoder(
        self, *, model: str, request_id: str, include_usage: bool = True
    ) -> AnthropicStreamEncoder:
        return AnthropicStreamEncoder(model=model, request_id=request_id)

    def error_body(
        self,
        *,
        status: int,
        error_type: str,
        message: str,
        code: str | None = None,
        param: str | None = None,
        request_id: str,
    ) -> dict[str, Any]:
        error = {"type": error_type, "message": message}
        return {"type": "error", "error": error, "request_id": request_id}

    def error_type_for(self, status: int) -> str:
        return error_type_for(status)


ANTHROPIC = AnthropicDialect()


# --- neutral → wire -------------------------------------------------------------------------


def _tool_use(call: ToolCall) -> dict[str, Any]:
    # Ids in Anthropic's alphabet, sanitized exactly as the provider codec does, so a replayed
    # id maps to the same value whichever provider gets it next.
    return {
        "type": "tool_use",
        "id": sanitize_tool_id(call.id),
        "name": call.name,
        "input": tool_input(call),
    }


class AnthropicStreamEncoder(EncoderBase):
    """A neutral stream as Messages events: message_start, then each block's start, deltas and
    stop, then message_delta (stop reason, cumulative usage) and message_stop.

    Text streams as it comes. A tool call's arguments are held until the call is complete and
    then sent whole: the SDK parses `partial_json` as it arrives and raises on anything that
    is not JSON, and an OpenAI-dialect provider may stream arguments that never become JSON;
    held, they are checked and wrapped as the non-stream answer wraps them. Holding every call
    of a run also copes with providers that interleave the fragments of parallel calls, which
    Anthropic's one-block-at-a-time order cannot express. After `end` or `error` nothing more
    is written.
    """

    def __init__(self, *, model: str, request_id: str) -> None:
        self._id = f"msg_{request_id}"
        self._model = model
        self._started = False
        self._closed = False
        self._usage = Usage()
        self._blocks = 0  # blocks opened so far, i.e. the next block's index
        self._text_open = False
        self._held: dict[int, tuple[ToolCallStart, list[str]]] = {}  # by neutral tool index
        self._sent: set[int] = set()

    def start(self, event: StreamStart | None = None) -> bytes:
        if self._started or self._closed:
            return b""
        self._started = True
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model or (event.model if event else ""),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Input tokens are usually not known yet; message_delta carries the final counts.
            "usage": usage_body(self._usage),
        }
        return sse_event({"type": "message_start", "message": message})

    def _content(self, event: StreamEvent) -> bytes:
        out = b""
        if isinstance(event, TextDelta) and event.text:
            if not self._text_open:
                out += self._flush_calls()
                out += self._block_start({"type": "text", "text": ""})
                self._text_open = True
            delta = {"type": "text_delta", "text": event.text}
            out += _delta(self._blocks - 1, delta)
        elif isinstance(event, ToolCallStart):
            if event.index not in self._held and event.index not in self._sent:
                out += self._close_text()
                self._held[event.index] = (event, [])
        elif isinstance(event, ToolCallDelta) and event.index in self._held:
            self._held[event.index][1].append(event.arguments)
        return out

    def end(self, event: MessageEnd) -> bytes:
        if self._closed:
            return b""
        out = self.start() + self._close_text() + self._flush_calls()
        self._closed = True
        usage = event.usage if event.usage != Usage() else self._usage
        delta = {"stop_reason": event.stop_reason, "stop_sequence": None}
        out += sse_event({"type": "message_delta", "delta": delta, "usage": usage_body(usage)})
        return out + sse_event({"type": "message_stop"})

    def error(self, event: StreamError) -> bytes:
        """The SDK raises `APIStatusError` (status 200) on it; no message_stop follows."""
        if self._closed:
            return b""
        self._closed = True
        error = {"type": event.error_type, "message": event.message}
        return sse_event({"type": "error", "error": error})

    def _block_start(self, block: dict[str, Any]) -> bytes:
        self._blocks += 1
        start = {"type": "content_block_start", "index": self._blocks - 1, "content_block": block}
        return sse_event(start)

    def _close_text(self) -> bytes:
        if not self._text_open:
            return b""
        self._text_open = False
        return sse_event({"type": "content_block_stop", "index": self._blocks - 1})

    def _flush_calls(self) -> bytes:
        out = b""
        for start, fragments in self._held.values():
            arguments, raw = parse_arguments("".join(fragments))
            call = ToolCall(start.id, start.name, arguments, raw)
            out += self._block_start({**_tool_use(call), "input": {}})
            index = self._blocks - 1
            if call_input := tool_input(call):
                partial = json.dumps(call_input, ensure_ascii=False)
                out += _delta(index, {"type": "input_json_delta", "partial_json": partial})
            out += sse_event({"type": "content_block_stop", "index": index})
        self._sent.update(self._held)
        self._held = {}
        return out


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse_event({"type": "content_block_delta", "index": index, "delta": delta})
