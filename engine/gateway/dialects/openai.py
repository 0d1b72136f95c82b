"""The gateway's OpenAI Chat Completions face: a caller's `POST /v1/chat/completions` body into
the neutral `Request` (`openai_request`), and neutral answers, streams and errors back in the
shapes the official `openai` SDK parses.

The mirror image of `engine.providers.openai_codec`, whose shared helpers it reuses
(engine.providers.codec). Toward the caller: arguments written as the provider's exact string
(even when it is not JSON), `prompt_tokens` that include cached tokens, tool calls numbered 0,
1, ... in a stream, and a usage chunk only when the caller asked for one. Never does I/O; the
app decides statuses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from engine.core.messages import (
    MessageEnd,
    Response,
    StopReason,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from engine.gateway.dialects.base import EncoderBase, Parsed, sse_data, status_for_error_type
from engine.gateway.dialects.openai_request import parse
from engine.providers.codec import arguments_text

__all__ = ["OPENAI", "OpenAIDialect", "OpenAIStreamEncoder", "error_type_for", "finish_reason"]

_FINISH: dict[StopReason, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",  # OpenAI has one reason for both; it never says which stop matched
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    # The turn is unfinished (a long server-tool run) and has to be continued; "length" is the
    # OpenAI reason that tells a caller the answer is incomplete, "stop" would say it is done.
    "pause_turn": "length",
}
_TYPES = {
    401: "authentication_error",
    402: "insufficient_quota",  # OpenAI's own quota answer is a 429 of this type
    403: "permission_error",
    429: "rate_limit_error",
}
_DONE = b"data: [DONE]\n\n"


def finish_reason(stop: StopReason) -> str:
    return _FINISH.get(stop, "stop")


def error_type_for(status: int) -> str:
    """OpenAI reports almost every 4xx as invalid_request_error and every 5xx as server_error;
    the machine-readable detail (rate_limit_exceeded, insufficient_quota...) is the `code`."""
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "server_error"


def usage_body(usage: Usage) -> dict[str, Any]:
    """`prompt_tokens` counts cached tokens too (`cached_tokens` is a subset of it)."""
    prompt = usage.total_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
    }


class OpenAIDialect:
    name = "openai"
    path = "/v1/chat/completions"

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Parsed:
        return parse(body, headers)

    def encode(
        self, response: Response, *, model: str, request_id: str, created: int | None = None
    ) -> dict[str, Any]:
        calls, text = response.tool_calls, response.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if text or not calls else None,
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = [_wire_call(call) for call in calls]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason(response.stop_reason),
        }
        return {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion",
            "created": int(time.time()) if created is None else created,
            "model": model,
            "choices": [choice],
            "usage": usage_body(response.usage),
            "system_fingerprint": None,
        }

    def stream_encoder(
        self, *, model: str, request_id: str, include_usage: bool, created: int | None = None
    ) -> OpenAIStreamEncoder:
        return OpenAIStreamEncoder(
            model=model, request_id=request_id, include_usage=include_usage, created=created
        )

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
        # The request id travels in the x-request-id header; OpenAI's body has no place for it.
        return {"error": {"message": message, "type": error_type, "param": param, "code": code}}

    def error_type_for(self, status: int) -> str:
        return error_type_for(status)


OPENAI = OpenAIDialect()


# --- neutral → wire -------------------------------------------------------------------------


def _wire_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(call)},
    }


class OpenAIStreamEncoder(EncoderBase):
    """A neutral stream as `chat.completion.chunk`s. Tool calls are numbered 0, 1, ... in the
    order they start, whatever indexes the neutral stream used, because the SDK's accumulator
    uses the index as a list position. After `end` or `error` nothing more is written."""

    def __init__(
        self, *, model: str, request_id: str, include_usage: bool, created: int | None = None
    ) -> None:
        self._head: dict[str, Any] = {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": int(time.time()) if created is None else created,
            "model": model,
            "system_fingerprint": None,
        }
        self._include_usage = include_usage
        self._started = False
        self._closed = False
        self._usage = Usage()
        self._calls: dict[int, int] = {}  # neutral tool index → wire index

    def start(self, event: StreamStart | None = None) -> bytes:
        if self._started or self._closed:
            return b""
        self._started = True
        return self._chunk({"role": "assistant", "content": "", "refusal": None})

    def _content(self, event: StreamEvent) -> bytes:
        out = b""
        if isinstance(event, TextDelta) and event.text:
            out += self._chunk({"content": event.text})
        elif isinstance(event, ToolCallStart) and event.index not in self._calls:
            index = self._calls[event.index] = len(self._calls)
            function = {"name": event.name, "arguments": ""}
            call = {"index": index, "id": event.id, "type": "function", "function": function}
            out += self._chunk({"tool_calls": [call]})
        elif isinstance(event, ToolCallDelta) and event.index in self._calls and event.arguments:
            call = {"index": self._calls[event.index], "function": {"arguments": event.arguments}}
            out += self._chunk({"tool_calls": [call]})
        return out

    def end(self, event: MessageEnd) -> bytes:
        if self._closed:
            return b""
        out = self.start()
        self._closed = True
        out += self._chunk({}, finish_reason(event.stop_reason))
        if self._include_usage:
            usage = event.usage if event.usage != Usage() else self._usage
            out += sse_data({**self._head, "choices": [], "usage": usage_body(usage)})
        return out + _DONE

    def error(self, event: StreamError) -> bytes:
        """The SDK raises `APIError` on any chunk with an `error` key; no [DONE] follows."""
        if self._closed:
            return b""
        self._closed = True
        error = {
            "message": event.message,
            "type": error_type_for(status_for_error_type(event.error_type)),
            "param": None,
            "code": event.error_class or None,
        }
        return sse_data({"error": error})

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        chunk = {**self._head, "choices": [choice]}
        if self._include_usage:  # as OpenAI does: every chunk but the last carries usage: null
            chunk["usage"] = None
        return sse_data(chunk)
