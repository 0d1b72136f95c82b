"""The gateway over real HTTP: headers, streams held until the first content, in-band errors,
auth, limits, the operational endpoints, and no provider key ever in an answer or a log."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest

from engine.core.paths import DataPaths
from simulations.fakes import FakeProviders

from .conftest import GATEWAY_KEY, PROVIDER_KEYS, GatewayFactory, paid_calls, user

OPENAI_PATH, ANTHROPIC_PATH = "/v1/chat/completions", "/v1/messages"


def body(model: str, text: str = "Where is my order?", **extra: object) -> dict[str, object]:
    return {"model": model, "max_tokens": 64, "messages": user(text), **extra}


def sse_data(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def assert_error_shape(response: httpx.Response, path: str) -> dict:
    assert response.headers["content-type"] == "application/json"
    error = response.json()
    if path == ANTHROPIC_PATH:
        assert error["type"] == "error" and error["request_id"] == response.headers["request-id"]
        assert isinstance(error["error"]["type"], str)
    else:
        assert response.headers["x-request-id"].startswith("req_")
        assert set(error["error"]) == {"message", "type", "param", "code"}
    return error["error"]


# --- headers -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_an_answer_says_who_served_it(gateway: GatewayFactory, path: str):
    gw = gateway({"support": ["claude/primary#529", "gpt/backup"]})
    response = httpx.post(gw.url + path, json=body("support"))
    assert response.status_code == 200
    headers = response.headers
    assert headers["x-switchover-route"] == "support"
    assert (headers["x-switchover-provider"], headers["x-switchover-model"]) == ("gpt", "backup")
    assert (headers["x-switchover-attempts"], headers["x-switchover-fallback"]) == ("3", "true")
    id_header = "request-id" if path == ANTHROPIC_PATH else "x-request-id"
    assert headers[id_header].startswith("req_")
    assert {a.request_id for a in gw.attempts} == {headers[id_header]}, "one id, end to end"


def test_a_target_a_route_lists_can_be_named_alone(gateway: GatewayFactory):
    gw = gateway({"support": ["claude/a", "gpt/direct"]})
    response = httpx.post(gw.url + ANTHROPIC_PATH, json=body("gpt/direct"))
    assert response.status_code == 200 and response.json()["model"] == "direct"
    assert response.headers["x-switchover-route"] == "direct"


# --- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_a_stream_is_held_until_the_first_content(
    gateway: GatewayFactory, fake: FakeProviders, path: str
):
    """The primary's stream dies before any content: the caller sees one clean stream, the
    backup's, and nothing of the primary's."""
    gw = gateway({"support": ["claude/primary#stream_cut:after_events=1", "gpt/backup"]})
    response = httpx.post(gw.url + path, json=body("support", "hello there", stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-switchover-model"] == "backup"
    assert response.headers["x-switchover-fallback"] == "true"
    data = sse_data(response.text)
    if path == OPENAI_PATH:
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    else:
        events = [json.loads(d) for d in data]
        assert events[0]["message"]["model"] == "backup" and events[-1]["type"] == "message_stop"
        text = "".join(e["delta"].get("text", "") for e in events if "delta" in e)
    assert text == "echo: hello there"
    assert paid_calls(fake, "primary") == 2 and paid_calls(fake, "backup") == 1


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_a_failure_after_the_first_content_is_reported_in_band(
    gateway: GatewayFactory, fake: FakeProviders, path: str
):
    gw = gateway({"support": ["claude/primary#stream_cut:after_events=6", "gpt/backup"]})
    ask = body("support", "a question long enough to stream in pieces", stream=True)
    response = httpx.post(gw.url + path, json=ask)  # a clean end: httpx raises on a cut
    assert response.status_code == 200
    data = sse_data(response.text)
    last = json.loads(data[-1])
    if path == OPENAI_PATH:
        assert "[DONE]" not in data
        assert any(json.loads(d).get("choices") for d in data[:-1]), "content came first"
        assert last["error"]["code"] == "stream_cut"
    else:
        assert "event: error" in response.text and "message_stop" not in response.text
        assert last["type"] == "error" and last["error"]["type"] == "api_error"
    assert paid_calls(fake, "backup") == 0


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_a_stream_that_fails_everywhere_before_content_is_a_typed_http_error(
    gateway: GatewayFactory, path: str
):
    gw = gateway({"support": ["claude/primary#529", "gpt/backup#529"]})
    response = httpx.post(gw.url + path, json=body("support", stream=True))
    assert response.status_code == (529 if path == ANTHROPIC_PATH else 503)
    assert response.headers["x-should-retry"] == "false"
    error = assert_error_shape(response, path)
    assert "claude/primary#529: overloaded (529)" in error["message"]


def test_a_caller_who_hangs_up_stops_the_stream(gateway: GatewayFactory, fake: FakeProviders):
    fake.latency("slow", token_interval_ms=200)
    gw = gateway({"support": ["claude/slow"]})
    ask = body("support", "one two three four five six seven eight nine ten", stream=True)
    with httpx.stream("POST", gw.url + ANTHROPIC_PATH, json=ask) as response:
        for line in response.iter_lines():
            if "text_delta" in line:
                break
    deadline = time.monotonic() + 3
    while not gw.attempts and time.monotonic() < deadline:
        time.sleep(0.02)
    (attempt,) = gw.attempts
    assert (attempt.outcome, attempt.served) == ("cancelled", True)


# --- errors in the caller's dialect --------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_an_unknown_model_is_a_404_naming_the_routes(gateway: GatewayFactory, path: str):
    gw = gateway({"support": ["claude/a"], "cheap": ["gpt/b"]})
    response = httpx.post(gw.url + path, json=body("nope"))
    assert response.status_code == 404
    error = assert_error_shape(response, path)
    assert "cheap, support" in error["message"]
    if path == ANTHROPIC_PATH:
        assert error["type"] == "not_found_error"
    else:
        assert error["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("routes", "path", "status", "kind", "retry"),
    [
        (["claude/a#rate_limit:retry_after=5", "gpt/b#rate_limit:retry_after=7"],
         ANTHROPIC_PATH, 429, "rate_limit_error", ("true", "5")),
        (["claude/a#quota", "gpt/b#quota"], OPENAI_PATH, 429, "insufficient_quota", None),
        (["claude/a#billing", "gpt/b#quota"], ANTHROPIC_PATH, 402, "billing_error", None),
        (["claude/a#auth", "gpt/b#auth"], ANTHROPIC_PATH, 500, "api_error", None),
        (["claude/a#500", "gpt/b#500"], OPENAI_PATH, 500, "server_error", None),
        (["claude/a#context_overflow"], OPENAI_PATH, 400, "invalid_request_error", None),
    ],
)  # fmt: skip
def test_a_failed_chain_answers_with_the_dominant_cause(
    gateway: GatewayFactory, routes, path, status, kind, retry
):
    gw = gateway({"r": routes})
    response = httpx.post(gw.url + path, json=body("r"))
    assert response.status_code == status
    assert assert_error_shape(response, path)["type"] == kind
    should_retry, after = retry or ("false", None)
    assert response.headers["x-should-retry"] == should_retry
    assert response.headers.get("retry-after") == after


def test_an_open_breaker_tells_the_caller_when_to_come_back(gateway: GatewayFactory):
    gw = gateway({"r": {"targets": ["claude/a#529"], "breaker_failures": 1}})
    assert httpx.post(gw.url + ANTHROPIC_PATH, json=body("r")).status_code == 529
    response = httpx.post(gw.url + ANTHROPIC_PATH, json=body("r"))
    assert response.status_code == 529 and response.headers["x-switchover-attempts"] == "0"
    assert response.headers["x-should-retry"] == "true"
    assert 25 <= int(response.headers["retry-after"]) <= 30  # the default 30 s cooldown
    status = httpx.get(gw.url + "/v1/status").json()
    breaker = status["breakers"]["claude/a#529"]
    assert breaker["status"] == "open" and 25 < breaker["open_remaining_s"] <= 30
    assert status["routes"] == [{"name": "r", "targets": ["claude/a#529"], "budget_s": 10}]


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_bad_input_is_a_4xx_in_the_callers_dialect(gateway: GatewayFactory, path: str):
    gw = gateway({"support": ["claude/a"]}, max_body_mb=0.05)
    url = gw.url + path
    cases = [
        (httpx.post(url, content=b"{not json"), 400),
        (httpx.post(url, json={"model": "support", "messages": "hi", "max_tokens": 5}), 400),
        (httpx.post(url, json=[1, 2]), 400),
        (httpx.post(url, content=b"x=1", headers={"content-type": "text/plain"}), 415),
        (httpx.post(url, json=body("support", "x" * 60_000)), 413),
        (httpx.get(url), 405),
    ]
    for response, status in cases:
        assert response.status_code == status, response.text
        assert assert_error_shape(response, path)["message"]
        assert response.headers["x-should-retry"] == "false"


def test_an_unknown_path_is_a_json_404(gateway: GatewayFactory):
    gw = gateway({"support": ["claude/a"]})
    response = httpx.get(gw.url + "/v1/nothing", headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 404
    assert assert_error_shape(response, ANTHROPIC_PATH)["type"] == "not_found_error"


# --- auth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_a_gateway_key_is_required_when_keys_are_set(gateway: GatewayFactory, path: str):
    gw = gateway({"support": ["claude/a"]}, keys=[GATEWAY_KEY, "another-key"])
    url = gw.url + path
    for headers in ({}, {"x-api-key": "wrong"}, {"authorization": "Bearer wrong"}):
        response = httpx.post(url, json=body("support"), headers=headers)
        assert response.status_code == 401
        error = assert_error_shape(response, path)
        assert error["type"] == (
            "authentication_error" if path == ANTHROPIC_PATH else error["type"]
        )
    for headers in ({"x-api-key": GATEWAY_KEY}, {"authorization": f"Bearer {GATEWAY_KEY}"}):
        assert httpx.post(url, json=body("support"), headers=headers).status_code == 200
    assert httpx.get(gw.url + "/v1/models").status_code == 401
    assert httpx.get(gw.url + "/v1/status").status_code == 401
    assert httpx.get(gw.url + "/healthz").status_code == 200


# --- operations ----------------------------------------------------------------------------


def test_metrics_count_requests_attempts_fallbacks_and_breakers(gateway: GatewayFactory, tmp_path):
    gw = gateway({"support": ["claude/primary#529", "gpt/gpt-4o-mini"]},
                 record_to=DataPaths(tmp_path / "data"))  # fmt: skip
    httpx.post(gw.url + OPENAI_PATH, json=body("support"))
    httpx.post(gw.url + ANTHROPIC_PATH, json=body("nope"))
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()  # the cost is the recorder's price, told when it writes
    text = httpx.get(gw.url + "/metrics").text
    expected = [
        'switchover_gateway_requests_total{dialect="openai",outcome="ok",route="support"} 1.0',
        'switchover_gateway_requests_total{dialect="anthropic",outcome="not_found",route="-"} 1.0',
        'switchover_gateway_fallbacks_total{dialect="openai",route="support"} 1.0',
        'switchover_attempts_total{decision="retry",outcome="error",'
        'target="claude/primary#529"} 1.0',
        'switchover_attempts_total{decision="served",outcome="success",'
        'target="gpt/gpt-4o-mini"} 1.0',
        'switchover_breaker_state{target="claude/primary#529"} 0.0',
        "switchover_gateway_request_duration_seconds_bucket",
        "switchover_attempt_duration_seconds_bucket",
    ]
    for line in expected:
        assert line in text
    cost = [line for line in text.splitlines() if line.startswith("switchover_cost_usd_total")]
    assert cost and float(cost[0].split()[-1]) > 0, "gpt-4o-mini is priced by genai-prices"


def test_models_healthz_and_readyz(gateway: GatewayFactory):
    gw = gateway({"support": ["claude/a"], "cheap": ["gpt/b"]})
    models = httpx.get(gw.url + "/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["support", "cheap"]
    assert httpx.get(gw.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(gw.url + "/readyz").status_code == 200
    empty = gateway({})
    assert httpx.get(empty.url + "/readyz").status_code == 503


def test_no_provider_key_in_any_answer_or_log(
    gateway: GatewayFactory, fake: FakeProviders, caplog: pytest.LogCaptureFixture
):
    """Even a provider error that quotes the key comes out without it."""
    caplog.set_level(logging.DEBUG)
    secret = PROVIDER_KEYS["FAKE_OPENAI_KEY"]
    quoting = {"fault": "invalid_request", "message": f"Incorrect API key provided: {secret}"}
    fake.script("leaky", [quoting])
    gw = gateway({"leaky": ["gpt/leaky"], "dead": ["claude/a#auth", "gpt/b#529"]})
    responses = [
        httpx.post(gw.url + ANTHROPIC_PATH, json=body("leaky")),
        httpx.post(gw.url + OPENAI_PATH, json=body("dead")),
        httpx.post(gw.url + OPENAI_PATH, json=body("dead", stream=True)),
        httpx.post(gw.url + OPENAI_PATH, json=body("leaky")),
        httpx.get(gw.url + "/v1/status"),
        httpx.get(gw.url + "/metrics"),
    ]
    assert responses[0].status_code == 400 and "Incorrect API key" in responses[0].text
    for response in responses:
        seen = response.text + json.dumps(dict(response.headers))
        for key in PROVIDER_KEYS.values():
            assert key not in seen
            assert key not in caplog.text


def test_a_caller_who_hangs_up_before_the_first_content_stops_the_chain(
    gateway: GatewayFactory, fake: FakeProviders
):
    fake.latency("slow", fixed_ms=2000)
    gw = gateway({"support": ["claude/slow", "gpt/backup"]})
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(gw.url + ANTHROPIC_PATH, json=body("support", stream=True), timeout=0.3)
    deadline = time.monotonic() + 3
    while not gw.attempts and time.monotonic() < deadline:
        time.sleep(0.02)
    (attempt,) = gw.attempts
    assert (attempt.outcome, attempt.served) == ("cancelled", False)
    assert paid_calls(fake, "backup") == 0


def test_a_gateway_bug_is_a_logged_500_in_the_callers_dialect(
    gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    gw = gateway({"support": ["claude/a"]})

    def broken(model: str) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(gw.sw, "chain", broken)
    response = httpx.post(gw.url + ANTHROPIC_PATH, json=body("support"))
    assert response.status_code == 500 and response.headers["x-should-retry"] == "false"
    assert assert_error_shape(response, ANTHROPIC_PATH)["type"] == "api_error"
    assert "a bug" not in response.text
    assert any(r.exc_info and "a bug" in str(r.exc_info[1]) for r in caplog.records)


def test_the_chain_finishes_before_an_sdk_would_give_up():
    """An SDK that waits 5 s for the head (x-stainless-read-timeout) gets an answer from the
    gateway before then, not a chain still working when it retries."""
    from engine.gateway.httputil import caller_budget_s

    assert caller_budget_s({"x-stainless-read-timeout": "5"}) == 4.0
    assert caller_budget_s({"x-stainless-read-timeout": "600"}) == 599.0
    assert caller_budget_s({}) is None
    for nonsense in ("soon", "0", "-3", "nan", "inf"):
        assert caller_budget_s({"x-stainless-read-timeout": nonsense}) is None
    # A short wait keeps most of itself: a fifth of it, at most a second, is the margin.
    for seconds in (0.5, 1.0, 1.1, 1.25, 3.0):
        budget = caller_budget_s({"x-stainless-read-timeout": str(seconds)})
        assert budget is not None and seconds - 1.0 <= budget < seconds
        assert budget >= 0.8 * seconds - 1e-9


def test_an_sdk_that_waits_just_over_a_second_is_served(gateway: GatewayFactory):
    """Issue 35: a read timeout between 1.0 and 1.25 s left less than an attempt's minimum
    after the gateway's margin, and got an instant 504 with no provider called."""
    gw = gateway({"support": ["claude/a"]})
    response = httpx.post(
        gw.url + ANTHROPIC_PATH,
        json=body("support"),
        headers={"x-stainless-read-timeout": "1.1"},
    )
    assert response.status_code == 200, response.text
