"""Every foreign failure becomes one `AttemptError`, here and nowhere else.

Pure functions of (HTTP status, headers, body) or of an exception: no I/O, no clock reads
(`now` is passed in for HTTP dates). Both dialects' error shapes are read leniently, because
compatible servers and the proxies in front of real providers (Cloudflare HTML pages, FastAPI
422s, `{"error": "text"}`) do not follow either spec. The decision each row of
`shared/reference/fault-catalogue.md` maps to is tested row by row in `tests/test_classify.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

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
_MESSAGE_LIMIT = 500

# An error `type` (Anthropic) or `code` (OpenAI and compatibles) says what status it stands for
# when the body arrives with 200 or inside a stream.
_STATUS_OF_TYPE = {
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


def classify_exception(
    exc: BaseException, *, sent: bool, status: int | None = None
) -> AttemptError:
    """A transport failure. `sent` is False when the request cannot have reached the provider;
    `status` is the response's, when its status line arrived before the failure (a read
    timeout mid-body), else None: no number is recorded for an answer that never came."""
    message = f"{type(exc).__name__}: {exc}"[:_MESSAGE_LIMIT]
    if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError | httpx.UnsupportedProtocol):
        return ProviderFault("connect", message, sent=False)
    if isinstance(exc, httpx.PoolTimeout):
        return ProviderFault("pool_timeout", message, sent=False)
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout | TimeoutError):
        return AmbiguousFault("read_timeout", message, sent=sent, status=status)
    if isinstance(exc, httpx.DecodingError):
        return AmbiguousFault("truncated", message, sent=sent, status=status)
    if isinstance(exc, httpx.TransportError):
        if not sent:
            return ProviderFault("connect", message, sent=False)
        return AmbiguousFault("reset", message, status=status)
    return ProviderFault("internal", message, sent=sent, status=status)


def protocol_fault(
    kind: str,
    message: str,
    *,
    status: int | None = 200,
    provider_request_id: str | None = None,
) -> AttemptError:
    """A 2xx answer that cannot be used: invalid_json, not_json, empty or truncated."""
    return AmbiguousFault(
        kind, message[:_MESSAGE_LIMIT], status=status, provider_request_id=provider_request_id
    )


def stream_fault(kind: str, message: str, *, status: int | None) -> AttemptError:
    """A stream that broke without an error event: stream_cut or stream_stalled. `status` is
    the response's, or None when no status line arrived (a stream that stalled before its
    headers)."""
    return ProviderFault(kind, message[:_MESSAGE_LIMIT], status=status)


def provider_request_id(headers: Mapping[str, str]) -> str | None:
    return headers.get("request-id") or headers.get("x-request-id")


# --- the decision table --------------------------------------------------------------------


def _decide(
    status: int, error: Mapping[str, Any], headers: Mapping[str, str], now: datetime
) -> AttemptError:
    error_type = _str(error.get("type"))
    error_code = _str(error.get("code"))
    details = error.get("details")
    details_code = _str(details.get("error_code")) if isinstance(details, Mapping) else None
    message = (_str(error.get("message")) or f"HTTP {status}")[:_MESSAGE_LIMIT]
    words = " ".join(w for w in (error_type, error_code, details_code, message) if w).lower()
    fields = {
        "status": status,
        "error_type": error_type,
        "error_code": error_code or details_code,
        "retry_after_s": parse_retry_after(headers, now),
        "provider_request_id": provider_request_id(headers),
    }

    if status == 429:
        if any(w in words for w in _QUOTA_WORDS):
            return AccountFault("quota", message, **fields)
        if any(w in words for w in _SLOW_DOWN_WORDS):
            return RateLimited("slow_down", message, **fields)
        return RateLimited("rate_limit", message, **fields)
    if status == 402:
        return AccountFault("billing", message, **fields)
    if status == 401:
        return AccountFault("authentication", message, **fields)
    if status == 403:
        return AccountFault("permission", message, **fields)
    if status == 404:
        return AccountFault("model_not_found", message, **fields)
    if status == 413:
        return RequestFault("too_large", message, **fields)
    if status == 422:
        return RequestFault("unprocessable", message, **fields)
    if status == 408:
        return AmbiguousFault("request_timeout", message, **fields)
    if status == 409:
        return ProviderFault("conflict", message, **fields)
    if 400 <= status < 500:
        # Anthropic answers 400 when a spend limit the customer set is reached: an account
        # fault dressed as a bad request.
        if any(p in words for p in _SPEND_LIMIT_PHRASES):
            return AccountFault("spend_limit", message, **fields)
        if any(p in words for p in _CONTEXT_PHRASES):
            return RequestFault("context_overflow", message, **fields)
        if any(w in words for w in _CONTENT_POLICY_WORDS):
            return RequestFault("content_policy", message, **fields)
        return RequestFault("invalid_request", message, **fields)
    if status == 529 or "overloaded" in words:
        return ProviderFault("overloaded", message, **fields)
    if status == 504 or error_type == "timeout_error":
        # The provider already made us wait; repeating the same long wait wastes the budget.
        return ProviderFault("timeout", message, retry_same=False, **fields)
    if status in (502, 503) or 520 <= status <= 524:
        return ProviderFault("unavailable", message, **fields)
    return ProviderFault("server_error", message, **fields)


def _inferred_status(error: Mapping[str, Any]) -> int:
    code = error.get("code")
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    for key in (_str(error.get("code")), _str(error.get("type"))):
        if key in _STATUS_OF_TYPE:
            return _STATUS_OF_TYPE[key]
    return 500  # an unknown error inside an answer is the provider's problem


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
        return {"message": json.dumps(parsed["detail"])[:_MESSAGE_LIMIT]}
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
