"""An answer that breaks the route's output contract reaches the caller flagged, not silently."""

from __future__ import annotations

import httpx

from .conftest import GATEWAY_KEY, user

SCHEMA = {"type": "object", "required": ["intent"]}


def test_an_answer_breaking_the_contract_is_returned_with_the_quality_error_header(gateway):
    gw = gateway(
        {"classify": {"targets": ["gpt/gpt-4.1-mini"], "output_schema": SCHEMA}},
        keys=[GATEWAY_KEY],
    )
    reply = httpx.post(
        gw.openai_url + "/chat/completions",
        json={"model": "classify", "messages": user("refund please")},
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
    )
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "echo: refund please"
    assert reply.headers["x-switchover-quality-error"].startswith("invalid_json: ")
    (attempt,) = gw.attempts
    assert attempt.quality_error == reply.headers["x-switchover-quality-error"]


def test_a_valid_answer_carries_no_quality_header(gateway):
    gw = gateway({"classify": ["gpt/gpt-4.1-mini"]}, keys=[GATEWAY_KEY])
    reply = httpx.post(
        gw.openai_url + "/chat/completions",
        json={"model": "classify", "messages": user()},
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
    )
    assert reply.status_code == 200 and "x-switchover-quality-error" not in reply.headers
