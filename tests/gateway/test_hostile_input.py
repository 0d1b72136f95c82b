"""One caller cannot hurt the others: text no provider can be sent, numbers JSON has no place
for, nesting deep enough to break a parser, and names nobody configured are the caller's
fault, answered 4xx in the caller's dialect before any provider is called, and no breaker
hears of them. Over real HTTP, against the fake providers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from engine.state.breaker import BreakerState
from simulations.fakes import FakeProviders

from .conftest import Gateway, GatewayFactory, paid_calls, user
from .test_app import ANTHROPIC_PATH, OPENAI_PATH, assert_error_shape, body

ROUTES = {"support": ["claude/primary", "gpt/backup"]}


def breakers(gw: Gateway) -> dict[str, BreakerState]:
    """Every breaker the gateway holds (the memory store: plain reads, safe from here)."""
    return asyncio.run(gw.sw.breakers.snapshot_all())


def unharmed(state: BreakerState) -> bool:
    """Closed, with no failure counted and no cooling: as if nothing bad had happened."""
    failures = sum(failed for _, failed, _ in state.recent)
    return (
        state.status == "closed"
        and state.consecutive_failures == 0
        and failures == 0
        and state.cooling_until is None
    )


def post_bytes(gw: Gateway, path: str, raw: bytes) -> httpx.Response:
    return httpx.post(gw.url + path, content=raw, headers={"content-type": "application/json"})


def with_content(path: str, text: str, *, stream: bool = False) -> bytes:
    """A valid body whose user message is `text`, written as UTF-8 with lone surrogates kept
    as the raw bytes a broken client sends (ED A0 80)."""
    payload = body("support", text, stream=stream)
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")


def assert_untouched(gw: Gateway, fake: FakeProviders) -> None:
    assert paid_calls(fake, "primary") == paid_calls(fake, "backup") == 0, "nothing was sent"
    assert gw.attempts == [], "no attempt was made, so none was recorded"
    assert all(unharmed(state) for state in breakers(gw).values())


# --- text that cannot be sent ------------------------------------------------------------

SURROGATE_ESCAPE = r"\ud800"
HOSTILE_BODIES = {
    "message escape": lambda: json.dumps(body("support", "x")).replace(
        '"x"', f'"{SURROGATE_ESCAPE}"'
    ),
    "system escape": lambda: json.dumps({**body("support"), "system": "be brief"}).replace(
        "be brief", SURROGATE_ESCAPE
    ),
    "user escape": lambda: json.dumps({**body("support"), "user": "u"}).replace(
        '"user": "u"', f'"user": "{SURROGATE_ESCAPE}"'
    ),
    "stream escape": lambda: json.dumps(body("support", "x", stream=True)).replace(
        '"x"', f'"{SURROGATE_ESCAPE}"'
    ),
}


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
@pytest.mark.parametrize("case", sorted(HOSTILE_BODIES))
def test_a_lone_surrogate_is_a_400_that_no_breaker_hears_of(
    gateway: GatewayFactory, fake: FakeProviders, path: str, case: str
):
    gw = gateway(ROUTES)
    for _ in range(6):  # the six that used to open every breaker
        response = post_bytes(gw, path, HOSTILE_BODIES[case]().encode())
        assert response.status_code == 400, response.text
        assert "surrogate" in assert_error_shape(response, path)["message"]
    assert_untouched(gw, fake)
    healthy = [httpx.post(gw.url + path, json=body("support")) for _ in range(20)]
    assert [r.status_code for r in healthy] == [200] * 20, "other callers are served"


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_raw_surrogate_bytes_are_a_400(gateway: GatewayFactory, fake: FakeProviders, path: str):
    gw = gateway(ROUTES)
    for stream in (False, True):
        response = post_bytes(gw, path, with_content(path, "broken \ud800 text", stream=stream))
        assert response.status_code == 400
        assert "UTF-8" in assert_error_shape(response, path)["message"]
    assert_untouched(gw, fake)


def history_with_arguments(arguments: str) -> dict[str, Any]:
    """An OpenAI conversation whose earlier tool call carries `arguments` verbatim."""
    return {
        "model": "support",
        "messages": [
            *user("What is the weather in Paris?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    }


def test_nan_in_a_history_tool_call_reaches_each_provider_as_the_callers_text(
    gateway: GatewayFactory, fake: FakeProviders
):
    """`{"a": NaN}` is not JSON: it passes through as the string the model once wrote (the
    rule for any arguments that are not JSON), so neither provider refuses it and the
    primary's breaker hears nothing."""
    gw = gateway({"support": ["claude/primary", "gpt/backup"]})
    for _ in range(3):
        response = httpx.post(gw.url + OPENAI_PATH, json=history_with_arguments('{"a": NaN}'))
        assert response.status_code == 200, response.text
        assert response.headers["x-switchover-model"] == "primary"
    assert {a.decision for a in gw.attempts} == {"served"}
    assert all(unharmed(state) for state in breakers(gw).values())


