"""The what-if simulator: real chain and policy on simulated providers, its results against
independent computations, and a library of scenarios that all run."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import duckdb
import genai_prices
import pytest

from engine.core.errors import ConfigError
from simulations.whatif.arrivals import arrivals
from simulations.whatif.candidates import with_backup
from simulations.whatif.results import as_json
from simulations.whatif.scenario import library, load_scenario, parse_scenario
from simulations.whatif.simulate import simulate

SMALL = {
    "name": "small outage",
    "duration": "40m",
    "start": "2026-11-23T12:00:00Z",
    "seed": 3,
    "backups": ["gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"],
    "providers": {"claude": {"kind": "anthropic"}, "gpt": {"kind": "openai"}},
    "routes": {"support": {"targets": ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]}},
    "traffic": {"rate_per_s": 2, "routes": {"support": {
        "share": 1, "input_tokens": 1500, "output_tokens": 200, "cached_share": 0.8}}},
    "latency": {"median_ms": 500, "p99_ms": 3000},
    "faults": [{"target": "claude/claude-sonnet-4-5", "kind": "overloaded",
                "start": "10m", "end": "25m"}],
}  # fmt: skip


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    scenario = parse_scenario(SMALL)
    root = tmp_path_factory.mktemp("sim")
    return scenario, simulate(scenario, results_dir=root), root


def test_the_library_has_at_least_six_scenarios_that_load():
    scenarios = [load_scenario(p) for p in library()]
    assert len(scenarios) >= 6
    for s in scenarios:
        assert s.faults and s.backups and s.description, s.name
        assert arrivals(s), s.name


def test_a_library_scenario_is_found_by_its_name():
    assert load_scenario("flapping-primary").name == "Flapping primary"
    with pytest.raises(ConfigError, match="the library has: anthropic-529-peak"):
        load_scenario("no-such-scenario")


def test_a_bad_scenario_says_which_key_is_wrong():
    with pytest.raises(ConfigError, match=r"faults\[0\].kind: must be one of"):
        parse_scenario({**SMALL, "faults": [{"target": "claude", "kind": "meteor"}]})
    with pytest.raises(ConfigError, match=r"traffic\.routes\.nope: is not a route"):
        parse_scenario({**SMALL, "traffic": {"routes": {"nope": {
            "share": 1, "input_tokens": 1, "output_tokens": 1}}}})  # fmt: skip


def test_every_request_sent_is_in_the_results_and_the_outage_moves_traffic(outcome):
    scenario, comparison, _ = outcome
    sent = len(arrivals(scenario))
    assert comparison.baseline.requests == sent
    assert comparison.baseline.fallback_rate == 0
    for run in comparison.candidates:
        assert run.requests == sent
        # 15 of 40 minutes down: the backup answers about that share, never the whole
        assert 0.3 < run.fallback_rate < 0.45, run.fallback_rate
        assert run.incidents == 1


def test_the_real_breaker_keeps_the_down_primary_to_probes(outcome):
    _, comparison, root = outcome
    run = comparison.candidates[0]
    con = duckdb.connect(str(root / "small-outage" / "gpt-gpt-4-1-mini" / "switchover.duckdb"),
                         read_only=True)  # fmt: skip
    failed_primary, opened = con.execute(
        "SELECT (SELECT count(*) FROM attempts WHERE target = 'claude/claude-sonnet-4-5' "
        "AND outcome = 'error'), (SELECT count(*) FROM breaker_events WHERE to_status = 'open')"
    ).fetchone()
    con.close()
    # ~1,800 requests during the outage; with the breaker open only probes (every 30 s) try
    assert opened >= 1 and failed_primary < 150 < run.answered_by_fallback


def test_costs_are_genai_prices_own_computation_for_the_same_tokens(outcome):
    _, _, root = outcome
    con = duckdb.connect(str(root / "small-outage" / "gpt-gpt-4-1-mini" / "switchover.duckdb"),
                         read_only=True)  # fmt: skip
    rows = con.execute(
        "SELECT provider_kind, model, input_tokens, cache_read_tokens, cache_write_tokens, "
        "output_tokens, started_at, cost_usd FROM attempts WHERE outcome = 'success'"
    ).fetchall()
    con.close()
    assert len(rows) > 1000
    for kind, model, uncached, read, write, output, at, cost in rows[::50]:
        usage = genai_prices.Usage(input_tokens=uncached + read + write, output_tokens=output,
                                   cache_read_tokens=read, cache_write_tokens=write)  # fmt: skip
        price = genai_prices.calc_price(usage, model, provider_id=kind,
                                        genai_request_timestamp=at)  # fmt: skip
        assert cost == price.total_price.quantize(Decimal("1e-9")), (model, usage)


def test_the_same_scenario_gives_the_same_results(outcome, tmp_path):
    scenario, comparison, _ = outcome
    again = simulate(scenario, ["gpt/gpt-4.1-mini"], results_dir=tmp_path)
    first, second = as_json(comparison), as_json(again)
    for key in ("requests", "failed", "answered_by_fallback", "cost_usd", "fallback_premium_usd"):
        assert first["candidates"][0][key] == second["candidates"][0][key], key


def test_a_backup_over_its_rate_limit_shows_in_the_headroom_and_fails_requests(tmp_path):
    tight = {**SMALL, "limits": {"gpt/gpt-4.1-mini": {"rpm": 60}}}
    comparison = simulate(parse_scenario(tight), ["gpt/gpt-4.1-mini"], results_dir=tmp_path)
    [run] = comparison.candidates
    [rpm] = comparison.headroom(run)
    assert (rpm.measure, rpm.limit) == ("requests/min", 60)
    assert rpm.load > 60, "the demand on the backup, refused beyond its limit"
    assert run.load is not None and run.load.refused > 0
    assert run.failed > comparison.baseline.failed


def test_any_model_genai_prices_knows_can_be_the_backup():
    scenario = parse_scenario(SMALL)
    config = with_backup(scenario.config, "groq/llama-3.3-70b-versatile")
    assert [t.name for t in config.routes["support"].targets] == [
        "claude/claude-sonnet-4-5",
        "groq/llama-3.3-70b-versatile",
    ], "the candidate replaces the first backup"
    assert config.providers["groq"].price_provider == "groq"
    with pytest.raises(ConfigError, match="neither a provider"):
        with_backup(scenario.config, "nowhere/model")


def test_scaling_a_scenario_keeps_its_shape():
    scenario = parse_scenario(SMALL)
    twice = dataclasses.replace(scenario, rate_per_s=scenario.rate_per_s * 2)
    assert 1.8 < len(arrivals(twice)) / len(arrivals(scenario)) < 2.2


# Two routes, as in the demo: Haiku backs up support and is summarize's primary.
HAIKU_DOWN = {
    **SMALL,
    "backups": [],
    "routes": {
        "support": {"targets": ["claude/claude-sonnet-4-5", "claude/claude-haiku-4-5"]},
        "summarize": {"targets": ["claude/claude-haiku-4-5", "gpt/gpt-4.1"]},
    },
    "traffic": {"rate_per_s": 1, "routes": {
        "support": {"share": 0.5, "input_tokens": 500, "output_tokens": 50},
        "summarize": {"share": 0.5, "input_tokens": 500, "output_tokens": 50}}},
    "faults": [{"target": "claude/claude-haiku-4-5", "kind": "auth", "start": "5m", "end": "9m"}],
}  # fmt: skip


def test_the_default_candidate_is_a_backup_of_the_failing_route_never_the_failing_target(
    tmp_path,
):
    comparison = simulate(parse_scenario({**HAIKU_DOWN, "duration": "10m"}), results_dir=tmp_path)
    assert [run.label for run in comparison.candidates] == ["gpt/gpt-4.1"]


def test_a_candidate_that_is_the_failing_target_is_refused_by_name(tmp_path):
    scenario = parse_scenario({**HAIKU_DOWN, "duration": "10m"})
    with pytest.raises(ConfigError, match="backup claude/claude-haiku-4-5 is the target that"):
        simulate(scenario, ["claude/claude-haiku-4-5"], results_dir=tmp_path)
