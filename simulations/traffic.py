"""Synthetic traffic for the demo: requests shaped like three real features.

- support: a long, cached system prompt (prompt caching on the primary) and a short
  question, streamed;
- classify: one short transaction description, a one-word label;
- summarize: a long document, a paragraph back.

Sizes vary around realistic means from a seeded RNG, so two runs with the same seed send the
same traffic. Only the shape matters: the fake providers answer whatever is asked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine.types import Message, Request

_SUPPORT_POLICY = (
    "You are the support agent of an online shop. Be brief and friendly. Orders ship within "
    "two working days; returns are free within 30 days; refunds take 5 to 7 days to appear. "
)
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


SHAPES = (Shape("support", 0.5), Shape("classify", 0.35), Shape("summarize", 0.15))


class Traffic:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        # ~1,500 tokens of policy text, identical on every support request: what the
        # primary's prompt cache serves, and what a fallback loses.
        self.support_system = _SUPPORT_POLICY * 30

    def next(self) -> tuple[str, Request]:
        shape = self.rng.choices(SHAPES, weights=[s.weight for s in SHAPES])[0]
        return shape.route, getattr(self, shape.route)()

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