@pytest.mark.parametrize(
    "arguments", ["[" * 50_000, '{"a":' * 3_000 + "1" + "}" * 3_000, '{"a": "\\ud800"}']
)
def test_tool_arguments_no_provider_could_be_sent_are_a_400_naming_them(
    gateway: GatewayFactory, fake: FakeProviders, arguments: str
):
    gw = gateway(ROUTES)
    response = httpx.post(gw.url + OPENAI_PATH, json=history_with_arguments(arguments))
    assert response.status_code == 400, response.text
    error = assert_error_shape(response, OPENAI_PATH)
    assert error["param"] == "messages[1].tool_calls[0].function.arguments"
    assert_untouched(gw, fake)


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
@pytest.mark.parametrize(
    "extra",
    [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 3_000 + b"1" + b"}" * 3_000, b"NaN", b"1e999"],
    ids=["brackets", "objects", "nan", "overflow"],
)
def test_deep_or_non_finite_bodies_are_a_400(
    gateway: GatewayFactory, fake: FakeProviders, path: str, extra: bytes
):
    gw = gateway(ROUTES)
    raw = json.dumps(body("support")).encode()[:-1] + b', "extra": ' + extra + b"}"
    response = post_bytes(gw, path, raw)
    assert response.status_code == 400, response.text
    assert_error_shape(response, path)
    assert_untouched(gw, fake)


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
@pytest.mark.parametrize("model", ["claude/primary ", " support", "support\t", "claude/prim\x00"])
def test_a_name_with_a_blank_is_a_404_and_nothing_is_paid(
    gateway: GatewayFactory, fake: FakeProviders, path: str, model: str
):
    gw = gateway(ROUTES)
    response = httpx.post(gw.url + path, json=body(model))
    assert response.status_code == 404, response.text
    assert assert_error_shape(response, path)["type"] == (
        "not_found_error" if path == ANTHROPIC_PATH else "invalid_request_error"
    )
    assert_untouched(gw, fake)


def test_a_model_no_route_lists_is_a_404_in_the_callers_dialect(
    gateway: GatewayFactory, fake: FakeProviders
):
    gw = gateway(ROUTES)
    for path in (OPENAI_PATH, ANTHROPIC_PATH):
        response = httpx.post(gw.url + path, json=body("claude/made-up-1"))
        assert response.status_code == 404
        error = assert_error_shape(response, path)
        assert "made-up-1" in error["message"] and "support" in error["message"]
    assert_untouched(gw, fake)


def metric_series(gw: Gateway) -> list[str]:
    text = httpx.get(gw.url + "/metrics").text
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.timeout(300)
def test_three_thousand_invented_names_leave_metrics_and_status_the_size_they_were(
    gateway: GatewayFactory, fake: FakeProviders
):
    gw = gateway(ROUTES)
    httpx.post(gw.url + OPENAI_PATH, json=body("support"))
    before = len(metric_series(gw))
    status_before = len(httpx.get(gw.url + "/v1/status").content)

    async def invent() -> list[int]:
        names = iter(range(3_000))
        statuses: list[int] = []

        async def caller(client: httpx.AsyncClient) -> None:
            for i in names:  # eight callers, each on its own connection, one request at a time
                path = OPENAI_PATH if i % 2 else ANTHROPIC_PATH
                response = await client.post(path, json=body(f"claude/made-up-{i}"))
                statuses.append(response.status_code)

        async with httpx.AsyncClient(base_url=gw.url, timeout=60) as client:
            await asyncio.gather(*(caller(client) for _ in range(8)))
        return statuses

    statuses = asyncio.run(invent())
    assert len(statuses) == 3_000 and set(statuses) == {404}
    after = metric_series(gw)
    # The only new series: the 404s counted under the route "-" (one per dialect), and their
    # durations' histogram.
    assert len(after) - before <= 2 * 20, "no series per invented name"
    assert not [line for line in after if "made-up" in line]
    assert len(httpx.get(gw.url + "/v1/status").content) == status_before
    assert paid_calls(fake, "primary") == 1 and set(breakers(gw)) <= {"claude/primary"}


