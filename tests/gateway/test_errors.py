"""The failure table: every way a chain can fail, and what each face of the gateway answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from engine.core.errors import (
    AccountFault,
    AllProvidersUnavailable,
    AmbiguousFault,
    AttemptError,
    ChainError,
    ProviderFault,
    RateLimited,
    RequestFailed,
    RequestFault,
)
from engine.gateway import errors
from engine.gateway.errors import Failure, failure_for
from engine.state.breaker import BreakerState

NOW = 1_000.0


def down(*errs: AttemptError, skipped: tuple[tuple[str, str], ...] = (), deadline=False):
    return AllProvidersUnavailable(errs, skipped=skipped, deadline_exceeded=deadline)


@dataclass(frozen=True)
class Row:
    name: str
    error: ChainError
    anthropic: tuple[int, str, str | None]  # status, type, code
    openai: tuple[int, str, str | None]
    retry_after: str | None = None  # the retry-after header; None: not sent
    should_retry: bool = False
    breakers: dict[str, BreakerState] | None = None


def limited(seconds: float | None = None) -> RateLimited:
    return RateLimited("rate_limit", retry_after_s=seconds)


OVERLOADED = ProviderFault("overloaded", "Overloaded", status=529)
UNAVAILABLE = ProviderFault("unavailable", "engine overloaded", status=503)
SERVER_ERROR = ProviderFault("server_error", "boom", status=500)
OPEN = {"claude/a": BreakerState(status="open", open_until=NOW + 12.5, open_reason="failures")}
COOLING = {"gpt/b": BreakerState(cooling_until=NOW + 3)}
ACCOUNT_OPEN = {
    "claude/a": BreakerState(status="open", open_until=NOW + 300, open_reason="account")
}

ROWS = [
    Row("request fault: the provider's 400 passes through",
        RequestFailed(RequestFault("invalid_request", "messages: empty", status=400)),
        (400, "invalid_request_error", None), (400, "invalid_request_error", None)),
    Row("request fault: context overflow keeps its code",
        RequestFailed(RequestFault("context_overflow", "too long", status=400,
                                   error_code="context_length_exceeded")),
        (400, "invalid_request_error", None),
        (400, "invalid_request_error", "context_length_exceeded")),
    Row("request fault: 413", RequestFailed(RequestFault("too_large", "big", status=413)),
        (413, "request_too_large", None), (413, "invalid_request_error", "too_large")),
    Row("request fault: 422", RequestFailed(RequestFault("unprocessable", "x", status=422)),
        (422, "invalid_request_error", None), (422, "invalid_request_error", "unprocessable")),
    Row("all overloaded or unavailable", down(OVERLOADED, OVERLOADED, UNAVAILABLE),
        (529, "overloaded_error", None),
        (503, "service_unavailable_error", "server_is_overloaded")),
    Row("connect errors are unavailability", down(ProviderFault("connect", sent=False)),
        (529, "overloaded_error", None),
        (503, "service_unavailable_error", "server_is_overloaded")),
    Row("all internal", down(SERVER_ERROR, AmbiguousFault("invalid_json"), AmbiguousFault("reset")),
        (500, "api_error", None), (500, "server_error", None)),
    Row("all timed out", down(AmbiguousFault("read_timeout"), ProviderFault("timeout", status=504)),
        (504, "timeout_error", None), (504, "timeout_error", "timeout")),
    Row("the budget ran out, whatever else failed", down(OVERLOADED, deadline=True),
        (504, "timeout_error", None), (504, "timeout_error", "timeout")),
    Row("skipped for budget", down(skipped=(("gpt/b", "time budget too small"),), deadline=True),
        (504, "timeout_error", None), (504, "timeout_error", "timeout")),
    Row("all rate limited, short known reset: retry after the soonest",
        down(limited(3.2), limited(7)),
        (429, "rate_limit_error", None), (429, "rate_limit_error", "rate_limit_exceeded"),
        retry_after="4", should_retry=True),
    Row("all rate limited, long reset: said, but no retry",
        down(RateLimited("rate_limit", retry_after_s=90.0)),
        (429, "rate_limit_error", None), (429, "rate_limit_error", "rate_limit_exceeded"),
        retry_after="90"),
    Row("all rate limited, one reset unknown",
        down(RateLimited("rate_limit", retry_after_s=2), RateLimited("rate_limit")),
        (429, "rate_limit_error", None), (429, "rate_limit_error", "rate_limit_exceeded")),
    Row("rate limited and cooling: the cooling end counts",
        down(RateLimited("rate_limit", retry_after_s=8),
             skipped=(("gpt/b", "cooling down after a rate limit"),)),
        (429, "rate_limit_error", None), (429, "rate_limit_error", "rate_limit_exceeded"),
        retry_after="3", should_retry=True, breakers=COOLING),
    Row("out of quota or credit",
        down(AccountFault("quota", status=429), AccountFault("billing", status=402),
             AccountFault("spend_limit", status=400)),
        (402, "billing_error", None), (429, "insufficient_quota", "insufficient_quota")),
    Row("the providers refused the gateway's keys: not the caller's 401",
        down(AccountFault("authentication", status=401),
             AccountFault("model_not_found", status=404)),
        (500, "api_error", None), (500, "server_error", "upstream_credentials")),
    Row("breakers open with a known end: a short wait",
        down(skipped=(("claude/a", "breaker open"),)),
        (529, "overloaded_error", None),
        (503, "service_unavailable_error", "server_is_overloaded"),
        retry_after="13", should_retry=True, breakers=OPEN),
    Row("breaker open for an account fault: credentials, no retry",
        down(skipped=(("claude/a", "breaker open"),)),
        (500, "api_error", None), (500, "server_error", "upstream_credentials"),
        breakers=ACCOUNT_OPEN),
    Row("an overload next to a rate limit: unavailable, and the overload's end is unknown",
        down(OVERLOADED, RateLimited("rate_limit", retry_after_s=1)),
        (529, "overloaded_error", None),
        (503, "service_unavailable_error", "server_is_overloaded")),
    Row("quota next to a server error: nothing transient, internal",
        down(AccountFault("quota", status=429), SERVER_ERROR),
        (500, "api_error", None), (500, "server_error", None)),
]  # fmt: skip


@pytest.mark.parametrize("face", ["anthropic", "openai"])
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_failure_table(row: Row, face: str):
    failure = failure_for(row.error, face, breakers=row.breakers, now=NOW)
    assert (failure.status, failure.error_type, failure.code) == getattr(row, face)
    headers = failure.headers()
    assert headers["x-should-retry"] == ("true" if row.should_retry else "false")
    assert headers.get("retry-after") == row.retry_after
    if row.retry_after is not None:
        assert int(headers["retry-after-ms"]) > 0


def test_every_cause_has_a_row_for_both_faces():
    causes: Any = errors.Cause.__args__  # type: ignore[attr-defined]
    for cause in causes:
        if cause != "request":  # the provider's own status
            assert set(errors._ROWS[cause]) == {"anthropic", "openai"}


def test_a_short_wait_is_sent_in_whole_seconds_and_in_milliseconds():
    headers = Failure(429, "rate_limit_error", "x", retry_after_s=2.25, should_retry=True).headers()
    assert headers == {"x-should-retry": "true", "retry-after": "3", "retry-after-ms": "2250"}


def test_the_message_names_each_target_but_never_a_provider_message():
    error = down(ProviderFault("overloaded", "secret-ish provider text", status=529))
    message = failure_for(error, "anthropic").message
    assert message.startswith("every provider is overloaded or unavailable")
    assert "secret-ish" not in message


def test_a_request_fault_keeps_the_provider_message():
    error = RequestFailed(RequestFault("invalid_request", "max_tokens: too large", status=400))
    assert failure_for(error, "openai").message == "max_tokens: too large"
