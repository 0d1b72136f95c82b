"""Catalogue row 14: the connection never opens (refused, DNS, TLS, connect timeout). Nothing
reached the provider, so the primary is retried once and the backup serves."""

from __future__ import annotations

import socket

import pytest

from engine.core.clock import VirtualClock
from engine.fallback.chain import Chain
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.openai import OpenAIProvider
from simulations.fakes import FakeTransport

from .conftest import FAST_POLICY, Stack, ask


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connecting is refused


@pytest.mark.parametrize(
    "base_url",
    [
        pytest.param(f"http://127.0.0.1:{_closed_port()}", id="refused"),
        pytest.param("http://switchover-no-such-host.invalid", id="dns"),
        pytest.param("tls", id="tls-to-a-plain-http-port"),
    ],
)
@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_connection_that_never_opens_is_retried_then_falls_back(
    stack: Stack, base_url: str, dialect: str
):
    if base_url == "tls":
        base_url = stack.fake.base_url.replace("http://", "https://")
    factory = AnthropicProvider if dialect == "anthropic" else OpenAIProvider
    broken = factory("broken", base_url=base_url, api_key="k")
    backup = stack.providers["openai" if dialect == "anthropic" else "anthropic"]
    chain = Chain(
        "e2e", [Target(broken, "primary"), Target(backup, "backup")], policy=FAST_POLICY,
        hooks=[stack.attempts.append],
    )  # fmt: skip
    try:
        response = await chain.complete(ask())
    finally:
        await broken.aclose()
    assert response.model == "backup"
    assert [(a.error_class, a.decision) for a in stack.attempts] == [
        ("connect", "retry"),
        ("connect", "fall_back"),
        (None, "served"),
    ]
    assert stack.paid_calls("backup") == 1


def test_a_connect_timeout_is_retried_then_falls_back_within_the_budget():
    """The connect timeout cannot be provoked on loopback; the in-process transport raises
    httpx's ConnectTimeout after the client's connect timeout, on virtual time."""
    clock = VirtualClock()
    transport = FakeTransport(clock=clock)
    transport.script("primary", ["connect_timeout", "connect_timeout"])
    attempts = []

    async def main():
        primary = AnthropicProvider(
            "claude", base_url="http://fake", api_key="k", transport=transport, clock=clock,
            connect_timeout_s=2.0,
        )  # fmt: skip
        backup = OpenAIProvider("gpt", base_url="http://fake/v1", api_key="k",
                                transport=transport, clock=clock)  # fmt: skip
        chain = Chain(
            "e2e", [Target(primary, "primary"), Target(backup, "backup")],
            policy=FAST_POLICY.replace(attempt_timeout_s=30), clock=clock,
            hooks=[attempts.append],
        )  # fmt: skip
        start = clock.now()
        response = await chain.complete(ask())
        return response, clock.now() - start

    response, elapsed = clock.run(main())
    assert response.model == "backup"
    assert [a.error_class for a in attempts] == ["connect", "connect", None]
    assert 4.0 <= elapsed < FAST_POLICY.budget_s  # two 2 s connect timeouts, then the backup


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_reset_after_the_request_was_sent_is_recorded_as_maybe_billed(
    stack: Stack, dialect: str
):
    """Row 15 over a real socket: not a connect failure (nothing sent, nothing billed) but an
    ambiguous reset, whatever the transport underneath reports."""
    chain = stack.chain((dialect, "primary#reset"), ("openai", "backup"))
    await chain.complete(ask())
    first = stack.attempts[0]
    assert (first.error_class, first.fault_kind) == ("reset", "ambiguous")
    assert first.tokens_estimated and first.input_tokens > 0, "the prompt may have been billed"
