"""A route of the real chain over the in-process fake providers, on virtual time: the rig the
chain's tests (tests/fallback/) and the transport's records tests share."""

from __future__ import annotations

import random
from typing import Any, TypeVar

import pytest

from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.errors import AllProvidersUnavailable, ChainError
from engine.core.messages import Message, Request, Response
from engine.fallback.chain import Chain, ChainEvent
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.openai import OpenAIProvider
from engine.state.breaker import BreakerState
from simulations.fakes import Call, FakeTransport

PRIMARY, BACKUP, THIRD = "claude/claude-sonnet-4-5", "gpt/gpt-4o", "mistral/mistral-large"
KEYS = {"claude": "sk-ant-api03-K3Y", "gpt": "sk-proj-K3Y", "mistral": "mis-K3Y"}
PROMPT = "my card number is 4111 1111 1111 1111"
ASK = Request(messages=(Message.user(PROMPT),), feature="checkout-help")
E = TypeVar("E", bound=ChainError)


class Rig:
    """A route of one to three targets (an Anthropic primary, OpenAI-dialect backups) served by
    one fake transport; the chain, the providers and the fake share one virtual clock."""

    def __init__(self, targets: int = 2, **policy: Any) -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock)
        self.attempts: list[Attempt] = []
        self.events: list[ChainEvent] = []
        providers = [
            AnthropicProvider("claude", base_url="http://anthropic.fake", api_key=KEYS["claude"],
                              transport=self.fake, clock=self.clock),
            OpenAIProvider("gpt", base_url="http://openai.fake/v1", api_key=KEYS["gpt"],
                           transport=self.fake, clock=self.clock),
            OpenAIProvider("mistral", base_url="http://mistral.fake/v1", api_key=KEYS["mistral"],
                           transport=self.fake, clock=self.clock),
        ]  # fmt: skip
        names = (PRIMARY, BACKUP, THIRD)
        self.chain = Chain(
            "support",
            [Target(p, model(n)) for p, n in zip(providers, names, strict=True)][:targets],
            policy=Policy(**policy),
            clock=self.clock,
            hooks=[self.attempts.append],
            event_hooks=[self.events.append],
            rng=random.Random(7),
        )
        self.started = self.clock.now()

    def script(self, target: str, *faults: str) -> None:
        self.fake.script(model(target), faults)

    def complete(self, request: Request = ASK) -> Response:
        self.started = self.clock.now()
        return self.clock.run(self.chain.complete(request))

    def stream(self, request: Request = ASK) -> list[Any]:
        self.started = self.clock.now()

        async def read() -> list[Any]:
            return [event async for event in self.chain.stream(request)]

        return self.clock.run(read())

    def fails(self, error: type[E] = AllProvidersUnavailable) -> E:  # type: ignore[assignment]
        with pytest.raises(error) as caught:
            self.complete()
        return caught.value

    def elapsed(self) -> float:
        return self.clock.now() - self.started

    def calls(self, target: str | None = None) -> list[Call]:
        return self.fake.calls(model(target) if target else None)

    def breaker(self, target: str) -> BreakerState:
        return self.clock.run(self.chain.breakers.snapshot(target))


def model(target: str) -> str:
    return target.partition("/")[2]
