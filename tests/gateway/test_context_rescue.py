"""A context overflow over real HTTP (catalogue row 2): a later target with a larger window
answers it; with none the caller gets the provider's 400 at once, in its own dialect, and the
targets no larger are never called. Windows from genai-prices (gpt-4o: 128,000 tokens;
gpt-4o-mini: 128,000; gpt-4.1-mini: 1,000,000) or from the route's `context_window`."""

from __future__ import annotations

import time

import httpx
import pytest

from simulations.fakes import FakeProviders

from .conftest import GatewayFactory, paid_calls, user

OPENAI_PATH, ANTHROPIC_PATH = "/v1/chat/completions", "/v1/messages"
# The same 150,000-token prompt, as a 128,000-token model and a 1,000,000-token one take it.
OVERFLOW = "context_overflow:window=128000,tokens=150000"
FITS = "context_overflow:window=1000000,tokens=150000"


def ask(url: str, path: str, **extra: object) -> httpx.Response:
    body = {"model": "long", "max_tokens": 64, "messages": user("the whole contract"), **extra}
    return httpx.post(url + path, json=body, timeout=30)


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
@pytest.mark.parametrize("stream", [False, True])
def test_a_larger_backup_answers_what_overflowed_the_primary(
    gateway: GatewayFactory, fake: FakeProviders, path: str, stream: bool
):
    gw = gateway({"long": ["gpt/gpt-4o", "gpt/gpt-4o-mini", "gpt/gpt-4.1-mini"]})
    fake.script("gpt-4o", [OVERFLOW])
    fake.script("gpt-4.1-mini", [FITS])
    response = ask(gw.url, path, stream=stream)
    assert response.status_code == 200, response.text
    assert response.headers["x-switchover-model"] == "gpt-4.1-mini"
    assert paid_calls(fake, "gpt-4o-mini") == 0  # 128,000 tokens: no larger than gpt-4o
    assert [(a.model, a.decision) for a in gw.attempts] == [
        ("gpt-4o", "fall_back_larger_context"),
        ("gpt-4.1-mini", "served"),
    ]


@pytest.mark.parametrize(
    ("path", "error"),
    [
        (OPENAI_PATH, ("invalid_request_error", "context_length_exceeded")),
        (ANTHROPIC_PATH, ("invalid_request_error", None)),
    ],
)
def test_without_a_larger_window_the_overflow_fails_fast_with_a_400(
    gateway: GatewayFactory, fake: FakeProviders, path: str, error: tuple[str, str | None]
):
    """The backups' windows are equal (genai-prices) and smaller (the configuration)."""
    small = {"target": "gpt/gpt-4.1-mini", "context_window": 100_000}
    gw = gateway({"long": ["gpt/gpt-4o", "gpt/gpt-4o-mini", small]})
    fake.script("gpt-4o", [OVERFLOW])
    started = time.perf_counter()
    response = ask(gw.url, path)
    assert time.perf_counter() - started < 2.0  # no retry, no backoff, no backup
    assert response.status_code == 400
    body = response.json()["error"]
    assert (body["type"], body.get("code")) == error
    assert paid_calls(fake, "gpt-4o-mini") == paid_calls(fake, "gpt-4.1-mini") == 0
    assert [(a.model, a.decision) for a in gw.attempts] == [("gpt-4o", "fail_fast")]


def test_a_window_from_the_configuration_lets_a_model_genai_prices_does_not_know_answer(
    gateway: GatewayFactory, fake: FakeProviders
):
    house = {"target": "claude/house-model", "context_window": 500_000}
    gw = gateway({"long": ["gpt/gpt-4o", house]})
    fake.script("gpt-4o", [OVERFLOW])
    response = ask(gw.url, ANTHROPIC_PATH)
    assert response.status_code == 200, response.text
    assert response.headers["x-switchover-model"] == "house-model"
    assert gw.attempts[0].decision == "fall_back_larger_context"
