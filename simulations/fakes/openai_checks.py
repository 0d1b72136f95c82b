"""Checks a request to the fake OpenAI Chat Completions endpoint the way the real API does.

Follows the API's own 400 messages for the mistakes a translating gateway makes: unknown
roles, tool_calls whose ids are not answered by `role:"tool"` messages right after, a tool
message with no preceding tool_calls, `function.arguments` that is not a string, tool names
outside ^[a-zA-Z0-9_-]{1,64}$, stream_options without stream, out-of-range parameters.
A missing bearer key is a 401; any non-empty key is accepted unless the fake was given a set
of valid keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from simulations.fakes.faults import ErrorShape
from simulations.fakes.schema_checks import schema_problem

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _problem(message: str, param: str | None = None, code: str | None = None) -> ErrorShape:
    return ErrorShape(400, "invalid_request_error", message, code=code, param=param)


def check_auth(headers: Mapping[str, str], valid_keys: set[str] | None) -> ErrorShape | None:
    scheme, _, key = headers.get("authorization", "").partition(" ")
    key = key.strip() if scheme.lower() == "bearer" else ""
    if not key:
        return ErrorShape(
            401,
            "invalid_request_error",
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
    if valid_keys is not None and key not in valid_keys:
        return ErrorShape(
            401,
            "invalid_request_error",
            f"Incorrect API key provided: {key[:3]}***{key[-4:]}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )
    return None


def validate(body: Any, headers: Mapping[str, str]) -> ErrorShape | None:
    if not isinstance(body, dict):
        return _problem("Invalid type for request body: expected an object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _problem("you must provide a model parameter", "model", "missing_required_parameter")
    for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
        value = body.get(name)
        if value is not None and not (isinstance(value, int | float) and low <= value <= high):
            return _problem(
                f"Invalid '{name}': decimal above maximum value. Expected a value <= {high}.",
                name,
                "decimal_above_max_value",
            )
    for name in ("max_tokens", "max_completion_tokens", "n"):
        value = body.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            return _problem(f"Invalid '{name}': expected an integer >= 1.", name, "invalid_value")
    if body.get("stream_options") is not None and not body.get("stream"):
        return _problem(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            "invalid_value",
        )
    return _check_tools(body.get("tools")) or _check_messages(body.get("messages"))


def _check_tools(tools: Any) -> ErrorShape | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return _problem("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            return _problem(
                f"Missing required parameter: 'tools[{i}].function'.", f"tools[{i}].function"
            )
        if not _TOOL_NAME.match(str(function.get("name", ""))):
            return _problem(
                f"Invalid 'tools[{i}].function.name': string does not match pattern. Expected "
                "a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"tools[{i}].function.name",
                "invalid_value",
            )
        problem = _check_parameters(function.get("parameters"), str(function["name"]), i)
        if problem is not None:
            return problem
    return None


def _check_parameters(schema: Any, name: str, i: int) -> ErrorShape | None:
    if schema is None:
        return None
    if isinstance(schema, dict) and schema.get("type", "object") != "object":
        why = f"schema must be a JSON Schema of 'type: \"object\"', got {_type_of(schema)}"
    else:
        why = schema_problem(schema)
    if why is None:
        return None
    return _problem(
        f"Invalid schema for function '{name}': {why}.",
        f"tools[{i}].function.parameters",
        "invalid_function_parameters",
    )


def _type_of(schema: dict[str, Any]) -> str:
    return f"'type: \"{schema.get('type')}\"'"


def _check_messages(messages: Any) -> ErrorShape | None:
    if messages is None:
        return _problem(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    if not isinstance(messages, list):
        return _problem(
            "Invalid type for 'messages': expected an array.", "messages", "invalid_type"
        )
    if not messages:
        return _problem(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            "messages",
            "empty_array",
        )
    pending: list[str] = []  # tool_call ids still owed a tool message
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _ROLES:
            return _problem(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                "'function', 'tool', and 'developer'.",
                f"messages[{i}].role",
                "invalid_value",
            )
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                return _problem(
                    f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                    f"messages[{i}].tool_call_id",
                )
            if call_id not in pending:
                return _problem(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            pending.remove(call_id)
            continue
        if pending:
            return _unanswered(pending)
        problem = _check_content(message, i, role)
        if problem:
            return problem
        if role == "assistant":
            pending, problem = _tool_calls(message.get("tool_calls"), i)
            if problem:
                return problem
    return _unanswered(pending) if pending else None


def _unanswered(pending: list[str]) -> ErrorShape:
    return _problem(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
        "messages",
    )


def _check_content(message: dict[str, Any], i: int, role: str) -> ErrorShape | None:
    content = message.get("content")
    if content is None:
        if role == "assistant" and (message.get("tool_calls") or message.get("refusal")):
            return None
        return _problem(
            "Invalid value for 'content': expected a string, got null.", f"messages[{i}].content"
        )
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return _problem(
            f"Invalid type for 'messages[{i}].content': expected one of a string or array of "
            "objects.",
            f"messages[{i}].content",
            "invalid_type",
        )
    allowed = (
        {"text", "image_url", "input_audio", "file"} if role == "user" else {"text", "refusal"}
    )
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            return _problem(
                f"Invalid value: '{kind}'. Supported values are: {', '.join(sorted(allowed))}.",
                f"messages[{i}].content[{j}].type",
                "invalid_value",
            )
    return None


def _tool_calls(calls: Any, i: int) -> tuple[list[str], ErrorShape | None]:
    if calls is None:
        return [], None
    if not isinstance(calls, list):
        return [], _problem(
            f"Invalid type for 'messages[{i}].tool_calls': expected an array.",
            f"messages[{i}].tool_calls",
            "invalid_type",
        )
    ids = []
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call.get("id") if isinstance(call, dict) else None, str):
            return [], _problem(
                f"Missing required parameter: '{where}.id'.",
                f"{where}.id",
                "missing_required_parameter",
            )
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return [], _problem(
                f"Missing required parameter: '{where}.function'.",
                f"{where}.function",
                "missing_required_parameter",
            )
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            got = {dict: "an object", list: "an array", type(None): "null"}.get(
                type(arguments), type(arguments).__name__
            )
            return [], _problem(
                f"Invalid type for '{where}.function.arguments': expected a string, but got "
                f"{got} instead.",
                f"{where}.function.arguments", "invalid_type",
            )  # fmt: skip
        ids.append(call["id"])
    return ids, None
