"""The things measured: a bare httpx client (the baseline) and the same call through the chain.

Both send the same JSON body to the same fake endpoint through an `httpx.AsyncClient` with
default pool settings, and both read the whole answer, so what differs is the engine's own
work: encoding and decoding the neutral types, the breaker, the deadline, the attempt record.
The baseline does what a minimal hand-written client would: `response.json()` for an answer,
`json.loads` of every SSE data line for a stream. The body the chain sends is checked against the
baseline's in `cases`, through the fake's call log, rather than trusted.

A contender has `complete()` and `stream()`; the later comparisons (LiteLLM in its own venv, the
chain on an httpx-aiohttp transport) are one more class with those two methods, or a
`transport=` argument to the ones here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Protocol

import httpx

from engine.chain import Chain, Target
from engine.clock import SystemClock
from engine.policy import Policy
from engine.providers.anthropic import ANTHROPIC_VERSION, AnthropicProvider
from engine.providers.base import HttpProvider
from engine.providers.openai import OpenAIProvider
from engine.types import Message, Request, Response, StreamError, TextDelta

API_KEY = "bench-key"
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5"}
MAX_TOKENS = 256
# The fake echoes the prompt in ~12-character deltas, so this length makes a stream of about
# twenty text events: enough for per-event costs to show in the whole-stream time.
PROMPT = (
    "Summarise the delivery status of order 4471 for the customer in two short sentences, "
    "mention the carrier and the expected date, and apologise for the delay without promising "
    "a refund or a discount of any kind."
)
REQUEST = Request(messages=(Message.user(PROMPT),), max_tokens=MAX_TOKENS)


class Contender(Protocol):
    name: str

    async def complete(self) -> None:
        """One non-streaming call, its answer read and parsed."""

    async def stream(self) -> float:
        """One streaming call read to its end; returns `perf_counter()` at the first text."""

    async def aclose(self) -> None: ...


# --- the baseline ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """One dialect as a hand-written client speaks it."""

    dialect: str
    path: str
    headers: dict[str, str]

    def body(self, model: str, *, stream: bool) -> dict[str, Any]:
        if self.dialect == "openai":
            body: dict[str, Any] = {
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": MAX_TOKENS,
            }
            if stream:  # usage in the stream, as the adapter asks for it
                body |= {"stream": True, "stream_options": {"include_usage": True}}
            return body
        body = {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
        }
        return body | {"stream": True} if stream else body


WIRES = {
    "openai": Wire("openai", "/v1/chat/completions", {"authorization": f"Bearer {API_KEY}"}),
    "anthropic": Wire(
        "anthropic",
        "/v1/messages",
        {"x-api-key": API_KEY, "anthropic-version": ANTHROPIC_VERSION},
    ),
}


def _text_of(dialect: str, event: Any) -> str:
    if dialect == "openai":
        choices = event.get("choices") or [{}]
        return choices[0].get("delta", {}).get("content") or ""
    if event.get("type") == "content_block_delta":
        return event["delta"].get("text") or ""
    return ""


class Direct:
    """`httpx.AsyncClient.post` of the dialect's JSON: what the chain is compared with."""

    def __init__(
        self,
        dialect: str,
        root_url: str,
        *,
        model: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = f"httpx {dialect}"
        self.dialect = dialect
        wire = WIRES[dialect]
        self._url = root_url + wire.path
        model = model or MODELS[dialect]
        self._body = wire.body(model, stream=False)
        self._stream_body = wire.body(model, stream=True)
        self._client = httpx.AsyncClient(transport=transport, headers=wire.headers)

    async def complete(self) -> None:
        response = await self._client.post(self._url, json=self._body)
        response.raise_for_status()
        response.json()

    async def stream(self) -> float:
        first = 0.0
        async with self._client.stream("POST", self._url, json=self._stream_body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                text = _text_of(self.dialect, json.loads(line[5:]))
                if text and not first:
                    first = perf_counter()
        if not first:
            raise RuntimeError(f"{self.name}: a stream without text")
        return first

    async def aclose(self) -> None:
        await self._client.aclose()


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
