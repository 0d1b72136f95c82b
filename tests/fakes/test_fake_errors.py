"""HTTP error faults, in both dialects, over the socket server and the in-process transport."""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import pytest

REQUEST_ID = {"anthropic": "request-id", "openai": "x-request-id"}

# fault, dialect → status, error type, code (OpenAI only)
ERRORS = [
    ("invalid_request", "anthropic", 400, "invalid_request_error", None),
    ("invalid_request", "openai", 400, "invalid_request_error", "string_below_min_length"),
    ("context_overflow", "openai", 400, "invalid_request_error", "context_length_exceeded"),
    ("context_overflow_compat", "openai", 400, "invalid_request_error", "invalid_request_error"),
    ("content_policy", "anthropic", 400, "invalid_request_error", None),
    ("content_policy", "openai", 400, "invalid_request_error", "content_policy_violation"),
    ("auth", "anthropic", 401, "authentication_error", None),
    ("auth", "openai", 401, "invalid_request_error", "invalid_api_key"),
    ("permission", "anthropic", 403, "permission_error", None),
    ("permission", "openai", 403, "request_forbidden", "unsupported_country_region_territory"),
    ("model_not_found", "anthropic", 404, "not_found_error", None),
    ("model_not_found", "openai", 404, "invalid_request_error", "model_not_found"),
    ("quota", "anthropic", 429, "rate_limit_error", None),
    ("quota", "openai", 429, "insufficient_quota", "insufficient_quota"),
    ("spend_limit", "anthropic", 400, "invalid_request_error", None),
    ("spend_limit", "openai", 429, "insufficient_quota", "insufficient_quota"),
    ("billing", "anthropic", 402, "billing_error", None),
    ("billing", "openai", 402, "billing_error", "insufficient_credits"),
    ("rate_limit", "anthropic", 429, "rate_limit_error", None),
    ("rate_limit", "openai", 429, "requests", "rate_limit_exceeded"),
    ("slow_down", "anthropic", 429, "rate_limit_error", None),
    ("slow_down", "openai", 429, "slow_down", "slow_down"),
    ("server_error", "anthropic", 500, "api_error", None),
    ("server_error", "openai", 500, "server_error", None),
    ("overloaded", "anthropic", 529, "overloaded_error", None),
    ("overloaded", "openai", 503, "service_unavailable_error", "server_is_overloaded"),
    ("timeout_504:delay=0", "anthropic", 504, "timeout_error", None),
    ("too_large:body=json", "anthropic", 413, "request_too_large", None),
]


@pytest.mark.parametrize(("fault", "dialect", "status", "error_type", "code"), ERRORS)
async def test_error_faults_answer_with_the_dialects_status_and_error_body(
    backend, fault, dialect, status, error_type, code
):
    response = await backend.call(dialect, fault)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    request_id = response.headers[REQUEST_ID[dialect]]
    body = response.json()
    if dialect == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == error_type
        assert body["request_id"] == request_id
    else:
        assert set(body["error"]) >= {"message", "type", "param", "code"}
        assert (body["error"]["type"], body["error"]["code"]) == (error_type, code)


async def test_anthropic_monthly_spend_cap_is_a_429_with_an_error_code(backend):
    body = (await backend.anthropic(fault="quota")).json()
    assert body["error"]["details"] == {"error_code": "enforced_spend_limit_reached"}


async def test_context_overflow_says_how_long_the_prompt_was(backend):
    an = (await backend.anthropic(fault="context_overflow:tokens=208310")).json()
    assert an["error"]["message"] == "prompt is too long: 208310 tokens > 200000 maximum"
    oa = (await backend.openai(fault="context_overflow:window=8192,tokens=8227")).json()
    assert "maximum context length is 8192 tokens" in oa["error"]["message"]
    assert oa["error"]["param"] == "messages"


async def test_azure_content_filter_carries_an_innererror(backend):
    body = (await backend.openai(fault="content_policy:code=content_filter")).json()
    assert body["error"]["code"] == "content_filter"
    assert body["error"]["innererror"]["code"] == "ResponsibleAIPolicyViolation"


