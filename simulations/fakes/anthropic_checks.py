"""Checks a request to the fake Anthropic Messages endpoint the way the real API does.

Follows the API's own 400 messages (`invalid_request_error`) for the mistakes a translating
gateway makes: no anthropic-version header, missing max_tokens, roles that do not alternate
or do not start with "user", a `system` role message, tool_use blocks not answered by
tool_result blocks (first in the content) of the very next message, tool ids outside
^[a-zA-Z0-9_-]+$, tool input that is not an object, an input_schema not of type object, a
final assistant message (prefill) that ends with whitespace.
A missing key is a 401 `authentication_error`; any non-empty key is accepted unless the fake
was given a set of valid keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from simulations.fakes.faults import ErrorShape
from simulations.fakes.schema_checks import schema_problem

_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_BLOCK_TYPES = {
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "search_result", "server_tool_use", "web_search_tool_result",
}  # fmt: skip


def _problem(message: str) -> ErrorShape:
    return ErrorShape(400, "invalid_request_error", message)


def check_auth(headers: Mapping[str, str], valid_keys: set[str] | None) -> ErrorShape | None:
    key = headers.get("x-api-key") or _bearer(headers.get("authorization", ""))
    if not key:
        return ErrorShape(401, "authentication_error", "x-api-key header is required")
    if valid_keys is not None and key not in valid_keys:
        return ErrorShape(401, "authentication_error", "invalid x-api-key")
    return None


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def validate(body: Any, headers: Mapping[str, str]) -> ErrorShape | None:
    if not headers.get("anthropic-version"):
        return _problem("anthropic-version: header is required")
    if not isinstance(body, dict):
        return _problem("Input should be a valid dictionary")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _problem("model: Field required")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        return _problem("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        return _problem("max_tokens: Input should be a valid integer greater than or equal to 0")
    temperature = body.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 1
    ):
        return _problem("temperature: Input should be less than or equal to 1")
    return (
        _check_system(body.get("system"))
        or _check_tools(body)
        or _check_messages(body.get("messages"))
    )


def _check_system(system: Any) -> ErrorShape | None:
    if system is None or isinstance(system, str):
        return None
    if isinstance(system, list) and all(_is_text(b) for b in system):
        return None
    return _problem("system: Input should be a valid string or a list of text blocks")


def _is_text(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _check_tools(body: dict[str, Any]) -> ErrorShape | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return _problem("tools: Input should be a valid list")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return _problem(f"tools.{i}: Input should be a valid dictionary")
        if tool.get("type") not in (None, "custom"):
            continue  # server tools (web search, ...) carry no schema
        if not _TOOL_NAME.match(str(tool.get("name", ""))):
            return _problem(
                f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            return _problem(f"tools.{i}.custom.input_schema: Field required")
        if schema.get("type") != "object":
            return _problem(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        if schema_problem(schema) is not None:
            return _problem(
                f"tools.{i}.custom.input_schema: JSON schema is invalid. It must match JSON "
                "Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more about "
                "tool use at https://docs.claude.com/en/docs/tool-use."
            )
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in (
            "auto",
            "any",
            "tool",
            "none",
        ):
            return _problem(
                "tool_choice: Input tag does not match any of the expected tags: "
                "'auto', 'any', 'tool', 'none'"
            )
        names = {t.get("name") for t in tools if isinstance(t, dict)}
        if choice["type"] == "tool" and choice.get("name") not in names:
            return _problem(f"tool_choice: tool '{choice.get('name')}' not found in tools")
    return None


def _check_messages(messages: Any) -> ErrorShape | None:
    if messages is None:
        return _problem("messages: Field required")
    if not isinstance(messages, list):
        return _problem("messages: Input should be a valid list")
    if not messages:
        return _problem("messages: at least one message is required")
    previous_uses: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return _problem(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role == "system":
            return _problem(
                'messages: Unexpected role "system". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.'
            )
        if role not in ("user", "assistant"):
            return _problem(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            return _problem('messages: first message must use the "user" role')
        if i > 0 and role == messages[i - 1].get("role"):
            return _problem(
                f'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row'
            )
        blocks, problem = _blocks(message.get("content"), i, role)
        if problem:
            return problem
        problem = _check_tool_pairing(blocks, i, previous_uses)
        if problem:
            return problem
        previous_uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if previous_uses:
        return _unanswered(len(messages) - 1, previous_uses)
    final = blocks[-1] if role == "assistant" and blocks else {}  # the last message's blocks
    if final.get("type") == "text" and final["text"] != final["text"].rstrip():
        return _problem("messages: final assistant content cannot end with trailing whitespace")
    return None


def _blocks(content: Any, i: int, role: str) -> tuple[list[dict[str, Any]], ErrorShape | None]:
    if isinstance(content, str):
        if not content and role == "user":
            return [], _problem(f"messages.{i}: user messages must have non-empty content")
        return [{"type": "text", "text": content}], None
    if not isinstance(content, list):
        return [], _problem(f"messages.{i}.content: Input should be a valid list")
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _BLOCK_TYPES:
            return [], _problem(
                f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags"
            )
        if kind == "text" and not isinstance(block.get("text"), str):
            return [], _problem(f"{where}.text.text: Field required")
        if kind == "tool_use":
            if role != "assistant":
                return [], _problem(
                    f"{where}: tool_use blocks are only allowed in assistant messages"
                )
            if not isinstance(block.get("id"), str) or not _ID.match(block["id"]):
                return [], _problem(
                    f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                )
            if not isinstance(block.get("input"), dict):
                return [], _problem(f"{where}.tool_use.input: Input should be a valid dictionary")
        if kind == "tool_result":
            if role != "user":
                return [], _problem(
                    f"{where}: tool_result blocks are only allowed in user messages"
                )
            if not isinstance(block.get("tool_use_id"), str) or not _ID.match(block["tool_use_id"]):
                return [], _problem(
                    f"{where}.tool_result.tool_use_id: String should match pattern "
                    "'^[a-zA-Z0-9_-]+$'"
                )
    return content, None


def _check_tool_pairing(blocks: list[dict[str, Any]], i: int, uses: list[str]) -> ErrorShape | None:
    results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    unexpected = [r for r in results if r not in uses]
    if unexpected:
        return _problem(
            f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message."
        )
    if uses:
        missing = [u for u in uses if u not in results]
        if missing:
            return _unanswered(i - 1, missing)
        kinds = [b.get("type") for b in blocks]
        if kinds[: len(results)] != ["tool_result"] * len(results):
            return _problem(
                f"messages.{i}: tool_result blocks must come first in the content, before any "
                "other block"
            )
    return None


def _unanswered(i: int, ids: list[str]) -> ErrorShape:
    return _problem(
        f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )
