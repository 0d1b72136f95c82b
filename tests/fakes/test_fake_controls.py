"""Choosing the fault per request: scripts, schedules, the model-name suffix, the header;
latency; the call log; the /_fake/ control endpoints; running the server from sync code."""

from __future__ import annotations

import json
import random
import statistics
import time

import httpx
import pytest
from helpers.wire import AN_HEADERS, an_body

from simulations.fakes import FakeApp, FakeProviders, FakeTransport
from simulations.fakes.app import Incoming
from simulations.fakes.control import Latency


async def statuses(backend, n: int, model: str = "claude-test") -> list[int]:
    return [(await backend.anthropic(model=model)).status_code for _ in range(n)]


async def test_a_script_is_consumed_one_fault_per_request_then_the_default(backend):
    backend.fake.script("claude-test", ["529", "500", "ok", "429"])
    assert await statuses(backend, 6) == [529, 500, 200, 429, 200, 200]


async def test_a_model_script_wins_over_the_any_model_script(backend):
    backend.fake.script("*", ["bad_gateway", "bad_gateway"])
    backend.fake.script("claude-a", ["401"])
    assert await statuses(backend, 2, "claude-a") == [401, 502]
    assert await statuses(backend, 2, "claude-b") == [502, 200]


async def test_a_cycled_script_repeats(backend):
    backend.fake.script("*", ["529", "ok"], cycle=True)
    assert await statuses(backend, 5) == [529, 200, 529, 200, 529]


async def test_the_default_fault_applies_when_nothing_else_does(backend):
    backend.fake.set_default("overloaded")
    assert await statuses(backend, 2) == [529, 529]


async def test_the_model_name_can_carry_the_fault_and_the_answer_names_the_bare_model(backend):
    assert (await backend.anthropic(model="claude-x#overloaded")).status_code == 529
    ok = await backend.anthropic(model="claude-x#ok:text=fine")
    assert ok.json()["model"] == "claude-x" and ok.json()["content"][0]["text"] == "fine"
    assert [c.model for c in backend.fake.calls()] == ["claude-x", "claude-x"]


async def test_the_header_wins_over_the_model_name_and_the_script(backend):
    backend.fake.script("*", ["500"])
    response = await backend.anthropic(model="claude-x#529", fault="403")
    assert response.status_code == 403
    assert backend.fake.calls()[0].source == "header"


async def test_an_outage_window_starts_and_ends_on_the_injected_clock(backend):
    backend.fake.schedule("claude-test", windows=[{"start_s": 10, "end_s": 20, "fault": "529"}])
    assert await statuses(backend, 1) == [200]
    backend.clock.advance(10)
    assert await statuses(backend, 2) == [529, 529]
    backend.clock.advance(10)
    assert await statuses(backend, 1) == [200]
    assert [c.source for c in backend.fake.calls()] == [
        "default",
        "schedule",
        "schedule",
        "default",
    ]


async def test_flapping_goes_down_for_part_of_every_period(backend):
    backend.fake.schedule(flapping={"period_s": 10, "down_s": 3, "fault": "503"})
    seen = []
    for _ in range(4):
        seen += await statuses(backend, 1)
        backend.clock.advance(4)
    assert seen == [503, 200, 200, 503]  # t = 0, 4, 8, 12


async def test_a_window_rate_fails_only_that_share_of_requests(backend):
    backend.fake.schedule(windows=[{"start_s": 0, "end_s": 60, "fault": "500", "rate": 0.5}])
    failed = (await statuses(backend, 60)).count(500)
    assert 15 < failed < 45


async def test_a_script_outlives_a_schedule(backend):
    backend.fake.schedule(windows=[{"start_s": 0, "end_s": 60, "fault": "529"}])
    backend.fake.script("*", ["401"])
    assert await statuses(backend, 2) == [401, 529]


async def test_the_log_records_each_call_and_which_were_paid(backend):
    backend.fake.script("*", ["ok", "529"])
    first = await backend.anthropic()
    await backend.openai()
    calls = backend.fake.calls()
    assert [(c.dialect, c.fault, c.status, c.paid) for c in calls] == [
        ("anthropic", "ok", 200, True),
        ("openai", "overloaded", 503, False),
    ]
    assert calls[0].request_id == first.headers["request-id"]
    assert (
        calls[0].usage["input_tokens"] > 0 and calls[0].request["messages"][0]["content"] == "hello"
    )
    assert [c.model for c in backend.fake.calls(model="gpt-test")] == ["gpt-test"]


async def test_control_endpoints_script_schedule_log_and_reset(backend):
    client = backend.client
    posted = await client.post(
        "/_fake/script", json={"model": "claude-test", "faults": ["529", {"fault": "429"}]}
    )
    assert posted.json()["queued"] == ["overloaded", "rate_limit"]
    assert await statuses(backend, 3) == [529, 429, 200]
    log = (await client.get("/_fake/log", params={"model": "claude-test"})).json()
    assert [(c["status"], c["fault"]) for c in log] == [
        (529, "overloaded"),
        (429, "rate_limit"),
        (200, "ok"),
    ]
    assert (await client.get("/_fake/health")).json() == {"status": "ok", "calls": 3}
    await client.post(
        "/_fake/schedule", json={"windows": [{"start_s": 0, "end_s": 5, "fault": "500"}]}
    )
    assert await statuses(backend, 1) == [500]
    assert (await client.post("/_fake/reset")).status_code == 200
    assert (await client.get("/_fake/log")).json() == []
    assert await statuses(backend, 1) == [200]


