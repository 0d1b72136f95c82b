"""A route with `first_token_timeout_s = "learned"` through the real gateway, scheduler and
fakes: the streams it served are recorded, the scheduler publishes their first-token latency,
and the next gateway gives up on a stalled primary at the learned limit, not the static one."""

from __future__ import annotations

import time

import httpx

from engine.core.paths import DataPaths
from engine.fallback.learned_limits import FLOOR_S
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeProviders

from .conftest import FAST_POLICY, GatewayFactory, user

STATIC_S = 8.0  # the [policy] limit, the ceiling: 8 s of the 10 s budget's 6.7 before the line
ROUTE = {"support": {"targets": ["claude/primary", "gpt/backup"],
                     "first_token_timeout_s": "learned"}}  # fmt: skip
POLICY = {**FAST_POLICY, "first_token_timeout_s": STATIC_S}


def _stream(url: str, text: str) -> httpx.Response:
    body = {"model": "support", "messages": user(text), "stream": True}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=30)


def test_a_stalled_primary_is_given_up_at_the_limit_its_own_history_taught(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path
):
    paths = DataPaths(tmp_path / "data")
    first = gateway(ROUTE, record_to=paths, policy=POLICY)
    for i in range(120):  # a history of quick first tokens
        assert _stream(first.url, f"question {i}").status_code == 200
    first.stop_and_ingest(paths)
    pipeline = Pipeline(paths)
    try:
        assert pipeline.traffic_profile(), "the target latency is published"
    finally:
        pipeline.close()

    second = gateway(ROUTE, record_to=paths, policy=POLICY)
    limits = second.sw.first_token_limits
    deadline = time.monotonic() + 30
    while limits.get("claude/primary") is None:  # read at start, off the event loop
        assert time.monotonic() < deadline, "the gateway never read the learned limits"
        time.sleep(0.05)
    learned = limits.get("claude/primary")
    assert learned.streams == 120 and learned.limit_s == FLOOR_S

    fake.script("primary", ["late_first_token:delay=7"])
    began = time.monotonic()
    answer = _stream(second.url, "where is my order?")
    took = time.monotonic() - began
    assert answer.status_code == 200 and '"model":"backup"' in answer.text.replace(" ", "")
    primary = next(a for a in second.attempts if a.target == "claude/primary")
    assert primary.decision == "fall_back"
    assert FLOOR_S * 1000 <= primary.latency_ms < FLOOR_S * 1000 + 500, "a real clock's wait"
    assert took < STATIC_S - 1, f"given up at {FLOOR_S:g} s, not the static {STATIC_S:g} s"
