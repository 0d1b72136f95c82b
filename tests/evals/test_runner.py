"""Evals through the real chain and provider adapters, over the in-process fake providers on
virtual time: pass rates are what the fake's answers allow, each target runs on its own."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from engine.config import Config, parse_config
from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.evals import EvalResult, EvalRun, parse_cases, run_eval, write_run
from engine.evals.cases import CaseSet
from engine.runtime.build import build_pricer
from simulations.fakes import FakeTransport

PRIMARY, BACKUP = "claude-sonnet-4-5", "gpt-4.1-mini"
TARGETS = f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n'
PROVIDERS = """
[providers.claude]
kind = "anthropic"
base_url = "http://anthropic.fake"
api_key_env = "K"
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "K"
"""
INTENT = '{ type = "object", required = ["intent"], properties = { intent = { enum = ["refund", "status"] } } }'  # noqa: E501


class Rig:
    def __init__(self, route: str = TARGETS, extra: str = "") -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock, keep_bodies=True)
        self.config: Config = parse_config(
            tomllib.loads(PROVIDERS + extra + "[routes.support]\n" + route)
        )

    def run(self, cases: CaseSet, **options: Any) -> EvalRun:
        return self.clock.run(
            run_eval(
                self.config,
                "support",
                cases,
                transport=self.fake,
                environ={"K": "test-key"},
                clock=self.clock,
                **options,
            )
        )


def cases(n: int, check: str, extra: str = "") -> CaseSet:
    text = extra + "".join(
        f'[[cases]]\nname = "case {i}"\nprompt = "question {i}"\n{check}\n' for i in range(n)
    )
    return parse_cases(tomllib.loads(text), source="cases.toml")


def by_target(run: EvalRun) -> dict[str, Any]:
    return {s.target: s for s in run.summaries()}


def test_pass_rates_are_what_the_fake_answers_allow():
    rig = Rig()
    rig.fake.app.reply_text = '{"intent": "refund"}'
    rig.fake.script(BACKUP, ['ok:text={"intent": "maybe"}'])  # one wrong answer, then good ones
    run = rig.run(cases(4, f"json_schema = {INTENT}"))
    primary, backup = by_target(run)[f"claude/{PRIMARY}"], by_target(run)[f"gpt/{BACKUP}"]
    assert (primary.passed, primary.cases, primary.pass_rate, primary.meets_minimum) == (
        4, 4, 1.0, True,
    )  # fmt: skip
    assert (backup.passed, backup.cases, backup.pass_rate, backup.meets_minimum) == (
        3, 4, 0.75, False,
    )  # fmt: skip
    assert not run.all_meet_minimum and run.min_pass_rate == 0.9 and run.cases == 4
    (failed,) = [r for r in run.results if not r.passed]
    assert failed.target == f"gpt/{BACKUP}" and failed.error is None
    assert failed.reason is not None and failed.reason.startswith("json_schema: schema: $.intent: ")
    assert [r.target for r in run.results] == [f"claude/{PRIMARY}"] * 4 + [f"gpt/{BACKUP}"] * 4


def test_a_case_file_minimum_decides_who_is_below_it():
    rig = Rig()
    rig.fake.script(BACKUP, ["ok:text=nope"])
    run = rig.run(cases(4, 'regex = "^echo: "', extra="min_pass_rate = 0.75\n"))
    assert run.min_pass_rate == 0.75 and run.all_meet_minimum
    assert by_target(run)[f"gpt/{BACKUP}"].pass_rate == 0.75


def test_a_call_that_fails_fails_the_case_with_the_error_as_reason():
    rig = Rig()
    rig.fake.script(BACKUP, ["400"])
    run = rig.run(cases(3, 'regex = "echo"'), concurrency=1)
    failed = [r for r in run.results if not r.passed]
    assert len(failed) == 1 and failed[0].target == f"gpt/{BACKUP}"
    assert failed[0].error == "invalid_request"
    assert failed[0].reason is not None and failed[0].reason.startswith("error: invalid_request ")
    assert failed[0].latency_ms is None and failed[0].input_tokens == 0
    assert by_target(run)[f"gpt/{BACKUP}"].passed == 2


def test_a_target_is_never_backed_up_by_another_during_an_eval():
    """The primary failing for good is the primary's failure: no case reaches the backup for
    it, the retry stays on the same target, and every case is still tried (no breaker opens)."""
    rig = Rig()
    rig.fake.script(PRIMARY, ["529"], cycle=True)
    run = rig.run(cases(8, 'regex = "echo"'))
    primary, backup = by_target(run)[f"claude/{PRIMARY}"], by_target(run)[f"gpt/{BACKUP}"]
    assert (primary.passed, backup.passed) == (0, 8)
    assert len(rig.fake.sent_to(PRIMARY)) == 8 * 2  # each case: the call and its one retry
    assert len(rig.fake.sent_to(BACKUP)) == 8  # its own cases, nothing more
    reasons = {r.reason for r in run.results if not r.passed}
    assert all(reason.startswith("error: overloaded ") for reason in reasons)  # type: ignore[union-attr]


def test_each_target_gets_its_own_prompt_and_the_case_its_system_and_max_tokens():
    prompts = '[prompts.support-gpt]\nversion = "3"\nsystem = "Answer in Portuguese."\n'
    route = (
        f'targets = ["claude/{PRIMARY}", {{ target = "gpt/{BACKUP}", prompt = "support-gpt" }}]\n'
    )
    rig = Rig(route, extra=prompts)
    rig.run(cases(1, 'regex = "echo"\nsystem = "Classify the message."\nmax_tokens = 50'))
    (claude,) = rig.fake.sent_to(PRIMARY)
    assert claude["system"] == "Classify the message." and claude["max_tokens"] == 50
    (gpt,) = rig.fake.sent_to(BACKUP)
    assert gpt["messages"][0] == {"role": "system", "content": "Answer in Portuguese."}


def test_personal_data_is_masked_as_the_route_masks_it():
    rig = Rig(TARGETS + 'pii = ["cpf"]\n')
    text = (
        '[[cases]]\nname = "cpf"\nprompt = "Meu CPF é 123.456.789-09"\nmust_contain = ["[CPF_1]"]\n'
    )
    run = rig.run(parse_cases(tomllib.loads(text)))
    assert all(r.passed for r in run.results)  # the fake echoes what it received: the placeholder
    for _, body in rig.fake.bodies:
        assert "123.456.789-09" not in json.dumps(body, ensure_ascii=False)


def test_costs_are_the_pricers_on_the_tokens_used():
    rig = Rig()
    run = rig.run(cases(2, 'regex = "echo"'))
    pricer = build_pricer(rig.config)
    for r in run.results:
        provider, model = r.target.split("/")
        kind = rig.config.providers[provider].kind
        unit = pricer.unit_prices(kind, model, rig.clock.wall(), provider=provider)
        assert unit is not None and r.input_tokens > 0 and r.output_tokens > 0
        assert r.cost_usd == unit.input * r.input_tokens + unit.output * r.output_tokens
    summary = by_target(run)[f"claude/{PRIMARY}"]
    assert summary.cost_usd == sum(r.cost_usd for r in run.results[:2])  # type: ignore[misc]


def test_at_most_concurrency_calls_are_in_flight_and_progress_counts_them():
    rig = Rig()
    rig.fake.latency("*", fixed_ms=250)
    seen: list[tuple[int, int]] = []
    run = rig.run(cases(5, 'regex = "echo"'), concurrency=3, progress=lambda *p: seen.append(p))
    assert rig.fake.most_in_flight == 3
    assert seen == [(i, 10) for i in range(11)]
    assert all(r.latency_ms == pytest.approx(250, abs=5) for r in run.results)
    assert run.finished_at - run.started_at == timedelta(seconds=1)  # 10 calls, 3 at a time


def test_an_unknown_route_or_a_missing_key_is_a_config_error():
    rig = Rig()
    with pytest.raises(ConfigError, match="unknown route 'billing'"):
        rig.clock.run(run_eval(rig.config, "billing", cases(1, 'regex = "x"'), environ={}))
    with pytest.raises(ConfigError, match="environment variable K is not set"):
        rig.clock.run(run_eval(rig.config, "support", cases(1, 'regex = "x"'), environ={}))


def test_the_run_written_for_the_scheduler_has_exactly_the_agreed_format(tmp_path):
    rig = Rig()
    rig.fake.script(BACKUP, ["400"])
    run = rig.run(cases(2, 'regex = "echo"'), concurrency=1)
    path = write_run(DataPaths(tmp_path), run)
    assert path == tmp_path / "control" / "evals" / f"{run.run_id}.json"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    body = json.loads(path.read_text())
    assert list(body) == [
        "run_id", "route", "cases_file", "started_at", "finished_at", "cases", "min_pass_rate",
        "results",
    ]  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{12}", body["run_id"])
    assert (body["route"], body["cases_file"], body["cases"], body["min_pass_rate"]) == (
        "support", "cases.toml", 2, 0.9,
    )  # fmt: skip
    assert datetime.fromisoformat(body["started_at"]).utcoffset() == timedelta(0)
    assert datetime.fromisoformat(body["finished_at"]) == run.finished_at.astimezone(UTC)
    assert len(body["results"]) == 4
    ok, failed = body["results"][0], body["results"][2]
    assert list(ok) == [
        "target", "case_name", "passed", "reason", "latency_ms", "cost_usd", "input_tokens",
        "output_tokens", "error",
    ]  # fmt: skip
    assert ok["target"] == f"claude/{PRIMARY}" and ok["case_name"] == "case 0"
    assert ok["passed"] is True and ok["reason"] is None and ok["error"] is None
    assert isinstance(ok["latency_ms"], float) and isinstance(ok["input_tokens"], int)
    assert re.fullmatch(r"\d+\.\d{9}", ok["cost_usd"])
    assert Decimal(ok["cost_usd"]) == run.results[0].cost_usd
    assert failed["target"] == f"gpt/{BACKUP}" and failed["passed"] is False
    assert failed["error"] == "invalid_request" and failed["latency_ms"] is None
    assert failed["reason"].startswith("error: invalid_request ")


def result(latency: float | None, cost: str | None, passed: bool = True) -> EvalResult:
    return EvalResult(
        "t/m", "c", passed, None, latency, None if cost is None else Decimal(cost), 1, 1
    )


def test_a_summary_interpolates_percentiles_and_adds_costs_when_every_one_is_known():
    at = datetime(2026, 1, 5, tzinfo=UTC)
    run = EvalRun("r", "support", "cases.toml", at, at, 4, 0.9, [
        result(100, "0.1"), result(200, "0.2"), result(300, "0.3"), result(None, "0", False),
    ])  # fmt: skip
    (s,) = run.summaries()
    assert (s.p50_ms, s.p95_ms) == (200, pytest.approx(290))
    assert s.cost_usd == Decimal("0.6") and s.pass_rate == 0.75
    run.results.append(result(400, None))
    assert run.summaries()[0].cost_usd is None  # an unpriced call: no total to trust
