"""The fake "model": a deterministic answer to a conversation, and its token counts.

Dialect-neutral: `anthropic.py` and `openai.py` read their request into a `Conversation` and
write the `Answer` back in their wire format. The behaviour is chosen so that tests can see
what survived translation:

- tools offered and no tool result in the last user turn → a call to the first tool (or the
  one `tool_choice` names) with arguments built from its input schema;
- tool results in the last user turn → text quoting them: "tool results: <id>=<content>; ...";
- otherwise → "echo: <last user text>" (or the configured reply text);
- a last message that is the assistant's (Anthropic prefill; in the OpenAI dialect too, as
  the compatible servers that continue a final assistant message do) → the rest of that
  answer after the prefilled text, never the prefill again: "echo: hello" prefilled with
  "echo: he" answers "llo". A prefill that is not the start of the answer gets the whole
  answer. The `prefill_rejected` fault refuses such requests instead.

Tokens are estimated at ~4 characters each; `PromptUsage` is a prompt's tokens as a provider
reports them, the cached ones from `simulations.fakes.cache`.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from dataclasses import dataclass, field, replace
from typing import Any

CHARS_PER_TOKEN = 4
_ALPHANUM = string.ascii_letters + string.digits


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Tool:
    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Conversation:
    model: str
    last_user_text: str = ""
    tool_results: tuple[tuple[str, str], ...] = ()  # (tool call id, content as text)
    tools: tuple[Tool, ...] = ()
    tool_choice: str | None = None  # None/"auto", "none", "any", or a tool name
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    # The text of a last message that is the assistant's (prefill, or a stream continued
    # elsewhere): the answer continues it. None when the last message is the user's.
    prefill: str | None = None


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text; deliberately invalid for the bad_tool_args fault


@dataclass(frozen=True)
class PromptUsage:
    total: int  # every prompt token, cached ones included
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Answer:
    id: str
    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    stop: str = "end_turn"  # Anthropic's names: end_turn, tool_use, max_tokens, refusal
    prompt: PromptUsage = field(default_factory=lambda: PromptUsage(0))

    @property
    def output_tokens(self) -> int:
        chars = len(self.text or "") + sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        return max(1, tokens(chars))

    def but(self, **changes: Any) -> Answer:
        return replace(self, **changes)


class Ids:
    """Provider-looking ids from a seeded RNG, so a seeded fake replays identically."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def _chars(self, n: int, alphabet: str = _ALPHANUM) -> str:
        return "".join(self._rng.choice(alphabet) for _ in range(n))

    def message(self, dialect: str) -> str:
        return (
            "msg_01" + self._chars(22) if dialect == "anthropic" else "chatcmpl-" + self._chars(29)
        )

    def tool_call(self, dialect: str) -> str:
        return "toolu_01" + self._chars(22) if dialect == "anthropic" else "call_" + self._chars(24)

    def request(self, dialect: str) -> str:
        if dialect == "anthropic":
            return "req_011C" + self._chars(20)
        return "req_" + self._chars(32, "0123456789abcdef")

    def ray(self) -> str:
        return self._chars(16, "0123456789abcdef") + "-SJC"


def make_answer(
    conv: Conversation, prompt: PromptUsage, ids: Ids, dialect: str, reply_text: str | None = None
) -> Answer:
    answer_id = ids.message(dialect)
    if conv.prefill is not None:  # text continues text: no tool call after a prefill
        whole = reply_text or f"echo: {conv.last_user_text}"
        rest = whole[len(conv.prefill) :] if whole.startswith(conv.prefill) else whole
        return _capped(Answer(answer_id, rest, prompt=prompt), conv)
    if conv.tool_results:
        quoted = "; ".join(f"{call_id}={content}" for call_id, content in conv.tool_results)
        return _capped(
            Answer(answer_id, reply_text or f"tool results: {quoted}", prompt=prompt), conv
        )
    call = tool_call_for(conv, ids, dialect)
    if call is not None:
        return Answer(answer_id, None, (call,), "tool_use", prompt)
    return _capped(
        Answer(answer_id, reply_text or f"echo: {conv.last_user_text}", prompt=prompt), conv
    )


def tool_call_for(
    conv: Conversation, ids: Ids, dialect: str, *, force: bool = False
) -> ToolCall | None:
    """The call the model makes, or None when it answers in text. `force` always calls."""
    if conv.tool_choice == "none" and not force:
        return None
    tool = next((t for t in conv.tools if t.name == conv.tool_choice), None)
    tool = tool or (conv.tools[0] if conv.tools else None)
    if tool is None:
        if not force:
            return None
        tool = Tool("lookup", {"type": "object", "properties": {"query": {"type": "string"}}})
    arguments = json.dumps(arguments_for(tool.schema, conv.last_user_text))
    return ToolCall(ids.tool_call(dialect), tool.name, arguments)


def arguments_for(schema: dict[str, Any], user_text: str) -> dict[str, Any]:
    """Plausible arguments: the user's text for the first string property, simple values else."""
    args: dict[str, Any] = {}
    text_given = False
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for name, prop in (properties if isinstance(properties, dict) else {}).items():
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type", "string")
        if prop.get("enum"):
            args[name] = prop["enum"][0]
        elif kind == "string":
            args[name] = user_text if user_text and not text_given else "example"
            text_given = True
        else:
            simple = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
            args[name] = simple.get(kind if isinstance(kind, str) else "string", "example")
    return args


def _capped(answer: Answer, conv: Conversation) -> Answer:
    """Cut the text at max_tokens, as a model that runs out of room does."""
    if conv.max_tokens is None or answer.text is None:
        return answer
    limit = conv.max_tokens * CHARS_PER_TOKEN
    if len(answer.text) <= limit:
        return answer
    return answer.but(text=answer.text[:limit], stop="max_tokens")


_WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]


def words_text(count: int) -> str:
    """A reply of `count` words (the `words=` fault parameter), long enough for many events."""
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(count)) + "."


def split_text(text: str, size: int = 12) -> list[str]:
    """Stream deltas: whole words, about `size` characters each; they join back to `text`."""
    pieces = [""]
    for word in re.findall(r"\s*\S+\s*|\s+", text):
        if pieces[-1] and len(pieces[-1]) + len(word) > size:
            pieces.append("")
        pieces[-1] += word
    return pieces


def split_json(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
