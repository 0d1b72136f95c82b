"""The hard cap, from the caller's side: through the real gateway, the fake providers and known
prices (one output token at $0.01, the fake answering "Fine", one token), a budget of N requests
answers N and refuses every later one of its scope with a 429 in the caller's dialect that the
official SDKs raise at once; once the scheduler has ingested the spool the figure is the same;
a new period lets requests through again."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from helpers.spool import make_attempt, write_table

from engine.alerts.watch import Watch
from engine.core.clock import SystemClock
from engine.core.files import atomic_write
from engine.core.paths import DataPaths
from engine.gateway.budget_guard import BudgetGuard
from engine.runtime.build import build_pricer
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from engine.telemetry import columns as records
from simulations.fakes import FakeProviders

from .conftest import (
    GATEWAY_KEY,
    PROVIDER_KEYS,
    Gateway,
    GatewayFactory,
    config_for,
    paid_calls,
    user,
)

CENT = Decimal("0.01")
# Input is free, an output token costs a cent: each answer ("Fine", one token) costs $0.01.
PRICES = {
    model: {"input_mtok": 0, "output_mtok": 10_000, "source": "test: a cent a token"}
    for model in ("claude/capped", "claude/free", "gpt/capped")
}
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # a Wednesday
OPENAI_PATH, ANTHROPIC_PATH = "/v1/chat/completions", "/v1/messages"
TEAM_A_KEY = "gw-team-a-SECRET-0001"


class MovableClock(SystemClock):
    """Real time, moved by the test: the wall starts at `wall`, and `jump` moves both the wall
    and the monotonic clock ahead (the guard's listing interval runs on the latter)."""

    def __init__(self, wall: datetime) -> None:
        self._offset = wall - datetime.now(UTC)
        self._ahead = 0.0

    def now(self) -> float:
        return time.monotonic() + self._ahead

    def wall(self) -> datetime:
        return datetime.now(UTC) + self._offset + timedelta(seconds=self._ahead)

    def jump(self, seconds: float) -> None:
        self._ahead += seconds


def budget(name: str, amount: Decimal, **scope: str) -> dict[str, Any]:
    return {"name": name, "period": "day", "amount_usd": float(amount), "hard_cap": True, **scope}


def capped_gateway(
    gateway: GatewayFactory,
    fake: FakeProviders,
    budgets: list[dict[str, Any]],
    clock: MovableClock,
    **options: Any,
) -> Gateway:
    for model in ("capped", "free"):
        fake.script(model, ["ok:text=Fine"], cycle=True)
    routes = {"support": ["claude/capped"], "other": ["claude/free"], "gpt": ["gpt/capped"]}
    return gateway(routes, prices=PRICES, budgets=budgets, clock=clock, **options)  # type: ignore[arg-type]


def ask(gw: Gateway, path: str, route: str = "support", **headers: str) -> httpx.Response:
    body = {"model": route, "max_tokens": 20, "messages": user("hi")}
    sent = {"anthropic-version": "2023-06-01", **headers} if path == ANTHROPIC_PATH else headers
    return httpx.post(gw.url + path, json=body, headers=sent, timeout=30)


def guard_of(gw: Gateway) -> BudgetGuard:
    """The gateway's guard, told to wait for its refreshes (a request waits a quarter second at
    most in production; a loaded test machine must not turn that into a race)."""
    app_gateway = gw.server.server.config.app.state.gateway  # type: ignore[attr-defined]
    guard = app_gateway.budgets
    assert isinstance(guard, BudgetGuard)
    guard.refresh_wait_s = 30
    return guard


def refused_count(gw: Gateway) -> float:
    text = httpx.get(gw.url + "/metrics", headers={"x-api-key": GATEWAY_KEY}).text
    found = re.findall(
        r'switchover_gateway_requests_total\{[^}]*outcome="budget_exceeded"[^}]*\} (\S+)', text
    )
    return sum(float(v) for v in found)


def test_each_answer_costs_the_known_price(fake: FakeProviders):
    """The premise of every figure below: one answer of the fake is one output token, $0.01."""
    config = config_for(fake, {"support": ["claude/capped"]}, prices=PRICES)
    fake.script("capped", ["ok:text=Fine"])
    with Switchover(config, environ=PROVIDER_KEYS) as sw:
        (attempt,) = sw.complete_sync("support", "hi").attempts
    assert attempt.output_tokens == 1 and build_pricer(config).price(attempt)[0] == CENT


# --- the cap -------------------------------------------------------------------------------


def test_a_spent_budget_refuses_its_scope_in_both_dialects_and_no_provider_is_called(
    gateway: GatewayFactory, fake: FakeProviders
):
    clock = MovableClock(NOON)
    gw = capped_gateway(gateway, fake, [budget("support-daily", 3 * CENT, route="support")], clock)
    for path in (OPENAI_PATH, ANTHROPIC_PATH, OPENAI_PATH):
        assert ask(gw, path).status_code == 200
    assert paid_calls(fake, "capped") == 3

    openai_refusal = ask(gw, OPENAI_PATH)
    anthropic_refusal = ask(gw, ANTHROPIC_PATH)
    assert openai_refusal.status_code == anthropic_refusal.status_code == 429
    assert paid_calls(fake, "capped") == 3  # no provider asked
    error = openai_refusal.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "budget_exceeded")
    body = anthropic_refusal.json()
    assert (body["type"], body["error"]["type"]) == ("error", "rate_limit_error")
    messages = {openai_refusal: error["message"], anthropic_refusal: body["error"]["message"]}
    for refusal, message in messages.items():
        assert message == (
            "budget support-daily (route support) is spent: $0.03 of $0.03 this day; "
            "it resets at 2026-12-03 00:00 UTC"
        )
        assert refusal.headers["x-should-retry"] == "false"
        until_midnight = 12 * 3600
        assert until_midnight - 60 <= int(refusal.headers["retry-after"]) <= until_midnight
    assert refused_count(gw) == 2
    assert guard_of(gw).spend(guard_of(gw).budgets[0], clock.wall()) == 3 * CENT


