"""Tool schemas as the real APIs judge them: a malformed one is the caller's 400 in the
dialect's own shape (issue 35: the fakes crashed on it, and a gateway counted each drop
against the provider's breaker); and no tool schema at all makes a fake fail otherwise."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from helpers.wire import AN_HEADERS, OA_HEADERS, an_body, oa_body
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from simulations.fakes import FakeTransport

MALFORMED = {"type": "object", "properties": "x"}


def _openai(schema: Any) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": schema}}
    return oa_body("find my order", tools=[tool])


def _anthropic(schema: Any) -> dict[str, Any]:
    return an_body("find my order", tools=[{"name": "lookup", "input_schema": schema}])


async def test_a_malformed_tool_schema_is_the_callers_400_in_each_dialect(backend):
    answer = await backend.client.post("/v1/chat/completions", headers=OA_HEADERS,
                                       json=_openai(MALFORMED))  # fmt: skip
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_function_parameters"
    assert error["param"] == "tools[0].function.parameters"
    assert "Invalid schema for function 'lookup'" in error["message"]

    answer = await backend.client.post("/v1/messages", headers=AN_HEADERS,
                                       json=_anthropic(MALFORMED))  # fmt: skip
    assert answer.status_code == 400
    body = answer.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "input_schema: JSON schema is invalid" in body["error"]["message"]


async def test_a_well_formed_tool_schema_is_answered_with_a_call(backend):
    schema = {"type": "object", "properties": {"order": {"type": "string"}},
              "required": ["order"]}  # fmt: skip
    answer = await backend.client.post(
        "/v1/chat/completions",
        headers=OA_HEADERS,
        json={**_openai(schema), "tool_choice": "required"},
    )
    assert answer.status_code == 200, answer.text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "properties",
                    "items",
                    "required",
                    "enum",
                    "anyOf",
                    "$defs",
                    "additionalProperties",
                    "x",
                ]
            )
            | st.text(max_size=4),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_JSON)
def test_no_tool_schema_makes_a_fake_fail_but_as_the_api_would(schema):
    """Any schema: answered (200), or refused as the caller's fault (400); never a crash, a
    dropped connection or a 5xx, whichever dialect, streamed or not."""

    async def ask() -> list[int]:
        transport = FakeTransport(clock=VirtualClock())
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            statuses = []
            for path, headers, body in (
                ("/v1/chat/completions", OA_HEADERS, _openai(schema)),
                ("/v1/messages", AN_HEADERS, _anthropic(schema)),
            ):
                for stream in (False, True):
                    answer = await client.post(path, headers=headers,
                                               json={**body, "stream": stream})  # fmt: skip
                    statuses.append(answer.status_code)
            return statuses

    assert set(asyncio.run(ask())) <= {200, 400}
