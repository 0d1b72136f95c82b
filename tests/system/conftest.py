"""End-to-end fixtures: the real chain and provider adapters against the fake provider server
over loopback HTTP, on real time (the fault parameters keep every wait short)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest

from engine.core.attempt import Attempt
from engine.core.messages import Message, Request, Response, StreamEvent
from engine.fallback.chain import Chain, ChainEvent
from engine.fallback.policy import Policy
from engine.fallback.run import AttemptHook
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import Provider
from engine.providers.openai import OpenAIProvider
from simulations.fakes import FakeProviders

# Short limits so that hanging faults cost half a second, not the defaults' tens of seconds.
FAST_POLICY = Policy(
    budget_s=10,
    attempt_timeout_s=0.5,
    first_token_timeout_s=0.5,
    idle_timeout_s=1.0,
    backoff_base_s=0.01,
    backoff_max_s=0.02,
    overload_backoff_s=0.01,
    min_attempt_budget_s=0.1,
)


@dataclass
class Stack:
    fake: FakeProviders
    providers: dict[str, Provider]
    attempts: list[Attempt] = field(default_factory=list)
    events: list[ChainEvent] = field(default_factory=list)

    def chain(
        self,
        *targets: tuple[str, str],
        policy: Policy = FAST_POLICY,
        route: str = "e2e",
        hooks: Sequence[AttemptHook] = (),
    ) -> Chain:
        """`targets` are (dialect, model) pairs; the model may carry a `#fault` suffix."""
        return Chain(
            route,
            [Target(self.providers[dialect], model) for dialect, model in targets],
            policy=policy,
            hooks=[self.attempts.append, *hooks],
            event_hooks=[self.events.append],
        )

    def paid_calls(self, model: str) -> int:
        return len(self.fake.calls(model=model))


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with FakeProviders(port=0) as fake:
        providers: dict[str, Provider] = {
            "anthropic": AnthropicProvider(
                "claude", base_url=fake.anthropic_url, api_key="test-key-anthropic"
            ),
            "openai": OpenAIProvider("gpt", base_url=fake.openai_url, api_key="test-key-openai"),
        }
        try:
            yield Stack(fake, providers)
        finally:
            for provider in providers.values():
                await provider.aclose()


def ask(text: str = "Where is my order?", **fields: object) -> Request:
    return Request(messages=(Message.user(text),), max_tokens=64, **fields)  # type: ignore[arg-type]


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


def served_by(response: Response) -> str:
    return f"{response.provider}/{response.model}"
