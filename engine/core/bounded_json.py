"""Reading JSON that someone else wrote, within bounds: callers' bodies and tool arguments,
admin bodies, models' answers.

`json.loads` alone accepts what nothing downstream can handle: `NaN` and `Infinity` (no
provider takes them back, and the HTTP client refuses to encode them), `1e999` (a float that
overflowed to infinity), lone UTF-16 surrogates (`"\\ud800"`, or the raw bytes ED A0 80, which
it decodes with `surrogatepass`: no UTF-8 encoder can write them again), and nesting deep
enough to exhaust the interpreter's stack (a RecursionError, here or in whatever walks the
value next). `loads` turns each into `JsonRejected`, a ValueError whose `reason` says which,
so a caller can answer 400 naming the field instead of failing later, somewhere else, as 500.

Pure and cheap on the common case: a body with fewer brackets than the depth limit cannot be
too deep, and one without a surrogate escape cannot hold a lone surrogate, so most requests
are never walked. Never does I/O; imports nothing of the engine.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

__all__ = ["MAX_DEPTH", "JsonRejected", "check_value", "loads"]

# Deeper than any real request: a chat body is ~6 levels, tool schemas a dozen or two.
MAX_DEPTH = 64
Reason = Literal["invalid", "too_deep", "non_finite", "unencodable"]

# A \uD800-\uDFFF escape; a well-formed pair matches too, and is then checked properly.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


class JsonRejected(ValueError):
    """JSON that is refused; `reason` is what a caller must change."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _no_constants(name: str) -> Any:
    raise JsonRejected("non_finite", f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected("non_finite", f"the number {text[:24]} is out of range")
    return value


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `data` (bytes must be UTF-8), or JsonRejected."""
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:  # raw surrogate bytes (ED A0 80) included
            raise JsonRejected("unencodable", f"not valid UTF-8 at byte {exc.start}") from None
        escapes = _SURROGATE_ESCAPE_BYTES.search(data) is not None
    else:
        text = data
        escapes = _SURROGATE_ESCAPE.search(text) is not None
    try:
        value = json.loads(text, parse_constant=_no_constants, parse_float=_finite)
    except JsonRejected:
        raise
    except RecursionError:
        raise JsonRejected("too_deep", f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, over-long integers
        raise JsonRejected("invalid", f"not valid JSON: {exc}") from None
    brackets = text.count("[") + text.count("{")
    if escapes or brackets > max_depth:
        check_value(value, max_depth=max_depth, strings=escapes)
    return value


def check_value(value: Any, *, max_depth: int = MAX_DEPTH, strings: bool = True) -> None:
    """JsonRejected when `value` (parsed JSON, or anything of dicts, lists, strings and numbers)
    nests deeper than `max_depth`, holds a non-finite float, or (with `strings`) a string or key
    that cannot be written as UTF-8. Iterative: no depth can exhaust the stack here."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list | tuple):
            items = enumerate(node)
        else:
            _check_scalar(node, strings)
            continue
        if depth >= max_depth:
            raise JsonRejected("too_deep", f"nested deeper than {max_depth} levels")
        for key, item in items:
            if strings and isinstance(key, str):
                _check_scalar(key, strings)
            if isinstance(item, dict | list | tuple):
                stack.append((item, depth + 1))
            else:
                _check_scalar(item, strings)


def _check_scalar(value: Any, strings: bool) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise JsonRejected("non_finite", f"the number {value} is not finite")
    if strings and isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise JsonRejected(
                "unencodable", "a string holds a lone UTF-16 surrogate, which is not text"
            ) from None
