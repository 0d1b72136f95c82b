"""The things measured: a bare httpx client (the baseline, `bench.wire`) and the same call through
the chain.

Both send the same JSON body to the same fake endpoint through an `httpx.AsyncClient` with
default pool settings, and both read the whole answer, so what differs is the engine's own
work: encoding and decoding the neutral types, the breaker, the deadline, the attempt record.
The body the chain sends is checked against the baseline's in `cases`, through the fake's call
log, rather than trusted.

A contender has `complete()` and `stream()`; another comparison (the chain on an httpx-aiohttp
transport) is a `transport=` argument to the ones here. LiteLLM, which cannot be imported
beside Switchover, has its own side in `bench.litellm_side`.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter
from typing import Any, Protocol

import httpx

from bench import wire
from bench.wire import API_KEY, MODELS, OPENAI, PROMPT, Wire
from engine.core.clock import SystemClock
from engine.core.messages import Message, Request, Response, StreamError, TextDelta
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import ANTHROPIC_VERSION, AnthropicProvider
from engine.providers.http import HttpProvider
from engine.providers.openai import OpenAIProvider

__all__ = ["API_KEY", "MODELS", "REQUEST", "WIRES", "Direct", "ThroughChain", "provider"]

REQUEST = Request(messages=(Message.user(PROMPT),), max_tokens=wire.MAX_TOKENS)


class Contender(Protocol):
    name: str

    async def complete(self) -> None:
        """One non-streaming call, its answer read and parsed."""

    async def stream(self) -> float:
        """One streaming call read to its end; returns `perf_counter()` at the first text."""

    async def aclose(self) -> None: ...


# --- the baseline ------------------------------------------------------------------------------

WIRES = {
    "openai": OPENAI,
    "anthropic": Wire(
        "anthropic",
        "/v1/messages",
        {"x-api-key": API_KEY, "anthropic-version": ANTHROPIC_VERSION},
    ),
}


class Direct(wire.Direct):
    """The baseline for one dialect by name."""

    def __init__(
        self,
        dialect: str,
        root_url: str,
        *,
        model: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(WIRES[dialect], root_url, model=model, transport=transport)


# --- the subject ---------------------------------------------------------------------------------


class SleepTally(SystemClock):
    """Real time that also adds up the chain's sleeps, so backoff is reported on its own."""

    def __init__(self) -> None:
        self.slept_s = 0.0
        self.sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.slept_s += max(0.0, seconds)
        self.sleeps += 1
        await super().sleep(seconds)


def provider(
    dialect: str, root_url: str, *, transport: httpx.AsyncBaseTransport | None = None
) -> HttpProvider:
    if dialect == "openai":
        return OpenAIProvider(
            "openai", base_url=root_url + "/v1", api_key=API_KEY, transport=transport
        )
    return AnthropicProvider("anthropic", base_url=root_url, api_key=API_KEY, transport=transport)


class ThroughChain:
    """The same call through `Chain` and the provider adapters, one pooled client per provider."""

    def __init__(
        self,
        name: str,
        root_url: str,
        targets: Sequence[tuple[str, str]],  # (dialect, model), in fallback order
        *,
        policy: Policy | None = None,
        clock: SleepTally | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.clock = clock or SleepTally()
        providers = {d: provider(d, root_url, transport=transport) for d, _ in targets}
        self._providers = list(providers.values())
        self.chain = Chain(
            name,
            [Target(providers[d], model) for d, model in targets],
            policy=policy,
            clock=self.clock,
        )

    @classmethod
    def single(cls, dialect: str, root_url: str, **kwargs: Any) -> ThroughChain:
        return cls(f"switchover {dialect}", root_url, [(dialect, MODELS[dialect])], **kwargs)

    async def answer(self) -> Response:
        return await self.chain.complete(REQUEST)

    async def complete(self) -> None:
        await self.chain.complete(REQUEST)

    async def stream(self) -> float:
        first = 0.0
        async for event in self.chain.stream(REQUEST):
            if isinstance(event, StreamError):  # a benchmark of failures would be meaningless
                raise RuntimeError(f"{self.name}: {event.error_class}: {event.message}")
            if not first and isinstance(event, TextDelta) and event.text:
                first = perf_counter()
        if not first:
            raise RuntimeError(f"{self.name}: a stream without text")
        return first

    async def aclose(self) -> None:
        for p in self._providers:
            await p.aclose()
