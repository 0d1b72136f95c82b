"""OpenAI Chat Completions (and compatible servers) ↔ neutral types, as pure functions (no I/O,
no HTTP, no errors beyond `MalformedAnswer`), so the gateway can reuse them.

The §4 pitfalls of `shared/reference/wire-formats.md` toward OpenAI: the system prompt as a
first message, arguments as a JSON *string* that may be invalid, one text-only `tool` message
per result, images only in user messages, `stream_options.include_usage` always asked for,
`prompt_tokens` that include cached tokens, tool-call indexes that some servers reuse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from engine.core.messages import (
    Image,
    Message,
    MessageEnd,
    Request,
    Response,
    StopReason,
    StreamEvent,
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
from engine.providers.codec import MalformedAnswer, arguments_text, count, parse_arguments

__all__ = [
    "MaxTokensField",
    "OpenAIStreamDecoder",
    "decode_response",
    "decode_usage",
    "encode_request",
    "map_finish_reason",
]

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
# OpenAI has no image in tool results: the result is text only, so an image is replaced by this
# note. Lossy by necessity; the model at least learns that there was an image.
IMAGE_OMITTED = "[image omitted]"
_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


# --- neutral → wire --------------------------------------------------------------------------


def encode_request(
    request: Request,
    model: str,
    *,
    max_tokens_field: MaxTokensField = "max_tokens",
    default_max_tokens: int | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": encode_messages(request)}
    max_tokens = request.max_tokens or default_max_tokens
    if max_tokens is not None:
        body[max_tokens_field] = max_tokens
    if request.tools:
        body["tools"] = [_encode_tool(tool) for tool in request.tools]
        # OpenAI rejects tool_choice and parallel_tool_calls without tools.
        if request.tool_choice is not None:
            body["tool_choice"] = _encode_tool_choice(request.tool_choice)
            if request.tool_choice.parallel is not None and request.tool_choice.mode != "none":
                body["parallel_tool_calls"] = request.tool_choice.parallel
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = list(request.stop)
    if request.user:
        body["user"] = request.user
    if stream:
        body["stream"] = True
        # Without it OpenAI sends no usage at all in a stream, and usage is what we bill by.
        body["stream_options"] = {"include_usage": True}
    return body


def encode_messages(request: Request) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    for message in request.messages:
        wire.extend(_encode_message(message))
    return wire


def _encode_message(message: Message) -> list[dict[str, Any]]:
    # Tool results answer the previous assistant turn, so their `tool` messages come before
    # any text the same neutral message carries.
    wire: list[dict[str, Any]] = [
        _encode_tool_result(p) for p in message.content if isinstance(p, ToolResult)
    ]
    texts = [p for p in message.content if isinstance(p, Text)]
    if message.role == "assistant":
        # Images are dropped here: OpenAI accepts them in user messages only.
        calls = [p for p in message.content if isinstance(p, ToolCall)]
        text = "".join(t.text for t in texts)
        if calls or text or not wire:
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [_encode_tool_call(c) for c in calls]
            else:
                entry["content"] = text
            wire.append(entry)
        return wire
    images = [p for p in message.content if isinstance(p, Image)]
    if images:
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, Text) and part.text:
                parts.append({"type": "text", "text": part.text})
            elif isinstance(part, Image):
                parts.append({"type": "image_url", "image_url": {"url": image_url(part)}})
        wire.append({"role": "user", "content": parts})
    elif any(t.text for t in texts) or not wire:
        # Plain string content: every compatible server understands it, not all take parts.
        wire.append({"role": "user", "content": "".join(t.text for t in texts)})
    return wire


def image_url(image: Image) -> str:
    if image.data is not None:
        return f"data:{image.media_type};base64,{image.data}"
    return str(image.url)


def _encode_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(call)},
    }


def _encode_tool_result(result: ToolResult) -> dict[str, Any]:
    # `is_error` has no OpenAI field either; the text usually says what went wrong.
    text = "".join(p.text if isinstance(p, Text) else IMAGE_OMITTED for p in result.content)
    return {"role": "tool", "tool_call_id": result.tool_call_id, "content": text}


def _encode_tool(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    if tool.input_schema:
        function["parameters"] = dict(tool.input_schema)
    return {"type": "function", "function": function}


def _encode_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return "required" if choice.mode == "any" else choice.mode


# --- wire → neutral --------------------------------------------------------------------------


def map_finish_reason(value: object, *, has_tool_calls: bool = False) -> StopReason:
    """Some compatible servers (Ollama, older vLLM) say `stop` while returning tool calls; the
    caller's tool loop keys on `tool_use`, so tool calls win over a plain stop."""
    if has_tool_calls and value in (None, "stop", "tool_calls", "function_call"):
        return "tool_use"
    if isinstance(value, str) and value in _FINISH_REASONS:
        return _FINISH_REASONS[value]
    return "end_turn"


