"""The attempt record: one HTTP call to a provider, as a fact.

Recorded by the chain (engine.fallback.run), spooled by the recorder and stored as one row
(engine.telemetry.columns).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

# "skipped": the request's every target was skipped (breakers open, cooling after a 429, no
# budget left), so no HTTP call was made; one such row keeps the request visible. A target
# skipped by a request that did make calls is on those calls' rows (`Attempt.skips`).
Outcome = Literal["success", "error", "cancelled", "skipped"]
KeyKind = Literal["own", "managed"]


class Step(StrEnum):
    """What the chain did after an attempt, recorded as its `decision`: the one vocabulary of
    recorded decisions. Stored as these very strings (a StrEnum is a str), so the stored data
    reads as it always has. What an error class calls for is `engine.core.errors.Decision`;
    this is what was done, given the budget, the breaker and the targets left."""

    SERVED = "served"
    FAIL_FAST = "fail_fast"  # the request's fault (or ours): raised to the caller
    RETRY = "retry"  # the same target again, after a jittered backoff
    WAIT_AND_RETRY = "wait_and_retry"  # the same target again, after a short Retry-After
    FALL_BACK = "fall_back"  # on to the next target
    FALL_BACK_NOW = "fall_back_now"  # an account fault: on to the next target, no retry
    # A context overflow passed to a later target with a larger window (catalogue row 2).
    FALL_BACK_LARGER_CONTEXT = "fall_back_larger_context"
    # A committed stream's text that a later target went on with (engine.fallback.continuation).
    CONTINUE_ELSEWHERE = "continue_elsewhere"
    IN_BAND_ERROR = "in_band_error"  # a committed stream failed: the caller got a StreamError
    GIVE_UP = "give_up"  # no target left to try (or every one was skipped)
    CANCELLED = "cancelled"  # the caller went away


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP call to a provider, as a fact. Never the API key; never the prompt text."""

    request_id: str
    attempt_number: int  # 1-based, across the whole chain for this request
    route: str
    target: str  # provider/model as configured
    provider: str
    provider_kind: str
    model: str
    key_kind: KeyKind
    process_id: int
    started_at: datetime  # UTC
    latency_ms: float
    ttft_ms: float | None
    streamed: bool
    outcome: Outcome
    decision: Step
    error_class: str | None
    # Whose fault, as the policy sees it: request | provider | account | rate_limit | ambiguous
    fault_kind: str | None
    http_status: int | None
    error_type: str | None
    error_code: str | None
    error_message: str | None
    retry_after_s: float | None
    breaker_state: str  # the target's breaker before the call
    served: bool
    fallback_depth: int
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # True when the tokens are an estimate: an ambiguous failure after the request was sent
    # may have been billed for the prompt although no usage came back.
    tokens_estimated: bool = False
    feature: str | None = None
    # The label of the gateway key the caller presented (`label:secret` in
    # SWITCHOVER_GATEWAY_KEYS); None for an unlabelled key, no keys, or a library call.
    # The label names a caller, it is not a secret; the key itself is never recorded.
    key_label: str | None = None
    pii_masked: int = 0
    provider_request_id: str | None = None
    prompt_version: str | None = None  # the target's own prompt ([prompts]) that was sent
    quality_error: str | None = None  # "kind: message" when the answer broke its contract
    unreadable_events: int = 0  # stream events skipped because their data did not parse
    # A continuation of a committed stream that failed (engine.fallback.continuation): the
    # attempt number it picks up from, and the characters of the answer the caller held by then.
    continues_attempt: int | None = None
    continued_chars: int | None = None
    # The targets the chain passed over without a call (engine.core.skips, as JSON; None: none):
    # those since the record before this one, and on a request's last record those after it
    # too, each with its place in the order. Never rows of their own: no count of calls,
    # attempts, faults or cost can take a skip for an attempt.
    skips: str | None = None

    def replace(self, **changes: Any) -> Attempt:
        return dataclasses.replace(self, **changes)
