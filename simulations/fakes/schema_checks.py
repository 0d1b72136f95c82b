"""Whether a tool's JSON Schema is one the real APIs accept: both refuse a request whose tool
schema does not read as JSON Schema (OpenAI: "Invalid schema for function 'x': … is not of type
'object'", code `invalid_function_parameters`; Anthropic: "…input_schema: JSON schema is
invalid"). The fakes check it before anything reads the schema, so that a malformed one is the
caller's 400, as it is from the provider, and never a crash of the fake (which a gateway would
count against the provider's breaker)."""

from __future__ import annotations

from typing import Any

_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_DEPTH = 64  # deeper than any real tool: refused rather than recursed into


def schema_problem(schema: Any, where: tuple[str, ...] = (), depth: int = 0) -> str | None:
    """What is wrong with `schema` ("In context=(…), … is not of type 'object'"), or None."""
    context = f"In context={where!r}, " if where else ""
    if isinstance(schema, bool):
        return None  # true and false are schemas
    if not isinstance(schema, dict):
        return f"{context}{_short(schema)} is not of type 'object', 'boolean'"
    if depth > _DEPTH:
        return f"{context}the schema is nested more than {_DEPTH} levels deep"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kind is not None and not all(isinstance(k, str) and k in _TYPES for k in kinds):
        return f"{context}{_short(kind)} is not valid under any of the given schemas"
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        return f"{context}{_short(required)} is not of type 'array' of 'string'"
    for name, shape in (*((n, dict) for n in _SUBSCHEMA_MAPS),
                        *((n, list) for n in _SUBSCHEMA_LISTS)):  # fmt: skip
        found = schema.get(name)
        if found is None:
            continue
        if not isinstance(found, shape):
            kind = "object" if shape is dict else "array"
            return f"In context={(*where, name)!r}, {_short(found)} is not of type '{kind}'"
        named = found.items() if isinstance(found, dict) else enumerate(found)
        for key, sub in named:
            problem = schema_problem(sub, (*where, name, str(key)), depth + 1)
            if problem:
                return problem
    for name in ("items", "additionalProperties", "not"):
        if name in schema:
            problem = schema_problem(schema[name], (*where, name), depth + 1)
            if problem:
                return problem
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        return f"In context={(*where, 'enum')!r}, {_short(enum)} is not of type 'array'"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
