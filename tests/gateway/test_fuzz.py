"""Bad input never makes the gateway fail: hypothesis throws hundreds of malformed requests at
each face (random JSON, wrong types inside valid-looking bodies, garbage bytes, huge bodies,
wrong content types and methods). Every answer is below 500, and every error is JSON in the
caller's dialect.

The providers are the in-process fake, so a request that happens to be valid is answered 200
(or the fake's own 400) and never counts as a gateway failure."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine.config import parse_config
from engine.gateway.app import GatewaySettings, create_app
from engine.runtime.switchover import Switchover
from simulations.fakes import FakeTransport

from .conftest import PROVIDER_KEYS, WEATHER_TOOL_ANTHROPIC, WEATHER_TOOL_OPENAI, config_for

EXAMPLES = 600
MAX_BODY = 64 * 1024
OPENAI_PATH, ANTHROPIC_PATH = "/v1/chat/completions", "/v1/messages"

OPENAI_BODY: dict[str, Any] = {
    "model": "chat",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ],
    "tools": [WEATHER_TOOL_OPENAI],
    "tool_choice": "auto",
    "max_tokens": 16,
    "temperature": 0.5,
    "stop": ["END"],
    "stream": False,
    "stream_options": {"include_usage": True},
}
ANTHROPIC_BODY: dict[str, Any] = {
    "model": "chat",
    "max_tokens": 16,
    "system": [{"type": "text", "text": "be brief"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"c": 1}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
        },
    ],
    "tools": [WEATHER_TOOL_ANTHROPIC],
    "tool_choice": {"type": "auto"},
    "temperature": 0.5,
    "stop_sequences": ["END"],
    "stream": False,
    "metadata": {"user_id": "u1"},
}
BODIES = {OPENAI_PATH: OPENAI_BODY, ANTHROPIC_PATH: ANTHROPIC_BODY}


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and index inside a JSON value."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        yield (*prefix, key)
        if isinstance(child, dict | list) and child:
            yield from paths(child, (*prefix, key))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and ±Infinity become JSON's forbidden constants
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """A valid body with one field replaced by a random value, or removed."""
    body = copy.deepcopy(base)
    path = draw(st.sampled_from(list(paths(base))))
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return json.dumps(body).encode()


JSON = {"content-type": "application/json"}
CONTENT_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                 "application/xml", "application/jsonx", "image/png", ";", "*/*"]  # fmt: skip


def bad_requests(path: str) -> st.SearchStrategy[tuple[str, dict[str, str], bytes]]:
    """(method, headers, body) of every kind of bad request to `path`."""
    base = BODIES[path]
    valid = json.dumps(base).encode()
    post = st.just("POST")
    return st.one_of(
        st.tuples(post, st.just(JSON), json_values.map(lambda v: json.dumps(v).encode())),
        st.tuples(post, st.just(JSON), mutated(base)),
        st.tuples(post, st.just(JSON), mutated(base)),  # twice the weight: the subtle ones
        st.tuples(post, st.just(JSON), st.binary(max_size=512)),
        st.tuples(
            post,
            st.just(JSON),
            st.integers(MAX_BODY, 4 * MAX_BODY).map(lambda n: b'{"model":"' + b"x" * n + b'"}'),
        ),
        st.tuples(
            post, st.sampled_from(CONTENT_TYPES).map(lambda t: {"content-type": t}), st.just(valid)
        ),
        st.tuples(st.sampled_from(["GET", "PUT", "DELETE", "PATCH"]), st.just(JSON), st.just(b"")),
    )


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    # FakeTransport answers by path, whatever the host.
    fake = SimpleNamespace(anthropic_url="http://fake", openai_url="http://fake/v1")
    config = config_for(fake, {"chat": ["claude/model-a", "gpt/model-b"]})  # type: ignore[arg-type]
    sw = Switchover(config, transport=FakeTransport(), environ=PROVIDER_KEYS)
    app = create_app(sw, GatewaySettings(max_body_bytes=MAX_BODY), owns=True)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def check(response: Any, path: str) -> None:
    assert response.status_code < 500, response.text
    if response.status_code < 400:
        return
    assert response.headers["content-type"] == "application/json"
    body = json.loads(response.content)
    if path == ANTHROPIC_PATH:
        assert body["type"] == "error" and body["request_id"] == response.headers["request-id"]
        error = body["error"]
    else:
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["type"], str) and isinstance(error["message"], str)
    assert error["message"]


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_bad_requests_are_4xx_in_the_callers_dialect(client: TestClient, path: str):
    statuses: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(bad_requests(path))
    def run(case: tuple[str, dict[str, str], bytes]) -> None:
        method, headers, body = case
        response = client.request(method, path, headers=headers, content=body)
        statuses.append(response.status_code)
        check(response, path)

    run()
    assert len(statuses) >= 500
    assert {400, 405, 413, 415} <= set(statuses), "every kind of bad input was tried"


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_random_credentials_are_refused_in_the_callers_dialect(path: str):
    config = parse_config({"providers": {"gpt": {"kind": "openai", "base_url": "http://fake/v1"}}})
    sw = Switchover(config, transport=FakeTransport())
    app = create_app(sw, GatewaySettings(keys=frozenset({"the-key"})), owns=True)
    printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)

    with TestClient(app, raise_server_exceptions=False) as client:

        @settings(max_examples=100, deadline=None, database=None)
        @given(st.sampled_from(["x-api-key", "authorization"]), printable)
        def run(name: str, value: str) -> None:
            response = client.post(path, headers={name: value}, content=b"{}")
            assert response.status_code == 401
            check(response, path)

        run()


# --- hostile values: what no provider can be sent ------------------------------------------

DEEP = "__DEEP__"  # replaced, once serialised, by nesting too deep to build as Python values
HOSTILE_STRINGS = ["\ud800", "\udfff", "a\ud83d", "\ud83d\ude00", "\x00", "\u202e", "\ufeff", " ",
                   "chat ", "x" * 5000]  # fmt: skip
HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, 10**400, -0.0, 2**63, 1e308]
HOSTILE_ARGUMENTS = ['{"a": NaN}', '{"a": Infinity}', "[" * 5000, '{"a": "\\ud800"}',
                     '{"a":' * 200 + "1" + "}" * 200, "not json", ""]  # fmt: skip
TOOL_ARGUMENTS = ("messages", 2, "tool_calls", 0, "function", "arguments")


@st.composite
def hostile(draw: st.DrawFn, path: str) -> bytes:
    """A valid body (streamed or not) with one to three values made hostile, written with
    lone surrogates as escapes or as raw bytes, and NaN as JSON's forbidden constant."""
    body = copy.deepcopy(BODIES[path])
    body["stream"] = draw(st.booleans())
    nesting = draw(st.integers(65, 3000))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(list(paths(body)) + [TOOL_ARGUMENTS] * 3))
        value = draw(
            st.sampled_from(HOSTILE_STRINGS)
            | st.sampled_from(HOSTILE_NUMBERS)
            | st.sampled_from(HOSTILE_ARGUMENTS)
            | st.just(DEEP)
        )
        parent = body
        try:
            for key in where[:-1]:
                parent = parent[key]
            parent[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier replacement removed the way there
    raw_surrogates = draw(st.booleans())
    text = json.dumps(body, ensure_ascii=not raw_surrogates)
    text = text.replace(f'"{DEEP}"', "[" * nesting + "]" * nesting)
    return text.encode("utf-8", "surrogatepass")


def unharmed(state: Any) -> bool:
    failures = sum(failed for _, failed, _ in state.recent)
    return state.status == "closed" and state.consecutive_failures == 0 and failures == 0


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_hostile_values_never_move_a_breaker(path: str):
    """No 5xx, every error in the caller's dialect, and with the providers answering 200, no
    breaker counts a failure and no attempt is a provider's fault or our own."""
    fake = SimpleNamespace(anthropic_url="http://fake", openai_url="http://fake/v1")
    config = config_for(fake, {"chat": ["claude/model-a", "gpt/model-b"]})  # type: ignore[arg-type]
    attempts: list[Any] = []
    sw = Switchover(
        config, transport=FakeTransport(), environ=PROVIDER_KEYS, hooks=[attempts.append]
    )
    app = create_app(sw, GatewaySettings(max_body_bytes=MAX_BODY), owns=True)
    statuses: list[int] = []
    with TestClient(app, raise_server_exceptions=False) as client:

        @settings(
            max_examples=300,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(hostile(path))
        def run(raw: bytes) -> None:
            response = client.post(path, headers=JSON, content=raw)
            statuses.append(response.status_code)
            check(response, path)

        run()
        breakers = client.portal.call(sw.breakers.snapshot_all)
    assert 200 in statuses and 400 in statuses, "both valid and refused bodies were tried"
    assert all(unharmed(state) for state in breakers.values()), breakers
    blamed = [a for a in attempts if a.fault_kind not in (None, "request")]
    assert blamed == [], "a provider (or the gateway itself) was blamed for the caller's input"
