"""A poison request hurts no one (issue 35): a payload the providers refuse is the caller's
fault, however often it is resent, and the breakers stay closed for everyone else."""

from __future__ import annotations

import httpx
import openai

from simulations.fakes import FakeProviders

from .conftest import GatewayFactory, paid_calls, user

MALFORMED_TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": "x"}},
}


def test_resent_requests_with_a_malformed_tool_schema_leave_every_breaker_closed(
    gateway: GatewayFactory, fake: FakeProviders
):
    gw = gateway({"support": ["gpt/primary", "claude/second", "gpt/third"]})
    for i in range(5):
        for retry in range(3):  # sent, then resent twice, as the official SDKs resend
            answer = httpx.post(
                gw.url + "/v1/chat/completions",
                json={"model": "support", "messages": user(f"order {i}"),
                      "tools": [MALFORMED_TOOL]},
                headers={"x-stainless-retry-count": str(retry)},
            )  # fmt: skip
            assert answer.status_code == 400, answer.text
            assert "Invalid schema for function 'lookup'" in answer.json()["error"]["message"]
    status = httpx.get(gw.url + "/v1/status").json()
    breakers = status["breakers"]
    assert set(breakers) == {"gpt/primary", "claude/second", "gpt/third"}
    assert all(b["status"] == "closed" and not b["consecutive_failures"]
               for b in breakers.values()), breakers  # fmt: skip
    assert paid_calls(fake, "second") == paid_calls(fake, "third") == 0, "nothing fell back"

    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0)
    for i in range(20):
        reply = client.chat.completions.create(model="support", messages=user(f"hello {i}"))
        assert reply.choices[0].message.content
    assert paid_calls(fake, "second") == paid_calls(fake, "third") == 0


def test_payloads_every_provider_fails_resent_by_the_sdk_open_no_breaker(
    gateway: GatewayFactory, fake: FakeProviders
):
    """Real providers fail some payloads with a 500 whoever sends them: resent as the SDK
    resends a 5xx, they charge the primary once each, and no backup at all."""
    gw = gateway({"support": ["gpt/primary", "claude/second", "gpt/third"]})
    fake.poison("<<poison>>", "500")
    for i in range(4):
        for retry in range(3):
            answer = httpx.post(
                gw.url + "/v1/chat/completions",
                json={"model": "support", "messages": user(f"order {i} <<poison>>")},
                headers={"x-stainless-retry-count": str(retry)},
            )
            assert answer.status_code >= 500, answer.text
            assert "the request itself may be at fault" in answer.json()["error"]["message"]
    breakers = httpx.get(gw.url + "/v1/status").json()["breakers"]
    assert {name: b["status"] for name, b in breakers.items()} == dict.fromkeys(
        ("gpt/primary", "claude/second", "gpt/third"), "closed"
    )
    assert breakers["gpt/primary"]["consecutive_failures"] == 4, "one per payload"
    assert breakers["claude/second"]["consecutive_failures"] == 0
    assert breakers["gpt/third"]["consecutive_failures"] == 0

    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="unused", max_retries=0)
    for i in range(20):
        reply = client.chat.completions.create(model="support", messages=user(f"hello {i}"))
        assert reply.choices[0].message.content
    assert paid_calls(fake, "second") == paid_calls(fake, "third") == 4 * 3