async def test_anthropic_retryable_errors_say_x_should_retry(backend):
    assert (await backend.anthropic(fault="529")).headers["x-should-retry"] == "true"
    assert "x-should-retry" not in (await backend.anthropic(fault="quota")).headers


async def test_unprocessable_is_a_fastapi_validation_body(backend):
    response = await backend.openai(fault="422")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "messages"]


@pytest.mark.parametrize(
    ("fault", "status", "title"),
    [
        ("bad_gateway", 502, "<title>502 Bad Gateway</title>"),
        ("unavailable", 503, "<title>503 Service Temporarily Unavailable</title>"),
        ("too_large", 413, "<title>413 Request Entity Too Large</title>"),
        ("522", 522, "| 522: Connection timed out</title>"),
        ("cf_52x", 520, "| 520: Web server is returning an unknown error</title>"),
    ],
)
@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_gateway_errors_are_html_pages(backend, dialect, fault, status, title):
    response = await backend.call(dialect, fault)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["server"] == "cloudflare"
    assert title in response.text
    assert REQUEST_ID[dialect] in response.headers


async def test_openai_gateway_timeout_is_an_html_page_after_the_wait(backend):
    response = await backend.openai(fault="timeout_504:delay=0")
    assert response.status_code == 504
    assert "504 Gateway Time-out" in response.text


def _wall(backend) -> datetime:
    return backend.clock.wall()


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_rate_limit_tells_the_wait_in_each_way_the_providers_do(backend, dialect):
    async def headers(fault: str):
        response = await backend.call(dialect, fault)
        assert response.status_code == 429
        return response.headers

    assert (await headers("rate_limit"))["retry-after"] == "3"
    assert (await headers("rate_limit:retry_after=7"))["retry-after"] == "7"
    assert (await headers("rate_limit_long"))["retry-after"] == "3600"
    assert (await headers("rate_limit_garbage"))["retry-after"] == "soon"
    dated = parsedate_to_datetime((await headers("rate_limit_date"))["retry-after"])
    assert abs(dated - (_wall(backend) + timedelta(seconds=3))) < timedelta(seconds=2)
    past = parsedate_to_datetime((await headers("rate_limit_past"))["retry-after"])
    assert past < _wall(backend)
    only_ms = await headers("rate_limit_ms:retry_after=1.5")
    assert only_ms["retry-after-ms"] == "1500" and "retry-after" not in only_ms
    none = await headers("rate_limit_no_header")
    assert not [k for k in none if "retry-after" in k or "reset" in k]


async def test_anthropic_reset_headers_are_rfc3339_only(backend):
    headers = (await backend.anthropic(fault="rate_limit_reset_headers")).headers
    assert "retry-after" not in headers
    reset = datetime.fromisoformat(
        headers["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00")
    )
    assert abs(reset - (_wall(backend) + timedelta(minutes=6))) < timedelta(seconds=2)
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"


async def test_openai_reset_headers_are_go_durations_only(backend):
    headers = (await backend.openai(fault="rate_limit_reset_headers")).headers
    assert "retry-after" not in headers
    assert headers["x-ratelimit-reset-requests"] == "6m0s"
    assert headers["x-ratelimit-remaining-requests"] == "0"


@pytest.mark.parametrize(
    ("type_", "shape", "expected"),
    [
        ("overloaded_error", "anthropic", {"type": "error", "error": {"type": "overloaded_error"}}),
        ("insufficient_quota", "openai", {"error": {"type": "insufficient_quota"}}),
        ("rate_limit", "openai", {"error": {"code": "rate_limit_exceeded"}}),
    ],
)
async def test_error_in_200_embeds_the_named_error_in_either_shape(backend, type_, shape, expected):
    response = await backend.openai(fault=f"error_in_200:type={type_},shape={shape}")
    assert response.status_code == 200
    body = response.json()
    for key, value in expected.items():
        if isinstance(value, dict):
            assert value.items() <= body[key].items()
        else:
            assert body[key] == value


async def test_an_unknown_fault_is_a_400_that_names_it(backend):
    response = await backend.anthropic(fault="no_such_fault")
    assert response.status_code == 400
    assert "no_such_fault" in response.json()["error"]["message"]
