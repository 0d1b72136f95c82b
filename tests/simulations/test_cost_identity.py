"""The what-if's cost identity over random scenarios, through the real simulator: for every
candidate, extra cost = price difference + cache loss + re-warm + wasted; when it fails no more
requests than the baseline, extra cost = its cost − the baseline's, to the last digit; when it
fails more, the extra cost is never below what it spent more (a failed request is no saving);
and no candidate saves more than the baseline spends. As JSON (the CLI's `--out`) the same."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulations.whatif.results import as_json, from_json
from simulations.whatif.scenario import parse_scenario
from simulations.whatif.simulate import simulate

PRIMARY = "claude/claude-sonnet-4-5"
BACKUPS = ("gpt/gpt-4.1-mini", "claude/claude-haiku-4-5", "gpt/gpt-4.1")
KINDS = ("overloaded", "server_error", "rate_limit", "auth", "timeout")

pytestmark = pytest.mark.timeout(600)


@st.composite
def scenarios(draw) -> dict:
    """A 20-minute scenario: one route, a fault of any kind on its primary at any time, any
    share of failures, one candidate backup, any prompt size and cached share."""
    start = draw(st.integers(0, 15))
    length = draw(st.integers(1, 20 - start))
    fault = {"target": PRIMARY, "kind": draw(st.sampled_from(KINDS)),
             "start": f"{start}m", "end": f"{start + length}m",
             "rate": draw(st.sampled_from([0.2, 0.5, 1.0]))}  # fmt: skip
    if fault["kind"] == "rate_limit":
        fault["retry_after_s"] = draw(st.sampled_from([5, 30]))
    return {
        "name": "random",
        "duration": "20m",
        "start": "2026-11-23T12:00:00Z",
        "seed": draw(st.integers(0, 1000)),
        "backups": [draw(st.sampled_from(BACKUPS))],
        "providers": {"claude": {"kind": "anthropic"}, "gpt": {"kind": "openai"}},
        "routes": {"support": {"targets": [PRIMARY, "gpt/gpt-4.1-mini"]}},
        "traffic": {"rate_per_s": draw(st.sampled_from([0.5, 1.0, 2.0])), "routes": {"support": {
            "share": 1, "input_tokens": draw(st.sampled_from([300, 2000, 8000])),
            "output_tokens": draw(st.sampled_from([20, 300])),
            "cached_share": draw(st.sampled_from([0.0, 0.5, 0.95]))}}},
        "latency": {"median_ms": 500, "p99_ms": 3000},
        "faults": [fault],
    }  # fmt: skip


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=scenarios())
def test_extra_cost_is_its_parts_and_what_was_spent_more_when_nothing_more_fails(raw, tmp_path):
    comparison = simulate(parse_scenario(raw), results_dir=tmp_path / str(raw["seed"]))
    again = from_json(as_json(comparison))
    for compared in (comparison, again):
        base = compared.baseline
        for run in compared.candidates:
            parts, extra = compared.parts(run), compared.extra_cost(run)
            assert extra == (parts.price_difference_usd + parts.cache_loss_usd
                             + parts.rewarm_usd + parts.wasted_usd)  # fmt: skip
            spent = run.cost_usd - base.cost_usd
            if run.failed <= base.failed:
                assert extra == spent
            else:
                assert extra == spent + (run.failed - base.failed) * base.cost_per_answered_usd
            assert extra >= -base.cost_usd, "no saving beyond the baseline's whole spend"
    body = as_json(comparison)
    for candidate, run in zip(body["candidates"], comparison.candidates, strict=True):
        assert Decimal(candidate["extra_cost_usd"]) == comparison.extra_cost(run)
        assert Decimal(candidate["cost_difference_usd"]) == run.cost_usd - base.cost_usd
