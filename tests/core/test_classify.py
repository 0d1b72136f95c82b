"""The classifier against every row of shared/reference/fault-catalogue.md, in both dialects."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from engine.core import classify
from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    Decision,
    ProviderFault,
    RateLimited,
    RequestFault,
)
from engine.providers.transport_faults import classify_exception
from simulations.fakes import anthropic as fake_anthropic
from simulations.fakes import openai as fake_openai
from simulations.fakes.faults import CATALOGUE, ErrorShape
from simulations.fakes.pages import CLOUDFLARE
from simulations.fakes.render import error_reply

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def an(error_type: str, message: str = "x", **extra: object) -> bytes:
    error = {"type": error_type, "message": message, **extra}
    return json.dumps({"type": "error", "error": error, "request_id": "req_1"}).encode()


def oa(message: str = "x", type_: str | None = None, code: str | None = None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode()


HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"

# (catalogue row, status, body, expected class, expected error_class)
HTTP_ROWS = [
    (
        1,
        400,
        an("invalid_request_error", "messages: field required"),
        RequestFault,
        "invalid_request",
    ),
    (1, 400, oa("Invalid 'messages'", "invalid_request_error"), RequestFault, "invalid_request"),
    (
        2,
        400,
        an("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
        RequestFault,
        "context_overflow",
    ),
    (
        2,
        400,
        oa(
            "This model's maximum context length is 8192 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        RequestFault,
        "context_overflow",
    ),
    (
        2,
        400,
        oa("This model's maximum context length is 65536 tokens", None, "invalid_request_error"),
        RequestFault,
        "context_overflow",
    ),
    (3, 413, b"Request Entity Too Large", RequestFault, "too_large"),
    (
        3,
        413,
        an("request_too_large", "Request exceeds the maximum size"),
        RequestFault,
        "too_large",
    ),
    (
        3,
        422,
        json.dumps({"detail": [{"msg": "field required"}]}).encode(),
        RequestFault,
        "unprocessable",
    ),
    (
        4,
        400,
        oa("The response was filtered", "invalid_request_error", "content_filter"),
        RequestFault,
        "content_policy",
    ),
    (
        4,
        400,
        oa("Your request was rejected by our safety system", None, "content_policy_violation"),
        RequestFault,
        "content_policy",
    ),
    (5, 401, an("authentication_error", "invalid x-api-key"), AccountFault, "authentication"),
    (
        5,
        401,
        oa("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
        AccountFault,
        "authentication",
    ),
    (6, 403, an("permission_error", "not allowed"), AccountFault, "permission"),
    (
        6,
        403,
        oa(
            "Country, region, or territory not supported",
            None,
            "unsupported_country_region_territory",
        ),
        AccountFault,
        "permission",
    ),
    (6, 404, an("not_found_error", "model: claude-x"), AccountFault, "model_not_found"),
    (
        6,
        404,
        oa("The model `gpt-x` does not exist", "invalid_request_error", "model_not_found"),
        AccountFault,
        "model_not_found",
    ),
    (
        7,
        429,
        oa("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
        AccountFault,
        "quota",
    ),
    (
        7,
        429,
        an(
            "rate_limit_error",
            "Request rejected",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
        AccountFault,
        "quota",
    ),
    (
        7,
        400,
        an("invalid_request_error", "Your credit balance is too low to access the API"),
        AccountFault,
        "spend_limit",
    ),
    (
        7,
        400,
        an("invalid_request_error", "You have reached your specified API usage limits."),
        AccountFault,
        "spend_limit",
    ),
    (7, 402, an("billing_error", "payment required"), AccountFault, "billing"),
    (
        8,
        429,
        an("rate_limit_error", "Number of request tokens has exceeded your rate limit"),
        RateLimited,
        "rate_limit",
    ),
    (
        8,
        429,
        oa("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
        RateLimited,
        "rate_limit",
    ),
    (9, 429, oa("Slow down", None, "slow_down"), RateLimited, "slow_down"),
    (
        9,
        429,
        an("rate_limit_error", "acceleration limit exceeded; ramp up gradually"),
        RateLimited,
        "slow_down",
    ),
    (10, 500, an("api_error", "Internal server error"), ProviderFault, "server_error"),
    (
        10,
        500,
        oa("The server had an error while processing your request", "server_error"),
        ProviderFault,
        "server_error",
    ),
    (11, 502, HTML, ProviderFault, "unavailable"),
    (11, 503, b"<html><body>Service Unavailable</body></html>", ProviderFault, "unavailable"),
    (11, 520, b"<html>cloudflare 520</html>", ProviderFault, "unavailable"),
    (11, 524, b"<html>A timeout occurred</html>", ProviderFault, "unavailable"),
    (
        11,
        503,
        oa("The engine is currently overloaded", "server_error"),
        ProviderFault,
        "overloaded",
    ),
    (12, 529, an("overloaded_error", "Overloaded"), ProviderFault, "overloaded"),
    (13, 504, an("timeout_error", "Request timed out"), ProviderFault, "timeout"),
    (13, 504, b"<html>Gateway Timeout</html>", ProviderFault, "timeout"),
]


@pytest.mark.parametrize(
    ("row", "status", "body", "expected", "error_class"),
    HTTP_ROWS,
    ids=[f"row{r[0]}-{r[1]}-{r[4]}-{i}" for i, r in enumerate(HTTP_ROWS)],
)
def test_every_http_fault_row_maps_to_its_decision(row, status, body, expected, error_class):
    error = classify.classify_response(status, {}, body, now=NOW)
    assert type(error) is expected
    assert error.error_class == error_class
    assert error.status == status


def test_a_504_is_not_retried_on_the_same_target():
    error = classify.classify_response(504, {}, an("timeout_error"), now=NOW)
    assert error.decision is Decision.RETRY_THEN_FALL_BACK
    assert error.retry_same is False


def test_html_error_pages_yield_their_title_as_the_message():
    error = classify.classify_response(502, {}, HTML, now=NOW)
    assert "502 Bad Gateway" in error.message


def test_provider_error_fields_and_request_id_are_kept():
    error = classify.classify_response(
        404, {"request-id": "req_abc"}, an("not_found_error", "model: x"), now=NOW
    )
    assert (error.error_type, error.message, error.provider_request_id) == (
        "not_found_error",
        "model: x",
        "req_abc",
    )


# --- row 8: how a 429 tells its reset ------------------------------------------------------

RESET_CASES = [
    ("a: seconds", {"retry-after": "3"}, 3.0),
    (
        "b: http-date",
        {"retry-after": format_datetime(NOW + timedelta(seconds=5), usegmt=True)},
        5.0,
    ),
    ("c: retry-after-ms", {"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
    (
        "d: anthropic reset",
        {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": (NOW + timedelta(seconds=30)).isoformat(),
            "anthropic-ratelimit-tokens-remaining": "5000",
            "anthropic-ratelimit-tokens-reset": (NOW + timedelta(seconds=50)).isoformat(),
        },
        30.0,
    ),
    (
        "d: openai duration",
        {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-remaining-tokens": "100",
            "x-ratelimit-reset-tokens": "12ms",
        },
        360.0,
    ),
    ("e: an hour", {"retry-after": "3600"}, 3600.0),
    ("f: garbage", {"retry-after": "soon-ish"}, None),
    ("f: past date", {"retry-after": format_datetime(NOW - timedelta(hours=1), usegmt=True)}, None),
    ("f: absurd", {"retry-after": "99999999"}, None),
    ("none at all", {}, None),
]


@pytest.mark.parametrize(
    ("case", "headers", "seconds"), RESET_CASES, ids=[c[0] for c in RESET_CASES]
)
def test_rate_limit_reset_is_read_from_every_header_style(case, headers, seconds):
    error = classify.classify_response(429, headers, an("rate_limit_error"), now=NOW)
    assert isinstance(error, RateLimited)
    assert error.retry_after_s == pytest.approx(seconds) if seconds else error.retry_after_s is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6m0s", 360.0), ("1s", 1.0), ("12ms", 0.012), ("1h2m3.5s", 3723.5), ("7", None), ("", None)],
)
def test_go_durations_parse_or_are_rejected(text, seconds):
    assert classify.parse_go_duration(text) == (pytest.approx(seconds) if seconds else None)


# --- rows 14-19: transport and body faults ---------------------------------------------------

REQUEST = httpx.Request("POST", "https://api.example/v1/messages")
EXCEPTION_ROWS = [
    (
        14,
        httpx.ConnectError("connection refused", request=REQUEST),
        False,
        ProviderFault,
        "connect",
    ),
    (
        14,
        httpx.ConnectTimeout("connect timed out", request=REQUEST),
        False,
        ProviderFault,
        "connect",
    ),
    (
        14,
        httpx.ConnectError("[SSL] wrong version number", request=REQUEST),
        False,
        ProviderFault,
        "connect",
    ),
    (
        15,
        httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=REQUEST
        ),
        True,
        AmbiguousFault,
        "reset",
    ),
    (
        15,
        httpx.ReadError("connection reset by peer", request=REQUEST),
        True,
        AmbiguousFault,
        "reset",
    ),
    (
        16,
        httpx.ReadTimeout("read timed out", request=REQUEST),
        True,
        AmbiguousFault,
        "read_timeout",
    ),
    (16, TimeoutError(), True, AmbiguousFault, "read_timeout"),
]


@pytest.mark.parametrize(
    ("row", "exc", "reached_provider", "expected", "error_class"),
    EXCEPTION_ROWS,
    ids=[f"row{r[0]}-{type(r[1]).__name__}" for r in EXCEPTION_ROWS],
)
def test_transport_failures_map_to_their_decision(
    row, exc, reached_provider, expected, error_class
):
    error = classify_exception(exc, sent=True)
    assert type(error) is expected
    assert error.error_class == error_class
    assert error.sent is reached_provider


@pytest.mark.parametrize("kind", ["truncated", "invalid_json", "not_json", "empty"])
def test_unusable_200_answers_are_ambiguous(kind):
    """Rows 17-19: the provider may have done (and billed) the work; retry once, then move."""
    error = classify.protocol_fault(kind, "bad body")
    assert isinstance(error, AmbiguousFault)
    assert error.decision is Decision.AMBIGUOUS


# --- rows 20-23: errors inside 200 bodies and streams ----------------------------------------

EMBEDDED_ROWS = [
    (
        20,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ProviderFault,
        "overloaded",
    ),
    (
        20,
        {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}},
        AccountFault,
        "quota",
    ),
    (
        20,
        {"error": {"message": "bad", "type": "invalid_request_error"}},
        RequestFault,
        "invalid_request",
    ),
    (20, {"error": {"message": "upstream failed", "code": 502}}, ProviderFault, "unavailable"),
    (20, {"error": "model is loading"}, ProviderFault, "server_error"),
    (
        22,
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
        ProviderFault,
        "server_error",
    ),
    (
        22,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
        RateLimited,
        "rate_limit",
    ),
    (
        22,
        {"error": {"message": "The server had an error", "type": "server_error"}},
        ProviderFault,
        "server_error",
    ),
]


@pytest.mark.parametrize(
    ("row", "body", "expected", "error_class"),
    EMBEDDED_ROWS,
    ids=[f"row{r[0]}-{r[3]}-{i}" for i, r in enumerate(EMBEDDED_ROWS)],
)
def test_error_objects_in_200s_and_streams_are_classified_by_their_type(
    row, body, expected, error_class
):
    inner = classify.embedded_error(body)
    assert inner is not None
    error = classify.error_from_object(inner, status=200, headers={}, now=NOW)
    assert type(error) is expected
    assert error.error_class == error_class


@pytest.mark.parametrize(
    "body",
    [
        {"id": "msg_1", "type": "message", "content": []},
        {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3}},
        {"error": None},
        [1, 2],
    ],
)
def test_ordinary_bodies_are_not_error_objects(body):
    assert classify.embedded_error(body) is None


@pytest.mark.parametrize("kind", ["stream_cut", "stream_stalled"])
def test_broken_streams_are_provider_faults(kind):
    """Rows 21 and 23: before the first content the chain falls back transparently."""
    assert isinstance(classify.stream_fault(kind, "x", status=200), ProviderFault)


def test_a_stream_fault_without_a_status_line_has_no_status():
    """A stream that stalled before its headers is recorded with no HTTP status, not 200."""
    assert classify.stream_fault("stream_stalled", "x", status=None).status is None
    assert classify.stream_fault("stream_cut", "x", status=200).status == 200


def test_the_catalogue_is_covered_row_by_row():
    """Rows 24-25 are adaptations, not faults; every other row has a classification case."""
    covered = {r[0] for r in HTTP_ROWS} | {r[0] for r in EXCEPTION_ROWS}
    covered |= {r[0] for r in EMBEDDED_ROWS} | {17, 18, 19, 21, 23}
    assert covered == set(range(1, 24))


def test_request_faults_and_rate_limits_never_count_on_the_breaker():
    assert RequestFault("x").counts_on_breaker is False
    assert RateLimited("x").counts_on_breaker is False
    assert all(c("x").counts_on_breaker for c in (ProviderFault, AccountFault, AmbiguousFault))


# --- the status table, against the fault catalogue the fakes serve --------------------------


def _catalogue_errors() -> list[Any]:
    """Every HTTP error of the fault catalogue (`simulations.fakes.faults`), in each dialect
    that has it, as the fake providers put it on the wire."""
    cases = []
    for fault in CATALOGUE:
        for dialect in (fake_anthropic, fake_openai):
            shape = fault.shape(dialect.NAME)
            if shape is not None:
                cases.append(pytest.param(fault, dialect, shape, id=f"{fault.name}-{dialect.NAME}"))
        if fault.name == "cf_52x":  # a page per status, rendered by status alone
            for status in CLOUDFLARE:
                page = ErrorShape(status, body="html")
                cases.append(pytest.param(fault, fake_anthropic, page, id=f"cf_{status}"))
    return cases


@pytest.mark.parametrize(("fault", "dialect", "shape"), _catalogue_errors())
def test_every_catalogue_error_gets_the_decision_its_row_names(fault, dialect, shape):
    values = {"model": "m", "window": 8192, "tokens": 9000, "retry_after": "3"}
    values["code"] = fault.defaults.get("code")
    filled = dataclasses.replace(
        shape,
        message=shape.message.format(**values),
        code=shape.code.format(**values) if shape.code else None,
    )
    ctx = SimpleNamespace(
        dialect=dialect, request_id="req_1", ids=SimpleNamespace(ray=lambda: "8f0")
    )
    reply = error_reply(ctx, filled)  # type: ignore[arg-type]
    error = classify.classify_response(reply.status, dict(reply.headers), reply.body, now=NOW)
    assert (error.status, error.decision) == (shape.status, fault.decision)


def test_every_status_ends_its_rules_with_one_that_always_applies():
    """A status's word rules refine it; the last one is its meaning when no word matches."""
    tables = [*classify.RULES_BY_STATUS.values()]
    tables += [classify.OTHER_CLIENT_ERROR, classify.OTHER_SERVER_ERROR]
    for rules in tables:
        assert rules[-1].matches("", None), rules
