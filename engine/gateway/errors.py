"""What the gateway answers when it cannot answer: one pure function from a chain failure to
the HTTP error a caller of either dialect can act on, and the gateway's own 4xx errors.

`failure_for(error, face)` picks the status by the dominant cause of the failure
(`shared/reference/wire-formats.md` §3):

    cause (every failure was...)       Anthropic face                OpenAI face
    ─────────────────────────────────  ────────────────────────────  ────────────────────────────
    request  the request's fault       the provider's 4xx, its       the provider's 4xx,
             (RequestFailed)           message; type by status       invalid_request_error + code
    unavailable  overloaded, 502/503,  529 overloaded_error          503 service_unavailable_error
             connect error, breaker                                      / server_is_overloaded
             open or probing
    internal  500, reset, truncated    500 api_error                 500 server_error
             or invalid body, cut
    timeout  attempt or budget ran     504 timeout_error             504 timeout_error / timeout
             out (deadline_exceeded
             wins over any mix)
    rate_limited  429 rate limit,      429 rate_limit_error          429 rate_limit_error
             target cooling                                              / rate_limit_exceeded
    quota    out of quota, billing,    402 billing_error             429 insufficient_quota
             spend limit                                                 / insufficient_quota
    credential  the provider refused   500 api_error                 500 server_error
             the gateway's key (401/                                     / upstream_credentials
             403), model unknown to
             it (404), breaker open
             for an account fault
    mixed causes: unavailable (529 / 503) when any of them may pass (unavailable, timeout,
             rate_limited), else internal (500)

Why a provider's 401 is not passed on as 401: the caller's own gateway key was accepted; a
401 would send them checking the wrong key. The operator gets the credential alert instead.

Retrying: the gateway already retried and fell back, so every failure says
`x-should-retry: false` (both SDKs then raise at once instead of running the whole chain three
times), except a short known wait: when every failure is a rate limit or a breaker whose end
is known, the soonest of those ends is sent as `retry-after` (integer seconds) and
`retry-after-ms`, and if it is at most 60 s (what both SDKs honour) with `x-should-retry: true`.

Never here: provider keys (the app scrubs messages), I/O, clocks (`now` is passed in).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from engine.core.errors import (
    AccountFault,
    AllProvidersUnavailable,
    AttemptError,
    ChainError,
    LocalFault,
    ProviderFault,
    RateLimited,
    RequestFailed,
    RequestFault,
)
from engine.gateway.dialects import anthropic as anthropic_dialect
from engine.gateway.dialects import openai as openai_dialect
from engine.state.breaker import BreakerState

Face = str  # a dialect's name: "anthropic" or "openai"
Cause = Literal[
    "request", "unavailable", "internal", "timeout", "rate_limited", "quota", "credential"
]

MAX_SHORT_WAIT_S = 60.0  # the longest retry-after both official SDKs honour
TRANSIENT: frozenset[Cause] = frozenset({"unavailable", "timeout", "rate_limited"})

# (status, type, code) of each cause, per face; "request" takes the provider's status.
_ROWS: Mapping[Cause, Mapping[Face, tuple[int, str, str | None]]] = {
    "unavailable": {
        "anthropic": (529, "overloaded_error", None),
        "openai": (503, "service_unavailable_error", "server_is_overloaded"),
    },
    "internal": {
        "anthropic": (500, "api_error", None),
        "openai": (500, "server_error", None),
    },
    "timeout": {
        "anthropic": (504, "timeout_error", None),
        "openai": (504, "timeout_error", "timeout"),
    },
    "rate_limited": {
        "anthropic": (429, "rate_limit_error", None),
        "openai": (429, "rate_limit_error", "rate_limit_exceeded"),
    },
    "quota": {
        "anthropic": (402, "billing_error", None),
        "openai": (429, "insufficient_quota", "insufficient_quota"),
    },
    "credential": {
        "anthropic": (500, "api_error", None),
        "openai": (500, "server_error", "upstream_credentials"),
    },
}

_UNAVAILABLE_CLASSES = frozenset({"overloaded", "unavailable", "connect", "pool_timeout"})
_TIMEOUT_CLASSES = frozenset({"timeout", "stream_stalled", "read_timeout", "request_timeout"})
_QUOTA_CLASSES = frozenset({"quota", "billing", "spend_limit"})


@dataclass(frozen=True, slots=True)
class Failure:
    """An error answer, before a dialect renders its body."""

    status: int
    error_type: str
    message: str
    code: str | None = None
    param: str | None = None
    retry_after_s: float | None = None
    should_retry: bool = False
    cause: str = "gateway"  # what the metrics call the outcome: a Cause, or the gateway's own

    def headers(self) -> dict[str, str]:
        headers = {"x-should-retry": "true" if self.should_retry else "false"}
        if self.retry_after_s is not None:
            wait = max(self.retry_after_s, 0.001)
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        return headers


def error_type_for(face: Face, status: int) -> str:
    """The error type a dialect words `status` with (its own table: OpenAI reports almost
    every 4xx as invalid_request_error)."""
    dialect = anthropic_dialect if face == "anthropic" else openai_dialect
    return dialect.error_type_for(status)


def local(
    face: Face,
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    cause: str = "bad_request",
) -> Failure:
    """An error the gateway raises itself (bad input, auth, unknown model): never retried."""
    return Failure(
        status, error_type_for(face, status), message, code=code, param=param, cause=cause
    )


# --- the chain's failures ----------------------------------------------------------------


def cause_of(error: AttemptError) -> Cause:
    """What one failed attempt says about why nobody answered."""
    if isinstance(error, RequestFault):
        return "request"
    if isinstance(error, RateLimited):
        return "rate_limited"
    if isinstance(error, AccountFault):
        return "quota" if error.error_class in _QUOTA_CLASSES else "credential"
    if error.error_class in _TIMEOUT_CLASSES:
        return "timeout"
    if isinstance(error, ProviderFault) and error.error_class in _UNAVAILABLE_CLASSES:
        return "unavailable"
    return "internal"  # server errors, resets, truncated or invalid answers, cut streams


def cause_of_skip(reason: str, breaker: BreakerState | None) -> Cause:
    """Why a target was passed over: see `engine.fallback.admission.SKIP_REASONS`."""
    if "budget" in reason:
        return "timeout"
    if "cooling" in reason:
        return "rate_limited"
    if breaker is not None and breaker.open_reason == "account":
        return "credential"
    return "unavailable"


def dominant_cause(causes: list[Cause], *, deadline_exceeded: bool = False) -> Cause:
    if deadline_exceeded:
        return "timeout"
    distinct = set(causes)
    if len(distinct) == 1:
        return causes[0]
    if not distinct or distinct & TRANSIENT:
        return "unavailable"
    return "internal"


def failure_for(
    error: ChainError,
    face: Face,
    *,
    breakers: Mapping[str, BreakerState] | None = None,
    now: float = 0.0,
) -> Failure:
    """The answer for a chain that could not answer. `breakers` (a `snapshot_all()`) and `now`
    (the chain's clock) tell why skipped targets were skipped and when they come back."""
    if isinstance(error, RequestFailed):
        if isinstance(error.error, LocalFault) and error.error.status == 500:  # our own bug
            status, error_type, code = _ROWS["internal"][face]
            message = "internal error in the gateway: the request was not sent"
            return Failure(status, error_type, message, code=code, cause="internal")
        return _request_fault(error.error, face)
    assert isinstance(error, AllProvidersUnavailable), error
    breakers = breakers or {}
    causes = [cause_of(e) for e in error.errors]
    causes += [cause_of_skip(why, breakers.get(target)) for target, why in error.skipped]
    cause = dominant_cause(causes, deadline_exceeded=error.deadline_exceeded)
    # A request fault never ends a chain as AllProvidersUnavailable; were one there, it says
    # nothing more than "internal".
    status, error_type, code = _ROWS.get(cause, _ROWS["internal"])[face]
    wait = _known_wait(error, breakers, now) if cause in ("rate_limited", "unavailable") else None
    return Failure(
        status,
        error_type,
        _summary(error, cause),
        code=code,
        retry_after_s=wait,
        should_retry=wait is not None and wait <= MAX_SHORT_WAIT_S,
        cause=cause,
    )


def _request_fault(error: AttemptError, face: Face) -> Failure:
    status = error.status if error.status is not None and 400 <= error.status < 500 else 400
    if face == "anthropic":
        return Failure(status, error_type_for(face, status), error.message, cause="request")
    code = error.error_code or (
        error.error_class if error.error_class != "invalid_request" else None
    )
    return Failure(status, "invalid_request_error", error.message, code=code, cause="request")


def _known_wait(
    error: AllProvidersUnavailable, breakers: Mapping[str, BreakerState], now: float
) -> float | None:
    """The soonest moment a target can be tried again, when every failure says when."""
    waits: list[float | None] = [
        e.retry_after_s if isinstance(e, RateLimited) else None for e in error.errors
    ]
    for target, _ in error.skipped:
        state = breakers.get(target)
        until = state and (state.cooling_until or state.open_until)
        waits.append(until - now if until else None)
    if not waits or any(w is None for w in waits):
        return None
    return max(0.0, min(w for w in waits if w is not None))


_LEADS: Mapping[Cause, str] = {
    "unavailable": "every provider is overloaded or unavailable",
    "internal": "every provider failed",
    "timeout": "no provider answered in time",
    "rate_limited": "every provider is rate limited",
    "quota": "every provider is out of quota or credit",
    "credential": "every provider refused the gateway's credentials",
}


def _summary(error: AllProvidersUnavailable, cause: Cause) -> str:
    """Which target failed how, without the providers' own messages (they may quote keys)."""
    failed = [
        (a.target + ": ", a.error_class, a.http_status)
        for a in error.attempts
        if a.outcome == "error"
    ]
    if not failed:  # a hand-made error, without attempt records
        failed = [("", e.error_class, e.status) for e in error.errors]
    parts = [f"{who}{what}" + (f" ({status})" if status else "") for who, what, status in failed]
    parts += [f"{target}: skipped, {why}" for target, why in error.skipped]
    if error.deadline_exceeded:
        parts.append("time budget exhausted")
    if error.suspected_request:  # engine.fallback.poison
        parts.append("every target failed the same way: the request itself may be at fault")
    return f"{_LEADS[cause]}: " + ("; ".join(parts) or "no target was eligible")
