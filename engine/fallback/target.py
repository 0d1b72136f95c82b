"""A target: one model at one provider, as a chain tries it."""

from __future__ import annotations

from dataclasses import dataclass

from engine.behaviours.prompts import TargetPrompt
from engine.core.attempt import KeyKind
from engine.providers.base import Provider


@dataclass(frozen=True, slots=True)
class Target:
    provider: Provider
    model: str
    key_kind: KeyKind = "managed"
    prompt: TargetPrompt | None = None  # this target's own system prompt, recorded by version
    # Tokens the model takes in, from the configuration; None: genai-prices' figure, if any
    # (engine.fallback.context_windows), looked up under `price_provider` (None: the
    # provider's kind).
    context_window: int | None = None
    price_provider: str | None = None
    # Continues a final assistant message (engine.fallback.continuation); None: by the
    # provider's kind.
    prefill: bool | None = None

    @property
    def name(self) -> str:
        return f"{self.provider.name}/{self.model}"