def test_other_scopes_are_not_refused(gateway: GatewayFactory, fake: FakeProviders):
    clock = MovableClock(NOON)
    budgets = [budget("support-daily", CENT, route="support"),
               {**budget("other-soft", CENT, route="other"), "hard_cap": False}]  # fmt: skip
    gw = capped_gateway(gateway, fake, budgets, clock)
    assert ask(gw, OPENAI_PATH).status_code == 200
    assert ask(gw, OPENAI_PATH).status_code == 429
    for _ in range(3):  # a budget without a hard cap only alerts; another route is another scope
        assert ask(gw, OPENAI_PATH, route="other").status_code == 200
        assert ask(gw, ANTHROPIC_PATH, route="gpt").status_code == 200


def test_a_budget_on_a_key_label_refuses_only_that_keys_requests(
    gateway: GatewayFactory, fake: FakeProviders
):
    clock = MovableClock(NOON)
    gw = capped_gateway(
        gateway, fake, [budget("team-a-daily", 2 * CENT, key="team-a")], clock,
        keys=[GATEWAY_KEY], key_labels={TEAM_A_KEY: "team-a"},
    )  # fmt: skip
    team_a = {"authorization": f"Bearer {TEAM_A_KEY}"}
    others = {"authorization": f"Bearer {GATEWAY_KEY}"}
    assert ask(gw, OPENAI_PATH, **team_a).status_code == 200
    assert ask(gw, OPENAI_PATH, route="other", **team_a).status_code == 200  # any route
    refused = ask(gw, ANTHROPIC_PATH, **{"x-api-key": TEAM_A_KEY})
    assert refused.status_code == 429
    assert "team-a-daily (key team-a)" in refused.text and TEAM_A_KEY not in refused.text
    for _ in range(3):
        assert ask(gw, OPENAI_PATH, **others).status_code == 200


