"""A tool conversation survives a fallback between dialects: ids and results stay intact.

The fake providers validate tool turns as the real APIs do (every tool call answered by a
result with the same id, in the right place), so a translation slip shows up as a 400."""

from __future__ import annotations

import pytest

from engine.core.messages import Message, Request, Text, Tool, ToolCall, ToolResult
from engine.providers.codec import sanitize_tool_id

from .conftest import Stack

ORDER_TOOL = Tool(
    "get_order",
    "Look an order up by its number.",
    {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
QUESTION = Message.user("Where is order 1234?")


def _continue(history: tuple[Message, ...], *results: tuple[str, str]) -> Request:
    turn = Message("user", tuple(ToolResult(call_id, (Text(text),)) for call_id, text in results))
    return Request(messages=(*history, turn), tools=(ORDER_TOOL,), max_tokens=200)


@pytest.mark.parametrize(("first", "second"), [("anthropic", "openai"), ("openai", "anthropic")])
async def test_a_tool_conversation_continues_on_the_other_dialect_after_a_fallback(
    stack: Stack, first: str, second: str
):
    opening = Request(messages=(QUESTION,), tools=(ORDER_TOOL,), max_tokens=200)
    reply = await stack.chain((first, "primary")).complete(opening)
    (call,) = reply.tool_calls
    assert call.name == "get_order" and reply.stop_reason == "tool_use"

    # The primary breaks; the backup in the other dialect gets the whole history.
    history = (QUESTION, Message("assistant", reply.content))
    chain = stack.chain((first, "primary#overloaded"), (second, "backup"))
    answer = await chain.complete(_continue(history, (call.id, "shipped on Monday")))

    assert answer.model == "backup"
    assert answer.text == f"tool results: {_as_sent(call.id, second)}=shipped on Monday"


async def test_parallel_tool_calls_and_foreign_ids_survive_both_directions(stack: Stack):
    """Two calls in one turn, one with an id only an OpenAI-compatible server would mint."""
    calls = (
        ToolCall("functions.get_order:0", "get_order", {"order_id": "1"}),
        ToolCall("call_b2", "get_order", None, raw_arguments='{"order_id": "2"'),  # broken JSON
    )
    history = (QUESTION, Message("assistant", (Text("Checking both."), *calls)))
    request = _continue(history, ("functions.get_order:0", "late"), ("call_b2", "delivered"))
    for dialect in ("anthropic", "openai"):
        answer = await stack.chain((dialect, f"{dialect}-backup")).complete(request)
        expected = "; ".join(
            f"{_as_sent(c.id, dialect)}={t}"
            for c, t in zip(calls, ("late", "delivered"), strict=True)
        )
        assert answer.text == f"tool results: {expected}"


async def test_the_same_foreign_id_maps_the_same_way_on_every_call(stack: Stack):
    history = (
        QUESTION,
        Message("assistant", (ToolCall("functions.get_order:0", "get_order", {"order_id": "1"}),)),
    )
    request = _continue(history, ("functions.get_order:0", "late"))
    chain = stack.chain(("anthropic", "claude"))
    first, again = await chain.complete(request), await chain.complete(request)
    assert first.text == again.text


def _as_sent(call_id: str, dialect: str) -> str:
    """Anthropic accepts only [a-zA-Z0-9_-] ids; the adapter rewrites others deterministically."""
    return call_id if dialect == "openai" else sanitize_tool_id(call_id)
