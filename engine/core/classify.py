"""Every foreign failure becomes one `AttemptError`, here and nowhere else: the answers that
arrived here, the transport's exceptions in `engine.providers.transport_faults`.

Pure functions of (HTTP status, headers, body): no I/O, no clock reads (`now` is passed in for
HTTP dates), no HTTP client. Both dialects' error shapes are read leniently, because
compatible servers and the proxies in front of real providers (Cloudflare HTML pages, FastAPI
422s, `{"error": "text"}`) do not follow either spec. The decision each row of
`shared/reference/fault-catalogue.md` maps to is tested row by row in `tests/core/test_classify.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    AttemptError,
    ProviderFault,
    RateLimited,
    RequestFault,
)

# A reset further away than this is not believed (garbage, or a clock far off).
MAX_BELIEVED_RESET_S = 86_400.0
MESSAGE_LIMIT = 500  # characters of a provider's message kept

# An error `type` (Anthropic) or `code` (OpenAI and compatibles) says what status it stands for
# when the body arrives with 200 or inside a stream; the gateway words an in-band error by it.
STATUS_OF_ERROR_TYPE: Mapping[str, int] = {
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "service_unavailable_error": 503,
    "server_is_overloaded": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}

_QUOTA_WORDS = ("insufficient_quota", "enforced_spend_limit_reached", "spend_limit", "quota")
_SPEND_LIMIT_PHRASES = (
    "spend limit",
    "spending limit",
    "credit balance is too low",
    "usage limit",
    "billing",
)
_CONTEXT_PHRASES = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
    "context length",
    "too many tokens",
)
_CONTENT_POLICY_WORDS = (
    "content_filter",
    "content_policy_violation",
    "invalid_prompt",
    "content policy",
    "content management policy",
    "safety system",
)
_SLOW_DOWN_WORDS = ("slow_down", "slow down", "acceleration")
_HTML_START = re.compile(rb"^\s*(<!doctype html|<html|<head|<body)", re.IGNORECASE)


def classify_response(
    status: int, headers: Mapping[str, str], body: bytes, *, now: datetime
) -> AttemptError:
    """A non-2xx answer: the status decides, the error body refines it."""
    error = _error_of_body(body)
    if error is None:
        message = _plain_message(body, status)
        error = {"message": message}
    return _decide(status, error, headers, now)


def embedded_error(obj: object) -> Mapping[str, Any] | None:
    """The error inside an OpenAI `{"error": {...}}` or Anthropic `{"type": "error", ...}` body,
    or None when `obj` is not an error object."""
    if not isinstance(obj, Mapping):
        return None
    inner = obj.get("error")
    if isinstance(inner, Mapping):
        return inner
    if isinstance(inner, str) and inner:
        return {"message": inner}
    if obj.get("type") == "error":
        return {"type": "api_error", "message": "error event without details"}
    return None


def error_from_object(
    error: Mapping[str, Any],
    *,
    status: int | None,
    headers: Mapping[str, str],
    now: datetime,
) -> AttemptError:
    """An error object found in a 200 body or a stream, classified as if it came with
    `status`; with no real error status (None or 2xx) the status is inferred from its type."""
    if status is None or status < 400:
        status = _inferred_status(error)
    return _decide(status, error, headers, now)


def protocol_fault(
    kind: str,
    message: str,
    *,
    status: int | None = 200,
    provider_request_id: str | None = None,
) -> AttemptError:
    """A 2xx answer that cannot be used: invalid_json, not_json, empty or truncated."""
    return AmbiguousFault(
        kind, message[:MESSAGE_LIMIT], status=status, provider_request_id=provider_request_id
    )


def stream_fault(kind: str, message: str, *, status: int | None) -> AttemptError:
    """A stream that broke without an error event: stream_cut or stream_stalled. `status` is
    the response's, or None when no status line arrived (a stream that stalled before its
    headers)."""
    return ProviderFault(kind, message[:MESSAGE_LIMIT], status=status)


def provider_request_id(headers: Mapping[str, str]) -> str | None:
    return headers.get("request-id") or headers.get("x-request-id")


# --- the decision table --------------------------------------------------------------------
#
# The status decides. Where what a status means depends on what the error says (a 429 that is
# an exhausted quota, a 400 that is a spend limit or a context overflow, a 5xx that says it is
# overloaded), the word rules beside it refine it: tried in order, the first that matches
# wins, and the last of each status always matches. A status not in the table is read as any
# other 4xx, or as a server error (5xx, and anything else that is no success).


@dataclass(frozen=True, slots=True)
class Rule:
    """One classification: the fault and its error class, when the error's words (its type,
    code and message, lower-cased) hold one of `words`, or when its type is `error_type`;
    with neither, always."""

    fault: type[AttemptError]
    error_class: str
    words: tuple[str, ...] = ()
    error_type: str | None = None
    retry_same: bool = True

    def matches(self, words: str, error_type: str | None) -> bool:
        if self.error_type is not None:
            return error_type == self.error_type
        return not self.words or any(w in words for w in self.words)


_OVERLOADED = Rule(ProviderFault, "overloaded", ("overloaded",))
# The provider already made us wait; repeating the same long wait wastes the budget.
_TIMED_OUT = Rule(ProviderFault, "timeout", error_type="timeout_error", retry_same=False)
_UNAVAILABLE = (_OVERLOADED, _TIMED_OUT, Rule(ProviderFault, "unavailable"))

RULES_BY_STATUS: Mapping[int, tuple[Rule, ...]] = {
    401: (Rule(AccountFault, "authentication"),),
    402: (Rule(AccountFault, "billing"),),
    403: (Rule(AccountFault, "permission"),),
    404: (Rule(AccountFault, "model_not_found"),),
    408: (Rule(AmbiguousFault, "request_timeout"),),
    409: (Rule(ProviderFault, "conflict"),),
    413: (Rule(RequestFault, "too_large"),),
    422: (Rule(RequestFault, "unprocessable"),),
    429: (
        Rule(AccountFault, "quota", _QUOTA_WORDS),
        Rule(RateLimited, "slow_down", _SLOW_DOWN_WORDS),
        Rule(RateLimited, "rate_limit"),
    ),
    502: _UNAVAILABLE,
    503: _UNAVAILABLE,
    504: (_OVERLOADED, Rule(ProviderFault, "timeout", retry_same=False)),
    **dict.fromkeys(range(520, 525), _UNAVAILABLE),  # Cloudflare's pages for an origin's failure
    529: (Rule(ProviderFault, "overloaded"),),
}
OTHER_CLIENT_ERROR: tuple[Rule, ...] = (
    # Anthropic answers 400 when a spend limit the customer set is reached: an account fault
    # dressed as a bad request.
    Rule(AccountFault, "spend_limit", _SPEND_LIMIT_PHRASES),
    Rule(RequestFault, "context_overflow", _CONTEXT_PHRASES),
    Rule(RequestFault, "content_policy", _CONTENT_POLICY_WORDS),
    Rule(RequestFault, "invalid_request"),
)
OTHER_SERVER_ERROR: tuple[Rule, ...] = (
    _OVERLOADED,
    _TIMED_OUT,
    Rule(ProviderFault, "server_error"),
)


def rules_for(status: int) -> tuple[Rule, ...]:
    """The rules that classify an error answered with `status`, in the order they are tried."""
    if status in RULES_BY_STATUS:
        return RULES_BY_STATUS[status]
    return OTHER_CLIENT_ERROR if 400 <= status < 500 else OTHER_SERVER_ERROR


def _decide(
    status: int, error: Mapping[str, Any], headers: Mapping[str, str], now: datetime
) -> AttemptError:
    error_type = _str(error.get("type"))
    error_code = _str(error.get("code"))
    details = error.get("details")
    details_code = _str(details.get("error_code")) if isinstance(details, Mapping) else None
    message = (_str(error.get("message")) or f"HTTP {status}")[:MESSAGE_LIMIT]
    words = " ".join(w for w in (error_type, error_code, details_code, message) if w).lower()
    rule = next(r for r in rules_for(status) if r.matches(words, error_type))
    return rule.fault(
        rule.error_class,
        message,
        status=status,
        error_type=error_type,
        error_code=error_code or details_code,
        retry_after_s=parse_retry_after(headers, now),
        provider_request_id=provider_request_id(headers),
        retry_same=rule.retry_same,
    )


def _inferred_status(error: Mapping[str, Any]) -> int:
    code = error.get("code")
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    for key in (_str(error.get("code")), _str(error.get("type"))):
        if key is not None and key in STATUS_OF_ERROR_TYPE:
            return STATUS_OF_ERROR_TYPE[key]
    return 500  # an unknown error inside an answer is the provider's problem


def status_of_error_type(error_type: str) -> int:
    """The status an error type or code stands for; 500 (the provider's problem) if unknown."""
    return STATUS_OF_ERROR_TYPE.get(error_type, 500)


# --- bodies ---------------------------------------------------------------------------------


def _error_of_body(body: bytes) -> Mapping[str, Any] | None:
    if not body or _HTML_START.match(body):
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    error = embedded_error(parsed)
    if error is not None:
        return error
    if isinstance(parsed, Mapping) and "detail" in parsed:  # FastAPI-style 422
        return {"message": json.dumps(parsed["detail"])[:MESSAGE_LIMIT]}
    if isinstance(parsed, Mapping) and isinstance(parsed.get("message"), str):
        return {"message": parsed["message"]}
    return None


def _plain_message(body: bytes, status: int) -> str:
    text = body[:4096].decode("utf-8", errors="replace")
    title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    if title:
        return f"HTTP {status}: {title.group(1).strip()}"
    text = " ".join(text.split())
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


# --- Retry-After and reset headers ----------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """Seconds until the provider accepts requests again, or None when it did not say (or
    said something unbelievable: garbage, a past date, more than a day)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        seconds = _float(ms)
        if seconds is not None:
            return _believable(seconds / 1000.0)
    value = headers.get("retry-after")
    if value is not None:
        seconds = _float(value)
        if seconds is None:
            seconds = _seconds_until_http_date(value, now)
        if seconds is not None:
            return _believable(seconds)
    return _reset_headers(headers, now)