def test_the_official_sdks_raise_at_once_and_do_not_retry(
    gateway: GatewayFactory, fake: FakeProviders
):
    clock = MovableClock(NOON)
    gw = capped_gateway(gateway, fake, [budget("support-daily", CENT, route="support")], clock,
                        keys=[GATEWAY_KEY])  # fmt: skip
    oa = openai.OpenAI(base_url=gw.openai_url, api_key=GATEWAY_KEY, max_retries=2)
    an = anthropic.Anthropic(base_url=gw.url, api_key=GATEWAY_KEY, max_retries=2)
    assert oa.chat.completions.create(model="support", messages=user("hi")).choices
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError) as oa_refused:
        oa.chat.completions.create(model="support", messages=user("hi"))
    with pytest.raises(anthropic.RateLimitError) as an_refused:
        an.messages.create(model="support", max_tokens=20, messages=user("hi"))
    assert time.monotonic() - started < 5  # no backoff waited (a retry-after of hours)
    assert refused_count(gw) == 2  # one request each: neither SDK retried
    assert oa_refused.value.code == "budget_exceeded"
    assert "support-daily" in str(an_refused.value)
    assert paid_calls(fake, "capped") == 1


def test_a_new_period_lets_requests_through_again(gateway: GatewayFactory, fake: FakeProviders):
    clock = MovableClock(NOON)
    gw = capped_gateway(gateway, fake, [budget("support-daily", 2 * CENT, route="support")], clock)
    assert [ask(gw, OPENAI_PATH).status_code for _ in range(3)] == [200, 200, 429]
    clock.jump(timedelta(hours=12).total_seconds())  # just past midnight: a new day
    assert [ask(gw, ANTHROPIC_PATH).status_code for _ in range(3)] == [200, 200, 429]
    assert "it resets at 2026-12-04 00:00 UTC" in ask(gw, OPENAI_PATH).text


# --- the figure across an ingest -------------------------------------------------------------


def test_after_the_scheduler_ingests_the_figure_is_the_same(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path
):
    """Spent, ingested, published: the store's figure replaces the spool's, nothing counted
    twice nor lost; the gateway goes on refusing."""
    clock = MovableClock(NOON)
    paths = DataPaths(tmp_path / "data")
    budgets = [budget("support-daily", 3 * CENT, route="support")]
    gw = capped_gateway(gateway, fake, budgets, clock, record_to=paths)
    guard = guard_of(gw)
    (capped,) = guard.budgets
    assert [ask(gw, OPENAI_PATH).status_code for _ in range(2)] == [200, 200]
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()  # in a spool file now, not pending: the same figure
    assert guard.spend(capped, clock.wall()) == 2 * CENT

    pipeline = scheduler(paths, gw, clock)
    try:
        pipeline.cycle()  # ingests the spool, writes budgets.json
        assert not list(paths.spool.glob("*.parquet"))
        clock.jump(2)  # past the listing interval: the next request reads the snapshot
        assert ask(gw, ANTHROPIC_PATH).status_code == 200
        assert guard.spend(capped, clock.wall()) == 3 * CENT
        assert ask(gw, OPENAI_PATH).status_code == 429
        gw.sw.recorder.flush()
        pipeline.cycle()
        clock.jump(2)
        assert ask(gw, OPENAI_PATH).status_code == 429  # the store's figure alone now
        assert guard.spend(capped, clock.wall()) == 3 * CENT
        assert paid_calls(fake, "capped") == 3
    finally:
        pipeline.close()


def scheduler(paths: DataPaths, gw: Gateway, clock: MovableClock) -> Pipeline:
    """The scheduler's pipeline on the gateway's configuration and clock."""
    config = gw.sw.config
    watch = Watch(config.alerting, paths)  # the budgets travel with the alerting config
    return Pipeline(paths, build_pricer(config), now=clock.wall, watch=watch)


# --- other workers, the snapshot, and telemetry in trouble -------------------------------------

OTHER_WORKER = "otherhost-999-1700000000000"  # a process name as engine.telemetry.spool makes it