def decode_usage(obj: object) -> Usage:
    """`prompt_tokens` includes cached reads and writes; neutral `input_tokens` does not."""
    if not isinstance(obj, Mapping):
        return Usage()
    details = obj.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    cached = count(details.get("cached_tokens"))
    written = count(details.get("cache_write_tokens"))
    return Usage(
        input_tokens=max(count(obj.get("prompt_tokens")) - cached - written, 0),
        output_tokens=count(obj.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def decode_response(
    obj: object, *, requested_model: str, provider: str = "", provider_request_id: str | None = None
) -> Response:
    """A non-stream chat completion. `content: null` with tool calls (or with a length or
    content-filter stop) is a valid answer; no choices, no message, or a null content with
    nothing else is malformed."""
    if not isinstance(obj, Mapping):
        raise MalformedAnswer("the answer is not a JSON object")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise MalformedAnswer("the answer has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise MalformedAnswer("the answer's choice has no message")
    finish = choice.get("finish_reason")
    parts: list[Text | ToolCall] = []
    content, refusal = message.get("content"), message.get("refusal")
    if isinstance(content, str) and content:
        parts.append(Text(content))
    elif isinstance(content, list):  # some compatible servers answer in parts
        text = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if text:
            parts.append(Text(text))
    if isinstance(refusal, str) and refusal:
        parts.append(Text(refusal))
    calls = message.get("tool_calls")
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        if isinstance(call, Mapping):
            parts.append(_decode_tool_call(call, position))
    if content is None and not parts and finish not in ("length", "content_filter"):
        raise MalformedAnswer("the answer has no content and no tool calls")
    stop = map_finish_reason(finish, has_tool_calls=any(isinstance(p, ToolCall) for p in parts))
    if isinstance(refusal, str) and refusal and stop == "end_turn":
        stop = "refusal"
    return Response(
        content=tuple(parts),
        stop_reason=stop,
        usage=decode_usage(obj.get("usage")),
        model=str(obj.get("model") or requested_model),
        provider=provider,
        provider_request_id=provider_request_id,
    )


def _decode_tool_call(call: Mapping[str, Any], position: int) -> ToolCall:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments, raw = parse_arguments(function.get("arguments"))
    return ToolCall(
        id=str(call.get("id") or f"call_{position}"),
        name=str(function.get("name") or ""),
        arguments=arguments,
        raw_arguments=raw,
    )


class OpenAIStreamDecoder:
    """Turns the parsed chunks of a chat-completion stream into neutral events.

    Only choice 0 is followed (we never ask for n > 1). A new tool call starts when a delta
    carries a wire index not seen yet *or* an id different from the one that index holds:
    some compatible servers reuse index 0 for parallel calls and differ only by id.
    Errors in chunks are the adapter's to classify before they get here.
    """

    def __init__(self, requested_model: str, provider_request_id: str | None = None) -> None:
        self.model = requested_model
        self.provider_request_id = provider_request_id
        self.usage = Usage()
        self.done = False
        self._finish: object = None
        self._refused = False
        self._answered = False  # a chunk with a choice arrived
        self._calls = 0
        self._slot: dict[int, tuple[int, str | None]] = {}  # wire index → (neutral index, id)

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        if self.done:
            return []
        if chunk.get("model"):
            self.model = str(chunk["model"])
        events: list[StreamEvent] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                self._answered = True
                events.extend(self._choice(choice))
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = decode_usage(chunk["usage"])
            events.append(UsageUpdate(self.usage))
        return events

    @property
    def finished(self) -> bool:
        """The finish reason arrived: the answer is whole, whether or not `[DONE]` follows
        (the usage chunk that `include_usage` asks for comes after it)."""
        return self._finish is not None

    def feed_done(self) -> list[StreamEvent]:
        """The `[DONE]` sentinel: the stream is complete, or empty if no choice ever came."""
        if self.done:
            return []
        if not self._answered:
            raise MalformedAnswer("the stream ended without a single choice")
        return self.finish()

    def finish(self) -> list[StreamEvent]:
        """The end of the message, with the usage that arrived: at `[DONE]`, or where a
        finished stream's body ended without it."""
        self.done = True
        stop = map_finish_reason(self._finish, has_tool_calls=self._calls > 0)
        if self._refused and stop == "end_turn":
            stop = "refusal"
        return [MessageEnd(stop, self.usage, self.model, self.provider_request_id)]

    def _choice(self, choice: Mapping[str, Any]) -> list[StreamEvent]:
        if choice.get("finish_reason") is not None:
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return []
        events: list[StreamEvent] = []
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                self._refused = self._refused or key == "refusal"
                events.append(TextDelta(text))
        calls = delta.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, Mapping):
                events.extend(self._tool_call(call, position))
        return events

    def _tool_call(self, call: Mapping[str, Any], position: int) -> list[StreamEvent]:
        wire_index = call.get("index", position)
        call_id = call.get("id") or None
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        slot = self._slot.get(wire_index)
        events: list[StreamEvent] = []
        if slot is None or (call_id is not None and slot[1] is not None and call_id != slot[1]):
            index = self._calls
            self._calls += 1
            self._slot[wire_index] = (index, call_id)
            name = str(function.get("name") or "")
            events.append(ToolCallStart(index, str(call_id or f"call_{index}"), name))
        else:
            index = slot[0]
        fragment = function.get("arguments")
        if isinstance(fragment, str) and fragment:
            events.append(ToolCallDelta(index, fragment))
        elif isinstance(fragment, Mapping):
            events.append(ToolCallDelta(index, json.dumps(fragment)))
        return events