def _reset_headers(headers: Mapping[str, str], now: datetime) -> float | None:
    """Anthropic `anthropic-ratelimit-*-reset` (RFC 3339) and OpenAI `x-ratelimit-reset-*`
    (Go durations). The exhausted limits decide; if none says it is exhausted, the latest."""
    resets: list[tuple[float, bool]] = []
    for name, value in headers.items():
        name = name.lower()
        if name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            seconds = _seconds_until_rfc3339(value, now)
            remaining = headers.get(name[: -len("reset")] + "remaining")
        elif name.startswith("x-ratelimit-reset-"):
            seconds = parse_go_duration(value)
            remaining = headers.get("x-ratelimit-remaining-" + name[len("x-ratelimit-reset-") :])
        else:
            continue
        if seconds is not None and seconds > 0:
            resets.append((seconds, remaining is not None and remaining.strip() == "0"))
    if not resets:
        return None
    exhausted = [s for s, is_exhausted in resets if is_exhausted]
    return _believable(max(exhausted or [s for s, _ in resets]))


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_go_duration(value: str) -> float | None:
    """`6m0s`, `1.5s`, `12ms` → seconds; None when it is not a duration."""
    value = value.strip()
    parts = _GO_DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def _seconds_until_http_date(value: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def _seconds_until_rfc3339(value: str, now: datetime) -> float | None:
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def _float(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number == number else None  # NaN is garbage too


def _believable(seconds: float) -> float | None:
    if seconds <= 0 or seconds > MAX_BELIEVED_RESET_S:
        return None
    return seconds