def other_workers_file(paths: DataPaths, seq: int, costs: list[Decimal], at: datetime) -> Path:
    """A spool file of another gateway worker: attempts of route support at `at`, priced."""
    attempts = [
        make_attempt(request_id=f"w2-{seq}-{i}", route="support", started_at=at)
        for i in range(len(costs))
    ]
    rows = [records.to_row(a, cost, "test") for a, cost in zip(attempts, costs, strict=True)]
    return write_table(paths.spool, f"{OTHER_WORKER}-{seq:08d}", records.to_table(rows))


def published(paths: DataPaths, now: datetime, spend: Decimal, ingested: dict[str, int]) -> None:
    """budgets.json as the scheduler writes it (the contract's shape) for support-daily."""
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    end = start + timedelta(days=1)
    document = {
        "version": 1,
        "computed_at": now.isoformat(),
        "ingested": ingested,
        "budgets": [
            {"name": "support-daily", "scope": "route", "value": "support", "period": "day",
             "period_start": start.isoformat(), "period_end": end.isoformat(),
             "amount_usd": "0.03", "spend_usd": str(spend), "hard_cap": True},
        ],
    }  # fmt: skip
    paths.published.mkdir(parents=True, exist_ok=True)
    atomic_write(paths.published / "budgets.json", json.dumps(document), durable=False)


def test_another_workers_spool_counts_until_the_stores_figure_has_it(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    clock = MovableClock(NOON)
    paths = DataPaths(tmp_path / "data")
    budgets = [budget("support-daily", 3 * CENT, route="support")]
    gw = capped_gateway(gateway, fake, budgets, clock, record_to=paths)
    guard = guard_of(gw)
    other_workers_file(paths, 7, [CENT, CENT], clock.wall())
    assert ask(gw, OPENAI_PATH).status_code == 200  # $0.02 spent elsewhere: let through
    assert "no " in caplog.text and "budgets.json yet" in caplog.text  # the store's part unknown
    refused = ask(gw, ANTHROPIC_PATH)
    assert refused.status_code == 429 and "$0.03 of $0.03" in refused.text

    # The scheduler ingests the other worker's file (and deletes it) and publishes its figure.
    (paths.spool / f"{OTHER_WORKER}-00000007.parquet").unlink()
    published(paths, clock.wall(), 2 * CENT, {OTHER_WORKER: 7})
    clock.jump(2)
    refused = ask(gw, OPENAI_PATH)
    assert refused.status_code == 429 and "$0.03 of $0.03" in refused.text
    assert guard.spend(guard.budgets[0], clock.wall()) == 3 * CENT  # not $0.05, not $0.01


def test_broken_telemetry_never_fails_a_request_and_is_logged(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """A garbled snapshot leaves the last good one in use; a spool file that cannot be read
    counts as nothing; either is said once in the log."""
    clock = MovableClock(NOON)
    paths = DataPaths(tmp_path / "data")
    budgets = [budget("support-daily", 3 * CENT, route="support")]
    gw = capped_gateway(gateway, fake, budgets, clock, record_to=paths)
    guard = guard_of(gw)
    published(paths, clock.wall(), 2 * CENT, {})
    assert ask(gw, OPENAI_PATH).status_code == 200
    assert ask(gw, OPENAI_PATH).status_code == 429

    (paths.published / "budgets.json").write_text('{"version": 1, "budg')
    paths.spool.mkdir(parents=True, exist_ok=True)
    (paths.spool / f"{OTHER_WORKER}-00000009.parquet").write_bytes(b"not parquet")
    clock.jump(2)
    assert ask(gw, ANTHROPIC_PATH).status_code == 429  # still $0.02 + $0.01
    assert guard.spend(guard.budgets[0], clock.wall()) == 3 * CENT
    assert "cannot read" in caplog.text and "budgets.json" in caplog.text
    assert f"{OTHER_WORKER}-00000009.parquet" in caplog.text
    assert ask(gw, OPENAI_PATH, route="other").status_code == 200
