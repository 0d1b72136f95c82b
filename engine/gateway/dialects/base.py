"""What the gateway's two dialects share: the interface the app drives, the caller's-fault
signal, strict readers for untrusted JSON, and SSE framing.

A dialect is the server-side mirror of a provider codec: it reads what a caller's SDK sends
into the neutral `Request`, and writes neutral answers, streams and errors back in the shape
that SDK parses. It never does I/O and never decides a status on its own; the app maps
failures to statuses and asks the dialect only how to word them.

Every malformed input, whatever its shape, must end as `BadRequest` with a message that names
the field, never as a stray `TypeError` or `KeyError` (a 500 would blame the gateway).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.core import bounded_json
from engine.core.messages import (
    MessageEnd,
    Request,
    Response,
    StreamError,
    StreamEvent,
    StreamStart,
    Usage,
    UsageUpdate,
)

__all__ = [
    "FEATURE_HEADER",
    "BadRequest",
    "Dialect",
    "Parsed",
    "StreamEncoder",
    "array",
    "boolean",
    "describe",
    "dumps",
    "header",
    "integer",
    "invalid",
    "load_object",
    "mapping",
    "number",
    "optional_string",
    "required",
    "shown",
    "sse_data",
    "sse_event",
    "status_for_error_type",
    "string",
    "tool_arguments",
]

FEATURE_HEADER = "x-switchover-feature"
# Large enough for any real budget, small enough that no provider client overflows on it.
MAX_INT = 2**31 - 1


class BadRequest(Exception):
    """The caller's request is malformed: answered 400 (or `status`) in the caller's dialect.
    `param` is the offending field's path, `code` an OpenAI-style error code when one fits."""

    def __init__(
        self, message: str, *, param: str | None = None, status: int = 400, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Parsed:
    model: str  # what the caller asked for: a route name or provider/model
    request: Request  # neutral; `stream` set from the body
    include_usage: bool  # OpenAI: stream_options.include_usage; Anthropic: always True


class StreamEncoder(Protocol):
    def start(self, event: StreamStart) -> bytes: ...
    def event(self, event: StreamEvent) -> bytes: ...
    def end(self, event: MessageEnd) -> bytes: ...
    def error(self, event: StreamError) -> bytes: ...


class EncoderBase(ABC):
    """What both dialects' stream encoders do alike: route the chain's events, remember the
    latest usage, and open the stream (role chunk / message_start) before any content, so
    content that arrives before StreamStart is still framed. Subclasses say how a content
    event is written (`_content`), how a stream starts, ends and fails."""

    _closed: bool
    _usage: Usage

    @abstractmethod
    def start(self, event: StreamStart | None = None) -> bytes: ...

    @abstractmethod
    def end(self, event: MessageEnd) -> bytes: ...

    @abstractmethod
    def error(self, event: StreamError) -> bytes: ...

    @abstractmethod
    def _content(self, event: StreamEvent) -> bytes:
        """A content event (text, tool call start or fragment), after the opening."""

    def event(self, event: StreamEvent) -> bytes:
        if isinstance(event, StreamStart):
            return self.start(event)
        if isinstance(event, MessageEnd):
            return self.end(event)
        if isinstance(event, StreamError):
            return self.error(event)
        if self._closed:
            return b""
        if isinstance(event, UsageUpdate):
            self._usage = event.usage
            return b""
        return self.start() + self._content(event)


class Dialect(Protocol):
    name: str
    path: str

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Parsed: ...
    def encode(self, response: Response, *, model: str, request_id: str) -> dict[str, Any]: ...
    def stream_encoder(
        self, *, model: str, request_id: str, include_usage: bool
    ) -> StreamEncoder: ...
    def error_body(
        self,
        *,
        status: int,
        error_type: str,
        message: str,
        code: str | None = None,
        param: str | None = None,
        request_id: str,
    ) -> dict[str, Any]: ...
    def error_type_for(self, status: int) -> str: ...


# Anthropic's error types (the neutral convention of `StreamError.error_type`) by status, so
# the OpenAI face can word an in-band error the way it words the same failure before commit.
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def status_for_error_type(error_type: str) -> int:
    return _STATUS_OF_TYPE.get(error_type, 500)


# --- reading untrusted JSON ---------------------------------------------------------------


def load_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, within engine.core.bounded_json's limits: valid UTF-8 with no lone
    surrogate, no NaN, Infinity or overflowing number, at most MAX_DEPTH levels deep."""
    try:
        data = bounded_json.loads(body)
    except bounded_json.JsonRejected as exc:
        raise BadRequest(f"the request body {_BODY_PROBLEMS[exc.reason]}: {exc.message}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"the request body must be a JSON object, not {describe(data)}")
    return data


_BODY_PROBLEMS = {
    "invalid": "is not valid JSON",
    "too_deep": "is nested too deeply",
    "non_finite": "is not valid JSON",
    "unencodable": "is not valid text",
}


def tool_arguments(raw: object, where: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """(arguments, the caller's exact string) of a tool call in a caller's history. Arguments
    that are not JSON, or not an object, pass through as the raw string (it is what the model
    said); arguments no provider could be sent (too deep, a lone surrogate) are a BadRequest."""
    if isinstance(raw, Mapping):  # not OpenAI's shape, but unambiguous
        return dict(raw), None
    if not isinstance(raw, str):
        return {}, None
    if not raw.strip():
        return {}, raw
    try:
        parsed = bounded_json.loads(raw)
    except bounded_json.JsonRejected as exc:
        if exc.reason in ("too_deep", "unencodable"):
            raise invalid(where, exc.message) from None
        return None, raw
    return (parsed, raw) if isinstance(parsed, dict) else (None, raw)


def describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def shown(value: object) -> str:
    """A caller's value in an error message: short strings quoted, anything else by kind."""
    return repr(value[:40]) if isinstance(value, str) else describe(value)


def invalid(where: str, problem: str, code: str | None = "invalid_value") -> BadRequest:
    return BadRequest(f"{where}: {problem}", param=where, code=code)


def _wrong(where: str, expected: str, value: object) -> BadRequest:
    return invalid(where, f"expected {expected}, got {describe(value)}", "invalid_type")


def required(obj: Mapping[str, Any], key: str, where: str) -> Any:
    value = obj.get(key)
    if value is None:
        raise invalid(where, "Field required", "missing_required_parameter")
    return value


def mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _wrong(where, "an object", value)
    return value


def array(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _wrong(where, "an array", value)
    return value


def string(value: object, where: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise _wrong(where, "a string", value)
    if nonempty and not value:
        raise invalid(where, "must not be empty")
    return value


def optional_string(value: object, where: str) -> str | None:
    return None if value is None else string(value, where)


def boolean(value: object, where: str, *, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _wrong(where, "a boolean", value)
    return value


def integer(value: object, where: str, *, minimum: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(where, "an integer", value)
    if not minimum <= value <= MAX_INT:
        raise invalid(where, f"must be between {minimum} and {MAX_INT}, got {value}")
    return value


def number(value: object, where: str, *, low: float, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(where, "a number", value)
    # Compared before float(): a 400-digit integer is out of range, not an OverflowError.
    # NaN fails every comparison, so it is out of range too.
    if not low <= value <= high:
        raise invalid(where, f"must be between {low:g} and {high:g}, got {str(value)[:24]}")
    return float(value)


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name, case-insensitively even when `headers` is a plain dict."""
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value.strip() or None if isinstance(value, str) else None


# --- writing ------------------------------------------------------------------------------


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. A lone surrogate (which a provider's `\\ud800` escape can smuggle
    into a string) cannot be UTF-8; such a body is written ASCII-escaped instead of failing."""
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def sse_data(obj: Any) -> bytes:
    return b"data: " + dumps(obj) + b"\n\n"


def sse_event(obj: Mapping[str, Any]) -> bytes:
    """An Anthropic-style event: the `event:` name always equals `data.type`."""
    return b"event: " + str(obj["type"]).encode() + b"\n" + sse_data(obj)
