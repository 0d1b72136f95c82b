"""Hypothesis strategies for the dialect fuzz tests: garbage bytes, random JSON, and valid
request bodies with a few fields replaced by anything at all (the way to reach the deep
validation paths, which random JSON alone almost never gets past `model`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

# Values that have broken parsers before: wrong types, empties, extremes.
NASTY: list[Any] = [
    None, True, False, 0, -1, 1, 2**31, 10**40, 1.5, -0.0, 1e308, "", " ", "x", "data:",
    "data:image/png;base64,", "https://", [], [None], [[]], {}, {"type": None},
    {"type": "text"}, {"type": "image"}, {"type": "tool_use"}, {"type": "tool_result"},
    {"type": "function"}, {"type": "image_url"}, [{"type": "text", "text": 1}],
]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
replacements = st.sampled_from(NASTY) | json_values


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def _apply(body: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    if not path:
        return value
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return body


@st.composite
def mutated(draw: st.DrawFn, bodies: Sequence[dict[str, Any]]) -> Any:
    body: Any = copy.deepcopy(draw(st.sampled_from(list(bodies))))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        # The root itself is left to the random-object tests: here, reach inside.
        path = draw(st.sampled_from(list(paths(body))[1:] or [()]))
        action = draw(st.sampled_from(["replace", "replace", "delete"])) if path else "replace"
        body = _apply(body, path, action, copy.deepcopy(draw(replacements)))
    return body


def encoded(body: Any) -> bytes:
    return json.dumps(body).encode()  # NaN and Infinity included on purpose


def random_objects(keys: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={key: replacements for key in keys})
