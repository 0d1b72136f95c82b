"""The failure policy, as a hierarchy whose names are the decisions.

    SwitchoverError
    ├── ConfigError                 switchover.toml is wrong; raised once, at start
    ├── AttemptError                one HTTP attempt failed; the subclass is what the chain does
    │   ├── RequestFault            the request's fault (400, 413, 422, content policy) →
    │   │                           FAIL FAST: raise to the caller, no backup is ever called,
    │   │                           the breaker never counts it. A context too long is the one
    │   │                           exception: it goes on to a later target with a larger
    │   │                           window (fall_back_larger_context), else fails fast
    │   ├── ProviderFault           the provider's fault (5xx, 529, HTML error pages, connect
    │   │                           errors, a stream cut before content) → RETRY the primary
    │   │                           once with jittered backoff, then FALL BACK; counts on the
    │   │                           breaker. `retry_same=False` (a 504 after a long wait) skips
    │   │                           the retry on the same target
    │   ├── AccountFault            credential or account broken (401, 403, 404 model, 402,
    │   │                           insufficient quota, spend limit) → FALL BACK NOW, open the
    │   │                           breaker for a long cooldown, raise a credential alert
    │   │   └── DrillFault          a fault drill's invalid key (no call made): the same path,
    │   │                           the breaker held open until the drill ends; telemetry
    │   │                           counts it as a drill, never as an incident or an alert
    │   ├── RateLimited             429 rate limit → WAIT Retry-After and retry when short and
    │   │                           inside the budget, else FALL BACK; cools the target until
    │   │                           the reset; never trips the breaker
    │   ├── AmbiguousFault          the provider may have done (and billed) the work but the
    │   │                           answer is unusable (reset after send, read timeout,
    │   │                           truncated or invalid body) → RETRY once on the same target,
    │   │                           then FALL BACK; counts on the breaker
    │   ├── QualityFault            a well-formed answer that breaks the route's output
    │   │                           contract or a tool's input schema, on a route that says
    │   │                           `on_quality_error = "fall_back"` → RETRY once, then FALL
    │   │                           BACK; the breaker hears a success (the provider is up).
    │   │                           Other routes return such an answer and record the error
    │   └── LocalFault              our own failure before anything left for the provider (a
    │                               request the codec cannot write, a bug in a prompt or an
    │                               adapter) → STOP: the request fails (400 when its content
    │                               is at fault, else 500); no retry, no backup (the same
    │                               request would fail there too), never on a breaker
    └── ChainError                  what a caller of the chain catches
        ├── RequestFailed           a RequestFault (the provider's error) or a LocalFault
        └── AllProvidersUnavailable every target failed, was skipped, or the budget ran out;
                                    carries each attempt's error

A 200 whose body is an error object is classified by the error inside it
(`engine.core.classify`). The table behind these decisions is `shared/reference/fault-catalogue.md`.

The code reads this tree from the classes themselves: the chain's next step
(`engine.fallback.steps`) matches on `decision`, the breaker (`engine.state.breaker.event_for`)
reads `decision` and `counts_on_breaker`, and the chain raises a credential alert where
`credential_alert` says so. What the chain then did is recorded on the attempt as a `Step`
(`engine.core.attempt`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.core.attempt import Attempt


class Decision(StrEnum):
    """What an error class calls for, as drawn above (and named in the fault catalogue)."""

    FAIL_FAST = "fail_fast"
    RETRY_THEN_FALL_BACK = "retry_then_fall_back"
    FALL_BACK_NOW = "fall_back_now"
    RATE_LIMITED = "rate_limited"
    AMBIGUOUS = "ambiguous"
    QUALITY = "quality"


class SwitchoverError(Exception):
    """Base of every error Switchover raises."""


class ConfigError(SwitchoverError):
    """The configuration is invalid; the message names the key and what is wrong."""


class AttemptError(SwitchoverError):
    """One attempt failed. Built by `engine.core.classify`, never by hand-parsing elsewhere."""

    decision: Decision
    fault_kind: str  # whose fault, recorded on the attempt: what telemetry groups failures by
    counts_on_breaker: bool = True  # a failure the breaker counts towards opening
    credential_alert: bool = False  # the operator hears of it at once (a broken key)

    def __init__(
        self,
        error_class: str,
        message: str = "",
        *,
        status: int | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
        retry_after_s: float | None = None,
        provider_request_id: str | None = None,
        retry_same: bool = True,
        sent: bool = True,
    ) -> None:
        super().__init__(message or error_class)
        self.error_class = error_class
        self.message = message or error_class
        self.status = status
        self.error_type = error_type
        self.error_code = error_code
        self.retry_after_s = retry_after_s
        self.provider_request_id = provider_request_id
        self.retry_same = retry_same
        # False when the request never reached the provider (connect error): nothing billed.
        self.sent = sent

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.error_class!r}, status={self.status}, "
            f"type={self.error_type!r}, code={self.error_code!r}, message={self.message!r})"
        )


class RequestFault(AttemptError):
    decision = Decision.FAIL_FAST
    fault_kind = "request"
    counts_on_breaker = False


class ProviderFault(AttemptError):
    decision = Decision.RETRY_THEN_FALL_BACK
    fault_kind = "provider"


class AccountFault(AttemptError):
    decision = Decision.FALL_BACK_NOW
    fault_kind = "account"
    credential_alert = True


class DrillFault(AccountFault):
    """Made by the chain's admission (`engine.fallback.admission`) for a target under a fault
    drill (`engine.state.switches`) and raised in place of the HTTP call: the request takes
    exactly the path an invalid key would send it down."""

    fault_kind = "drill"
    credential_alert = False  # a drill's key is broken on purpose

    def __init__(self, drill_until_s: float) -> None:
        super().__init__(
            "drill_invalid_key",
            "fault drill: this target answers as if its key were invalid",
            status=401,
            error_type="authentication_error",
            sent=False,
        )
        self.hold_s = max(0.0, drill_until_s)  # until the drill ends: the breaker stays open


class RateLimited(AttemptError):
    decision = Decision.RATE_LIMITED
    fault_kind = "rate_limit"
    counts_on_breaker = False


class AmbiguousFault(AttemptError):
    decision = Decision.AMBIGUOUS
    fault_kind = "ambiguous"


class QualityFault(AttemptError):
    """Raised by the chain itself, never by `engine.core.classify`: the answer arrived (and was
    billed: `usage`) but `engine.behaviours.contracts` found it invalid."""

    decision = Decision.QUALITY
    fault_kind = "quality"
    counts_on_breaker = False

    def __init__(self, violation: str, usage: Any, *, error_class: str) -> None:
        super().__init__(error_class, violation)
        self.usage = usage  # engine.core.messages.Usage: what the invalid answer cost


class LocalFault(AttemptError):
    """Raised before any byte left for the provider: the provider did nothing, so no breaker
    and no health score may hear of it. Recorded with fault kind "internal"."""

    decision = Decision.FAIL_FAST
    fault_kind = "internal"
    counts_on_breaker = False

    @classmethod
    def unencodable(cls, message: str) -> LocalFault:
        """The request holds what no JSON encoder writes (a lone surrogate, a NaN): its
        content is at fault, as a 400 says."""
        return cls("unencodable", message, status=400, sent=False)

    @classmethod
    def internal(cls, message: str) -> LocalFault:
        return cls("internal", message, status=500, sent=False)


class ChainError(SwitchoverError):
    """A request the chain could not answer."""

    def __init__(self, message: str, attempts: tuple[Attempt, ...] = ()) -> None:
        super().__init__(message)
        self.attempts = attempts


class RequestFailed(ChainError):
    """The request itself is at fault; `error` is the provider's answer, untranslated."""

    def __init__(self, error: AttemptError, attempts: tuple[Attempt, ...] = ()) -> None:
        lead = (
            "request not sent"
            if isinstance(error, LocalFault)
            else "request rejected by the provider"
        )
        super().__init__(f"{lead}: {error.message}", attempts)
        self.error = error


