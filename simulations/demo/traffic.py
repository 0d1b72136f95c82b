"""Synthetic traffic for the demo: requests shaped like three real features, and the callers
that send them.

- support: a long, cached system prompt (prompt caching on the primary) and a short
  question, streamed, from an agent on Anthropic's SDK;
- classify: one short transaction description, a one-word label, from a job on OpenAI's SDK;
- summarize: a long document, a paragraph back, from callers of both SDKs, a third streamed.

`Traffic.next` gives the neutral request (the demo history sends it through the library);
`Traffic.call` gives the same request as its caller sends it to the gateway, in that caller's
dialect (the live demo). Sizes vary around realistic means from a seeded RNG, so two runs with
the same seed send the same traffic. Only the shape matters: the fake providers answer
whatever is asked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from engine.core.messages import Message, Request
from engine.providers import anthropic_codec, openai_codec

Dialect = Literal["anthropic", "openai"]
FEATURE_HEADER = "x-switchover-feature"  # the gateway's tag for a caller's feature
PATHS: dict[Dialect, str] = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}

_SUPPORT_POLICY = (
    "You are the support agent of an online shop. Be brief and friendly. Orders ship within "
    "two working days; returns are free within 30 days; refunds take 5 to 7 days to appear. "
    "Never promise a delivery date the carrier has not given; offer a replacement before a "
    "refund when an item arrives damaged, and ask for a photo of the parcel first. "
)
# Repeats of the policy to the length of a real agent's prompt (its wording matters to no
# fake, only its length and sameness): past 4,096 tokens, the least Haiku 4.5 caches.
_SUPPORT_REPEATS = 60
_QUESTIONS = (
    "Where is my order #{n}?",
    "Can I return the shoes from order #{n}?",
    "My refund for #{n} has not arrived yet.",
    "Do you ship to Portugal?",
    "The parcel for order #{n} arrived damaged.",
)
_MERCHANTS = ("UBER *TRIP", "AMZN Mktp", "PADARIA SAO JOAO", "SPOTIFY", "POSTO IPIRANGA", "IFOOD")
_WORDS = [
    "revenue",
    "quarter",
    "customers",
    "churn",
    "pipeline",
    "shipment",
    "warehouse",
    "incident",
    "latency",
    "budget",
    "forecast",
    "hiring",
    "retention",
    "margin",
    "supplier",
    "contract",
    "renewal",
    "onboarding",
]


@dataclass(frozen=True)
class Shape:
    route: str
    weight: float
    anthropic_share: float  # of its callers, those on Anthropic's SDK (the rest on OpenAI's)
    stream_share: float  # of its requests, those streamed


# Support is all on Anthropic's SDK: the OpenAI dialect cannot mark a system prompt cacheable,
# and the support primary's prompt cache is what its fallbacks cost.
SHAPES = (
    Shape("support", 0.5, anthropic_share=1.0, stream_share=1.0),
    Shape("classify", 0.35, anthropic_share=0.0, stream_share=0.0),
    Shape("summarize", 0.15, anthropic_share=0.5, stream_share=1 / 3),
)
_SHAPES = {shape.route: shape for shape in SHAPES}


@dataclass(frozen=True, slots=True)
class Call:
    """One request as its caller sends it to the gateway: the body of its SDK's dialect."""

    route: str
    dialect: Dialect
    body: dict[str, Any]
    feature: str | None

    @property
    def path(self) -> str:
        return PATHS[self.dialect]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def headers(self) -> dict[str, str]:
        return {FEATURE_HEADER: self.feature} if self.feature else {}


def in_dialect(route: str, request: Request, dialect: Dialect, *, stream: bool) -> Call:
    """`request` to the route `route` in a caller's dialect: the wire format the provider
    codecs write is the one the gateway's faces read, as the official SDKs send it."""
    if dialect == "anthropic":
        body = anthropic_codec.encode_request(
            request, route, default_max_tokens=1024, stream=stream
        )
    else:
        body = openai_codec.encode_request(request, route, stream=stream)
    return Call(route, dialect, body, request.feature)


class Traffic:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        # ~5,000 tokens of policy text, identical on every support request: what the
        # primary's prompt cache serves, and what a fallback loses. Every target of the route
        # caches it, so a backup that takes the traffic writes its own cache, cold.
        self.support_system = _SUPPORT_POLICY * _SUPPORT_REPEATS

    def next(self) -> tuple[str, Request]:
        shape = self.rng.choices(SHAPES, weights=[s.weight for s in SHAPES])[0]
        return shape.route, getattr(self, shape.route)()

    def call(self) -> Call:
        """The next request as its caller sends it (the caller's dialect drawn after the
        request, so `next` alone draws what it always drew)."""
        route, request = self.next()
        shape = _SHAPES[route]
        dialect: Dialect = "anthropic" if self.rng.random() < shape.anthropic_share else "openai"
        return in_dialect(route, request, dialect, stream=self.rng.random() < shape.stream_share)

    def support(self) -> Request:
        question = self.rng.choice(_QUESTIONS).format(n=self.rng.randint(1000, 9999))
        return Request(
            messages=(Message.user(question),),
            system=self.support_system,
            cache_system=True,
            max_tokens=300,
            stream=True,
            feature="whatsapp-agent",
        )

    def classify(self) -> Request:
        merchant = self.rng.choice(_MERCHANTS)
        amount = self.rng.lognormvariate(3.5, 1.0)
        return Request(
            messages=(Message.user(f"Label this card transaction: {merchant} R$ {amount:.2f}"),),
            system="Answer with one category: food, transport, shopping, bills, other.",
            max_tokens=5,
            temperature=0,
            feature="tx-classifier",
        )

    def summarize(self) -> Request:
        words = int(self.rng.lognormvariate(6.5, 0.4))  # ~700 words, some much longer
        document = " ".join(self.rng.choice(_WORDS) for _ in range(words))
        return Request(
            messages=(Message.user(f"Summarise for the weekly review:\n\n{document}"),),
            max_tokens=400,
            feature="weekly-digest",
        )
