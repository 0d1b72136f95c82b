"""How many tokens a target's model takes in, for the chain's context-overflow rule.

A request that overflowed one target's context window can only be answered by a target whose
window is larger (catalogue row 2): `larger_window_ahead` says whether one follows, `too_narrow`
why a target is passed over. A window is the operator's `context_window` on the target in the
configuration when given (the operator's word: a fine-tuned or self-hosted model, a window a
provider changed), else genai-prices' model data, else unknown. An unknown window is tried
(issue 35): a backup the operator put in the chain, whose window nobody states, may well take
the request, and every fallback-capable gateway tries it; at worst it answers the same 400,
which is the caller's fault and charges no breaker. A known window no larger than one the
request overflowed is skipped, with both sizes in the reason.

Looked up only when a request overflows (genai-prices costs ~0.1 s to import; most processes
never need it), with the same model matching as the prices (engine.core.pricing), cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.fallback.target import Target

__all__ = ["CONTEXT_OVERFLOW", "larger_window_ahead", "too_narrow", "window_of"]

CONTEXT_OVERFLOW = "context_overflow"  # engine.core.classify's error class for the fault


def window_of(target: Target) -> int | None:
    """The target's context window in tokens, or None when nobody says."""
    if target.context_window is not None:
        return target.context_window
    return _catalogue_window(target.price_provider or target.provider.kind, target.model)


def raised_bar(overflowed: int | None, target: Target) -> int | None:
    """The window a request must exceed after overflowing `target` too: the largest known
    window it overflowed (a target whose window nobody states raises nothing)."""
    known = window_of(target)
    return overflowed if known is None else max(known, overflowed or 0)


def larger_window_ahead(failed: Target, later: Sequence[Target]) -> bool:
    """Whether a target after `failed`, which overflowed, may take the request: its window
    larger, or unknown (and any, when `failed`'s own is unknown)."""
    window = window_of(failed)
    return any(too_narrow(t, window) is None for t in later)


def too_narrow(target: Target, overflowed: int | None) -> str | None:
    """Why `target` cannot take a request that overflowed `overflowed` tokens (the skip
    reason recorded), or None when it may: its window larger, or either unknown."""
    window = window_of(target)
    if window is None or overflowed is None:
        return None
    if window <= overflowed:
        return f"context window {window:,} tokens, the request overflowed {overflowed:,}"
    return None


@lru_cache(maxsize=1024)
def _catalogue_window(provider_id: str, model: str) -> int | None:
    # The prices' own lookup (genai-prices' matching: dated names, case), so that a target's
    # price and its window always come from the same model entry.
    from engine.core.pricing import _model

    found = _model(provider_id, model)
    window = found[1].context_window if found is not None else None
    return window if isinstance(window, int) and window > 0 else None