class AllProvidersUnavailable(ChainError):
    """No target could answer. `errors` holds each failed attempt's error, in order;
    `skipped` names targets passed over (breaker open, cooling down, budget too small)."""

    def __init__(
        self,
        errors: tuple[AttemptError, ...],
        attempts: tuple[Attempt, ...] = (),
        *,
        skipped: tuple[tuple[str, str], ...] = (),
        deadline_exceeded: bool = False,
        suspected_request: bool = False,
    ) -> None:
        parts = [f"{e.error_class}" + (f" ({e.status})" if e.status else "") for e in errors]
        parts += [f"{target} skipped: {why}" for target, why in skipped]
        summary = "; ".join(parts) or "no target was eligible"
        if deadline_exceeded:
            summary += "; time budget exhausted"
        if suspected_request:  # engine.fallback.poison
            summary += "; every target failed the same way: the request itself may be at fault"
        super().__init__(f"all providers unavailable: {summary}", attempts)
        self.errors = errors
        self.skipped = skipped
        self.deadline_exceeded = deadline_exceeded
        self.suspected_request = suspected_request

    @property
    def retry_after_s(self) -> float | None:
        """When every failure was a rate limit with a known reset, the soonest reset."""
        waits = [e.retry_after_s for e in self.errors if isinstance(e, RateLimited)]
        if not self.errors or len(waits) != len(self.errors) or None in waits:
            return None
        return min(w for w in waits if w is not None)