# --- direct targets, when the configuration allows them ------------------------------------

DIRECT = {"allow_direct_targets": True, "max_direct_models": 3}


def test_direct_targets_are_served_under_one_route_label(
    gateway: GatewayFactory, fake: FakeProviders
):
    gw = gateway(ROUTES, gateway=DIRECT)
    response = httpx.post(gw.url + ANTHROPIC_PATH, json=body("gpt/unlisted"))
    assert response.status_code == 200
    assert response.headers["x-switchover-route"] == "direct"
    assert [a.route for a in gw.attempts] == ["direct"]


def test_direct_models_beyond_the_bound_are_a_404(gateway: GatewayFactory, fake: FakeProviders):
    gw = gateway(ROUTES, gateway=DIRECT)
    statuses = [
        httpx.post(gw.url + OPENAI_PATH, json=body(f"gpt/model-{i}")).status_code for i in range(5)
    ]
    assert statuses == [200, 200, 200, 404, 404]
    again = httpx.post(gw.url + OPENAI_PATH, json=body("gpt/model-0"))
    assert again.status_code == 200, "a model already served stays served"
    assert (
        "max_direct_models"
        in assert_error_shape(
            httpx.post(gw.url + OPENAI_PATH, json=body("gpt/model-9")), OPENAI_PATH
        )["message"]
    )


@pytest.mark.parametrize("path", [OPENAI_PATH, ANTHROPIC_PATH])
def test_a_providers_404_for_a_direct_model_is_the_callers_404_not_a_broken_key(
    gateway: GatewayFactory, fake: FakeProviders, path: str
):
    gw = gateway(ROUTES, gateway=DIRECT)
    events: list[Any] = []
    gw.sw.event_hooks.append(events.append)  # the direct chain, built on first use, gets it
    for _ in range(3):
        response = httpx.post(gw.url + path, json=body("claude/nonexistent#model_not_found"))
        assert response.status_code == 404, response.text
        assert_error_shape(response, path)
    assert {a.decision for a in gw.attempts} == {"fail_fast"}
    assert {a.fault_kind for a in gw.attempts} == {"request"}
    assert events == [], "no credential alert"
    assert all(unharmed(state) for state in breakers(gw).values())


def credential_alerts(gw: Gateway, paths: DataPaths) -> list[tuple]:
    """The credential alerts firing after the scheduler ingested what the gateway recorded."""
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()
    pipeline = Pipeline(paths)
    try:
        pipeline.cycle()
        return pipeline.con.execute(
            "SELECT rule, subject, state FROM alerts WHERE rule LIKE 'credential%'"
        ).fetchall()
    finally:
        pipeline.close()


def test_a_404_for_a_direct_model_raises_no_credential_alert_through_the_scheduler(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path
):
    paths = DataPaths(tmp_path / "data")
    gw = gateway(ROUTES, gateway=DIRECT, record_to=paths)
    for _ in range(3):
        response = httpx.post(gw.url + OPENAI_PATH, json=body("claude/invented#model_not_found"))
        assert response.status_code == 404
    assert credential_alerts(gw, paths) == []


def test_a_404_for_a_configured_model_is_a_credential_alert_through_the_scheduler(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path
):
    """The other side of the line: a model the configuration names and the provider does not
    know is a broken account, which on-call must hear about."""
    paths = DataPaths(tmp_path / "data")
    gw = gateway({"support": ["claude/gone#model_not_found", "gpt/backup"]}, record_to=paths)
    assert httpx.post(gw.url + OPENAI_PATH, json=body("support")).status_code == 200
    assert [state for _, _, state in credential_alerts(gw, paths)] == ["firing"]


def test_the_official_sdk_gets_a_404_for_a_name_with_a_trailing_blank_and_pays_nothing(
    gateway: GatewayFactory, fake: FakeProviders
):
    """It used to be paid for three times: the blank broke the answer's header line, the
    connection closed with no answer, and the SDK retried."""
    import openai

    gw = gateway(ROUTES)
    client = openai.OpenAI(base_url=gw.openai_url, api_key="local", max_retries=2)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="claude/primary ", messages=user())
    assert "claude/primary " in str(caught.value)
    assert_untouched(gw, fake)
