"""The README tour's eval: data/demo-cases.toml on the demo's classify route, over the fake
providers, gives what the tour promises (two of three cases on every target)."""

from __future__ import annotations

from pathlib import Path

from engine.core.clock import VirtualClock
from engine.evals.cases import load_cases
from engine.evals.runner import run_eval
from simulations.demo.up import demo_config
from simulations.fakes import FakeTransport

CASES = Path(__file__).parents[2] / "data" / "demo-cases.toml"


def test_the_demo_case_file_passes_two_of_three_cases_on_every_classify_target():
    clock = VirtualClock()
    cases = load_cases(CASES)
    run = clock.run(
        run_eval(demo_config(8700), cases.route or "classify", cases,
                 transport=FakeTransport(clock=clock), environ={"SWITCHOVER_DEMO_KEY": "demo"},
                 clock=clock)
    )  # fmt: skip
    summaries = {s.target: (s.passed, s.cases, s.meets_minimum) for s in run.summaries()}
    assert summaries == {
        "gpt/gpt-4.1-mini": (2, 3, True),
        "claude/claude-haiku-4-5": (2, 3, True),
    }
    failed = {(r.target, r.case_name) for r in run.results if not r.passed}
    assert {case for _, case in failed} == {"answers in JSON"}