async def test_control_endpoints_refuse_bad_input(backend):
    assert (
        await backend.client.post("/_fake/script", json={"faults": ["nope"]})
    ).status_code == 400
    assert (await backend.client.post("/_fake/nothing")).status_code == 404
    faults = (await backend.client.get("/_fake/faults")).json()
    assert {f["row"] for f in faults} >= set(range(1, 27))


async def test_unknown_paths_are_404(backend):
    assert (await backend.client.post("/v1/completions", json={})).status_code == 404


async def test_fixed_latency_delays_the_headers(realtime):
    realtime.fake.latency("claude-test", fixed_ms=60)
    started = time.monotonic()
    await realtime.anthropic()
    assert time.monotonic() - started >= 0.06
    started = time.monotonic()
    await realtime.openai()
    assert time.monotonic() - started < 0.06


def test_lognormal_latency_has_the_asked_median_and_p99():
    rng, latency = random.Random(1), Latency(median_s=0.3, p99_s=2.0)
    samples = sorted(latency.sample(rng) for _ in range(20_000))
    assert statistics.median(samples) == pytest.approx(0.3, rel=0.05)
    assert samples[int(0.99 * len(samples))] == pytest.approx(2.0, rel=0.1)


def test_the_server_runs_in_a_thread_for_sync_callers():
    with FakeProviders.start_in_thread() as fake:
        fake.script("*", ["529"])
        with httpx.Client(base_url=fake.anthropic_url) as client:
            codes = [
                client.post("/v1/messages", headers=AN_HEADERS, json=an_body()).status_code
                for _ in range(2)
            ]
        assert codes == [529, 200]
        assert len(fake.calls()) == 2
        assert fake.openai_url == fake.base_url + "/v1"


NEW_FAULTS = {  # the faults of issue 20, each with a spec that sets its parameters
    "late_first_token": "late_first_token:delay=20",
    "no_done": "no_done:close=clean",
    "prefill_rejected": "prefill_rejected",
    "stream_stall": "stream_stall:after_events=4",
    "bad_event": "bad_event:after_events=9,count=1,words=120",
    "context_overflow": "context_overflow:window=8000,tokens=9000",
    "read_timeout": "read_timeout",
}


def _choose_by(route: str, spec: str) -> tuple[FakeApp, dict[str, str], str]:
    """A fresh app, the request headers and the model name that select `spec` by `route`."""
    app, headers, model = FakeApp(), dict(AN_HEADERS), "claude-test"
    if route == "header":
        headers["x-fake-fault"] = spec
    elif route == "model":
        model = f"claude-test#{spec}"
    elif route == "script":
        app.controls.script("claude-test", [spec])
    elif route == "transport_script":
        app = FakeTransport(script=[spec]).app
    elif route == "schedule":
        app.controls.schedule(windows=[{"start_s": 0, "end_s": 60, "fault": spec}])
    else:
        app.configure(default_fault=spec)
    return app, headers, model


@pytest.mark.parametrize("name", NEW_FAULTS)
@pytest.mark.parametrize(
    ("route", "source"),
    [("header", "header"), ("model", "model"), ("script", "script"),
     ("transport_script", "script"), ("schedule", "schedule"), ("default", "default")],
)  # fmt: skip
def test_each_new_fault_is_chosen_by_every_route(name, route, source):
    app, headers, model = _choose_by(route, NEW_FAULTS[name])
    body = {**an_body(stream=True), "model": model}
    body["messages"] = [*body["messages"], {"role": "assistant", "content": "echo:"}]
    reply = app.handle(Incoming("POST", "/v1/messages", headers, json.dumps(body).encode()))
    (call,) = app.calls()
    assert (call.fault, call.source) == (NEW_FAULTS[name], source)
    assert reply.status == (400 if name in ("prefill_rejected", "context_overflow") else 200)


async def test_the_fault_list_describes_each_new_fault(backend):
    listed = {f["name"]: f for f in (await backend.client.get("/_fake/faults")).json()}
    assert {n: (listed[n]["row"], listed[n]["decision"]) for n in NEW_FAULTS} == {
        "late_first_token": (16, "ambiguous"),
        "no_done": (21, "ok"),
        "prefill_rejected": (21, "fail_fast"),
        "stream_stall": (23, "retry_then_fall_back"),
        "bad_event": (26, "ok"),
        "context_overflow": (2, "fail_fast"),
        "read_timeout": (16, "ambiguous"),
    }
    assert listed["late_first_token"]["defaults"] == {"delay": 30.0}
    assert listed["stream_stall"]["defaults"] == {"after_events": 1}
    assert listed["read_timeout"]["defaults"] == {"delay": "inf"}
    assert all(listed[n]["summary"] for n in NEW_FAULTS)
