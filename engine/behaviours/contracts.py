"""Output contracts: does an answer say what the caller can use?

A *quality error* is an answer that arrived intact over the wire but is unusable: text that
should be JSON and is not, JSON that breaks the route's declared schema, a tool call whose
arguments are not a JSON object or break the tool's `input_schema`, or a call to a tool the
request never offered. It is not a transport failure (the provider did answer, and was paid);
the engine records it on the attempt and counts it per provider.

This module only judges. It never records, retries, falls back or raises on a bad answer: each
check returns the first `Violation` found, or None. Schemas are checked once, when the config
loads (`OutputContract`), or compiled once per distinct tool schema (a bounded cache).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from engine.core import bounded_json
from engine.core.messages import Request, Response, Tool, ToolCall

QUALITY_KINDS = ("invalid_json", "schema", "tool_arguments", "unknown_tool")

# Violations end up in attempt records and dashboards: a bounded summary, never the answer.
MESSAGE_LIMIT = 300

# A whole answer wrapped in one fence, tagged `json` or untagged. The inside may not contain
# another fence: "```json\n{}\n```\nsee also\n```\n{}\n```" is two fences with prose between.
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<inside>.*?)\n?[ \t]*```\Z", re.DOTALL | re.I)


@dataclass(frozen=True, slots=True)
class Violation:
    """Why an answer is unusable; `str()` is the text recorded on the attempt."""

    kind: str  # one of QUALITY_KINDS
    message: str

    def __post_init__(self) -> None:
        if self.kind not in QUALITY_KINDS:
            raise ValueError(f"unknown quality kind {self.kind!r}; expected one of {QUALITY_KINDS}")
        # Messages quote parts of the answer (jsonschema reprs the failing instance), so the
        # bound is enforced here, where no caller can forget it.
        object.__setattr__(self, "message", _clip(self.message))

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class OutputContract:
    """A route's JSON Schema, checked once when the config loads.

    The dialect comes from `$schema` (Draft 2020-12 when absent). `format` is an annotation
    only, as the drafts specify by default: a route that needs a shape checked uses `pattern`.
    Nothing is fetched: a `$ref` to another document raises `referencing.exceptions.Unresolvable`
    when an answer reaches it, so contracts keep their definitions in `$defs`.
    """

    __slots__ = ("_validator", "schema")
    schema: Mapping[str, Any]

    def __init__(self, schema: Mapping[str, Any]) -> None:
        if not isinstance(schema, Mapping):
            raise ValueError(
                f"an output contract must be a JSON object, not {type(schema).__name__}"
            )
        cls = _validator_class(schema)
        try:
            cls.check_schema(schema)
        except SchemaError as error:
            where = error.json_path if error.path else "the schema"
            raise ValueError(
                f"invalid output contract ({cls.__name__}): {where}: {_clip(error.message)}"
            ) from None
        self.schema = schema
        self._validator: Validator = cls(schema)

    def check_text(self, text: str) -> Violation | None:
        """The answer text must be JSON satisfying the schema.

        Models fence JSON in Markdown even when told not to, so an answer that is exactly one
        ```json (or bare ```) fence is judged by its inside. Nothing else is repaired: prose
        around the JSON, or around the fence, is an `invalid_json` violation, because a caller
        parsing the answer would fail on it too.
        """
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced and "```" not in fenced["inside"]:
            body = fenced["inside"].strip()
        if not body:
            return Violation("invalid_json", "the answer is empty")
        try:
            value = bounded_json.loads(body)
        except bounded_json.JsonRejected as error:
            # The decoder's reason and position (never the document, which is the answer):
            # broken JSON, NaN, a lone surrogate, or nesting no caller's parser would take.
            detail = error.message.removeprefix("not valid JSON: ")
            return Violation("invalid_json", f"the answer is not JSON: {detail}")
        error = best_match(self._validator.iter_errors(value))
        return None if error is None else Violation("schema", _describe(error))

    def __eq__(self, other: object) -> bool:
        # Config reloads compare old and new routes; two equal schemas are the same contract.
        return isinstance(other, OutputContract) and _key(self.schema) == _key(other.schema)

    def __hash__(self) -> int:
        return hash(_key(self.schema))

    def __repr__(self) -> str:
        return f"OutputContract({_clip(json.dumps(self.schema, sort_keys=True), 80)})"


def check_tool_calls(calls: Sequence[ToolCall], tools: Sequence[Tool]) -> Violation | None:
    """Every call must name an offered tool and carry arguments its `input_schema` accepts."""
    offered = {tool.name: tool for tool in tools}
    for call in calls:
        tool = offered.get(call.name)
        if tool is None:
            return Violation(
                "unknown_tool", f"call {call.name!r}: no tool of that name was offered"
            )
        if call.arguments is None:
            return Violation("tool_arguments", f"call {call.name}: {_why_not_arguments(call)}")
        validator = _tool_validator(tool.input_schema)
        if validator is None:
            continue
        try:
            # Top-level dict(): jsonschema's "object" type check accepts dicts only.
            error = best_match(validator.iter_errors(dict(call.arguments)))
        except Unresolvable:
            # The caller's schema points at a $ref we cannot follow: not the model's fault.
            continue
        if error is not None:
            return Violation("tool_arguments", f"call {call.name}: {_describe(error)}")
    return None


def check_answer(
    response: Response, request: Request, contract: OutputContract | None
) -> Violation | None:
    """The first violation in an answer, or None when it is usable.

    Tool calls are always checked. The contract applies only to a final answer: an answer
    that calls tools is a step in a conversation, and its text is commentary, not the result.
    """
    calls = response.tool_calls
    if calls:
        return check_tool_calls(calls, request.tools)
    if contract is not None:
        return contract.check_text(response.text)
    return None


# --- helpers ---------------------------------------------------------------------------------


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    if "$schema" not in schema:
        return jsonschema.Draft202012Validator
    cls = validator_for(schema, default=None)  # None: a dialect jsonschema does not know
    if cls is None:
        # Falling back to 2020-12 silently would apply keywords the author did not mean.
        raise ValueError(f"unknown JSON Schema dialect $schema={schema['$schema']!r}")
    return cls


def _tool_validator(schema: Mapping[str, Any]) -> Validator | None:
    try:
        key = _key(schema)
    except (TypeError, ValueError):
        return None  # not JSON at all: nothing to judge against
    return _compiled(key)


# Tool schemas arrive with every request (the gateway passes callers' tools through), so the
# cache is bounded; a few hundred distinct schemas cover any real deployment.
@lru_cache(maxsize=512)
def _compiled(key: str) -> Validator | None:
    schema = json.loads(key)  # plain dicts and lists, whatever Mapping types came in
    try:
        cls = _validator_class(schema) if isinstance(schema, dict) else None
        if cls is None:
            return None
        cls.check_schema(schema)
    except (ValueError, SchemaError):
        # An invalid tool schema is the caller's mistake; the model cannot be judged by it.
        return None
    return cls(schema)


def _key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True)


def _why_not_arguments(call: ToolCall) -> str:
    # `arguments` is None both for broken JSON and for JSON that is not an object ("[1, 2]").
    try:
        bounded_json.loads(call.raw_arguments or "")
    except ValueError:
        return "arguments are not JSON"
    return "arguments are not a JSON object"


def _describe(error: ValidationError) -> str:
    """Where the answer breaks the schema, and which rule: from the schema, never the answer.
    jsonschema's own message quotes the failing value ("'CANARY' is not of type 'integer'"),
    and that value is what the model wrote."""
    rule = error.validator
    expected = error.validator_value
    if rule == "required" and isinstance(error.instance, Mapping):
        missing = next((k for k in expected if k not in error.instance), expected)
        return f"{error.json_path}: {_shown(missing)} is a required property"
    if rule == "additionalProperties" and isinstance(error.instance, Mapping):
        return f"{error.json_path}: holds properties the schema does not allow"
    phrase = _RULES.get(str(rule))
    if phrase is not None:
        return f"{error.json_path}: {phrase.format(_shown(expected))}"
    return f"{error.json_path}: breaks {rule!r} ({_shown(expected)})"


def _shown(value: Any) -> str:
    """A value from the schema, as jsonschema's messages show one."""
    return _clip(repr(value) if isinstance(value, str) else json.dumps(value), 80)


_RULES = {
    "type": "must be of type {}",
    "enum": "must be one of {}",
    "const": "must equal {}",
    "pattern": "must match the pattern {}",
    "minimum": "must be at least {}",
    "maximum": "must be at most {}",
    "exclusiveMinimum": "must be greater than {}",
    "exclusiveMaximum": "must be less than {}",
    "minLength": "must be at least {} characters long",
    "maxLength": "must be at most {} characters long",
    "minItems": "must have at least {} items",
    "maxItems": "must have at most {} items",
    "format": "must be of format {}",
}


def _clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
