"""Neutral request, response, stream and attempt types.

Every provider dialect translates to and from these; nothing outside `engine/providers/`
sees provider JSON. All types are frozen: a request handed to the chain is replayed
unchanged to every target, and an Attempt is a fact that never changes once recorded.

Conventions that the dialects disagree on, fixed here once:
- `Usage.input_tokens` excludes cached tokens (Anthropic's convention); the OpenAI adapter
  subtracts `cached_tokens` and `cache_write_tokens` from `prompt_tokens`.
- Tool-call arguments are an object; the raw string an OpenAI-dialect server sent is kept in
  `ToolCall.raw_arguments` so that invalid JSON can be passed through untouched.
- Stop reasons use Anthropic's names (`StopReason`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.core.attempt import Attempt

Role = Literal["user", "assistant"]
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn"]


# --- request parts -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    # Ask the provider to cache the prompt up to and including this part (Anthropic
    # `cache_control`); OpenAI-dialect servers cache automatically and ignore it.
    cache: bool = False


@dataclass(frozen=True, slots=True)
class Image:
    """An image given inline (base64 `data` with its `media_type`) or by `url`."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("an Image needs exactly one of data (base64) or url")
        if self.data is not None and not self.media_type:
            raise ValueError("an inline Image needs its media_type")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asking for a tool. `arguments` is None when `raw_arguments` is not valid JSON."""

    id: str
    name: str
    arguments: Mapping[str, Any] | None
    raw_arguments: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: tuple[Text | Image, ...]
    is_error: bool = False


Part = Text | Image | ToolCall | ToolResult


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: tuple[Part, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (Text(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", (Text(text),))

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, Text))


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """`auto`: the model decides; `any`: some tool must be called; `tool`: the one named;
    `none`: no tool. `parallel=False` forbids several calls in one turn."""

    mode: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None
    parallel: bool | None = None


@dataclass(frozen=True, slots=True)
class Request:
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    temperature: float | None = None  # OpenAI's 0-2 scale; the Anthropic adapter clamps to 1
    stop: tuple[str, ...] = ()
    feature: str | None = None  # the caller's feature/app tag, recorded on every attempt
    key_label: str | None = None  # the label of the gateway key that let it in, likewise
    stream: bool = False
    user: str | None = None
    cache_system: bool = False  # mark the system prompt cacheable (Anthropic cache_control)

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a Request needs at least one message")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")

    def replace(self, **changes: Any) -> Request:
        return dataclasses.replace(self, **changes)

    def estimated_input_tokens(self) -> int:
        """A rough prompt size (about 4 characters a token, a flat 800 an image), for pricing
        attempts that may have been billed although no usage came back."""
        chars = len(self.system or "")
        images = 0
        for message in self.messages:
            for part in message.content:
                if isinstance(part, Text):
                    chars += len(part.text)
                elif isinstance(part, Image):
                    images += 1
                elif isinstance(part, ToolCall):
                    chars += len(part.raw_arguments or "") or len(str(part.arguments or ""))
                elif isinstance(part, ToolResult):
                    chars += sum(len(p.text) for p in part.content if isinstance(p, Text))
                    images += sum(1 for p in part.content if isinstance(p, Image))
        chars += sum(
            len(t.name) + len(t.description) + len(str(t.input_schema)) for t in self.tools
        )
        return chars // 4 + 800 * images


# --- response --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0  # uncached input only
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True)
class Response:
    content: tuple[Text | ToolCall, ...]
    stop_reason: StopReason
    usage: Usage
    model: str  # the model that answered, as the provider named it
    provider: str = ""  # the configured provider name that served (filled in by the chain)
    route: str = ""
    provider_request_id: str | None = None
    attempts: tuple[Attempt, ...] = ()
    fallback_depth: int = 0  # 0 when the first eligible target served
    # Set when the answer broke the route's output contract or a tool's input schema and the
    # route records rather than falls back (engine.behaviours.contracts); the answer is still
    # returned.
    quality_error: str | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, Text))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.content if isinstance(p, ToolCall))

    def replace(self, **changes: Any) -> Response:
        return dataclasses.replace(self, **changes)


# --- stream events ---------------------------------------------------------------------------
# A provider stream yields TextDelta / ToolCallStart / ToolCallDelta / UsageUpdate and ends with
# MessageEnd. The chain adds StreamStart (just before the first content event: from then on the
# answer is committed to that target) and StreamError (a failure after commit, reported in-band).


@dataclass(frozen=True, slots=True)
class StreamStart:
    route: str
    provider: str
    model: str
    fallback_depth: int
    attempts_so_far: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int  # counts tool calls only, from 0
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    index: int
    arguments: str  # a fragment of the JSON arguments string


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    usage: Usage  # cumulative


@dataclass(frozen=True, slots=True)
class MessageEnd:
    stop_reason: StopReason
    usage: Usage
    model: str = ""
    provider_request_id: str | None = None
    attempts: tuple[Attempt, ...] = ()  # filled in by the chain
    unreadable_events: int = 0  # events skipped because their data did not parse (row 26)


@dataclass(frozen=True, slots=True)
class StreamError:
    """A failure after the stream was committed; the stream ends after it, incomplete."""

    error_class: str
    message: str
    error_type: str  # Anthropic-style error type, e.g. overloaded_error
    attempts: tuple[Attempt, ...] = ()


StreamEvent = (
    StreamStart | TextDelta | ToolCallStart | ToolCallDelta | UsageUpdate | MessageEnd | StreamError
)


def is_content(event: StreamEvent) -> bool:
    """Content commits a stream: role-only chunks, pings and usage do not."""
    if isinstance(event, TextDelta):
        return bool(event.text)
    return isinstance(event, ToolCallStart)
