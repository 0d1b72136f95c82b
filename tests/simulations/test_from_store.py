"""Scenarios built from the demo's recorded history (the real chain on the fake providers, nine
days with three past incidents): its routes with every option, its traffic minute by minute,
its sizes, cache hits and latency, and its incidents replayed as they happened."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta

import pytest

from engine.config import parse_config
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.scheduler.pipeline import Pipeline
from simulations.demo.history import PAST_INCIDENTS, seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config, demo_text
from simulations.whatif.arrivals import arrivals
from simulations.whatif.from_store import (
    Outage,
    recorded_window,
    replayable_incidents,
    scenario_from_incident,
    scenario_from_traffic,
)
from simulations.whatif.report import calibration_text
from simulations.whatif.results import as_json, from_json
from simulations.whatif.scenario import Fault, Limits, parse_scenario
from simulations.whatif.scenario_toml import to_toml
from simulations.whatif.simulate import run_once, simulate

END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAYS = 9  # the first three past incidents: an outage, a 429 storm, a revoked key
START = END - timedelta(days=DAYS)
SONNET, HAIKU, MINI = "claude/claude-sonnet-4-5", "claude/claude-haiku-4-5", "gpt/gpt-4.1-mini"
# The incidents the history plans (simulations.demo.history.PAST_INCIDENTS), by the target they hit.
PLANNED = {f"{'gpt' if i.model.startswith('gpt') else 'claude'}/{i.model}": i
           for i in PAST_INCIDENTS if i.day < DAYS}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    paths = DataPaths(tmp_path_factory.mktemp("history") / "data")
    seed_history(paths, demo_config(8700), days=DAYS, end=END, environ={DEMO_KEY_ENV: "k"},
                 say=lambda _: None)  # fmt: skip
    pipeline = Pipeline(paths, now=lambda: END)
    pipeline.cycle()
    pipeline.traffic_profile()
    published = PublishedData(paths.published)
    yield paths, pipeline, published
    published.close()
    pipeline.close()


@pytest.fixture(scope="module")
def data(store):
    return store[2]


@pytest.fixture(scope="module")
def con(store):
    """The history's own database: the independent account the scenarios are checked against
    (from_store itself reads only the published snapshots)."""
    return store[1].con


def config_with_options():
    """The demo's routes with every route option a production route may have."""
    data = tomllib.loads(demo_text(8700))
    data["prompts"] = {"support-gpt": {"version": "3", "template": "{system}\nBe brief."}}
    data["routes"]["support"] |= {
        "targets": [SONNET, HAIKU, {"target": MINI, "prompt": "support-gpt"}],
        "pii": ["email", "phone"], "pii_restore": True, "on_quality_error": "fall_back",
        "output_schema": {"type": "object", "properties": {"answer": {"type": "string"}}},
        "adaptive_order": True, "on_stream_failure": "continue",
    }  # fmt: skip
    return parse_config(data, source="switchover.toml")


def incident_of(data, target):
    incidents = replayable_incidents(data)
    planned = PLANNED[target]
    begins = START.replace(hour=0, minute=0) + timedelta(days=planned.day, hours=planned.hour)
    near = abs(incidents["started_at"] - begins) <= timedelta(minutes=2)
    found = incidents[(incidents["target"] == target) & near]
    assert len(found) == 1, incidents[["incident_id", "started_at"]]
    return found.iloc[0], begins, begins + timedelta(minutes=planned.minutes)


# --- from a date range -------------------------------------------------------------------


@pytest.fixture(scope="module")
def nine_days(data):
    outage = Outage(SONNET, start_s=3 * 86_400 + 14 * 3600, length_s=7200, kind="overloaded")
    return scenario_from_traffic(data, config_with_options(), START, END, outage=outage,
                                 backups=[MINI], limits={HAIKU: Limits(4000, 400_000)})  # fmt: skip


def test_the_routes_are_the_configured_ones_with_every_option_and_no_way_to_reach_them(
    nine_days,
):
    config = config_with_options()
    assert nine_days.config.routes == config.routes  # targets, policy and every option
    support = nine_days.config.routes["support"]
    assert [t.prompt for t in support.targets] == [t.prompt for t in config.routes["support"]
                                                   .targets]  # fmt: skip
    urls = {p.base_url for p in nine_days.config.providers.values()}
    assert urls == {"https://api.anthropic.com", "https://api.openai.com/v1"}, "the defaults"
    assert all(p.api_key_env is None for p in nine_days.config.providers.values())


def test_each_routes_schedule_is_its_recorded_requests_minute_by_minute(nine_days, con):
    recorded = dict(con.execute(
        "SELECT route, sum(requests - request_faults) FROM rollup_minute "
        "WHERE bucket >= $lo AND bucket < $hi GROUP BY route", {"lo": START, "hi": END}
    ).fetchall())  # fmt: skip
    assert {r: sum(t.per_minute) for r, t in nine_days.routes.items()} == recorded
    assert all(len(t.per_minute) == DAYS * 1440 for t in nine_days.routes.values())
    noon = round((END - timedelta(days=1) - START).total_seconds() / 60)  # a busy minute
    (at_noon,) = con.execute(
        "SELECT sum(requests) FROM rollup_minute WHERE route = 'support' AND bucket = $at",
        {"at": START + timedelta(minutes=noon)},
    ).fetchone()
    assert nine_days.routes["support"].per_minute[noon] == (at_noon or 0)
    total = sum(recorded.values())
    assert nine_days.routes["support"].share == pytest.approx(recorded["support"] / total)


def test_sizes_have_the_recorded_means_and_the_primarys_cache_share(nine_days, con):
    for route, traffic in nine_days.routes.items():
        prompt, answer = con.execute(
            "SELECT avg(input_tokens + cache_read_tokens + cache_write_tokens), "
            "avg(output_tokens) FROM attempts WHERE route = $route AND served "
            "AND outcome = 'success' AND started_at >= $lo AND started_at < $hi",
            {"route": route, "lo": START, "hi": END},
        ).fetchone()
        assert traffic.input_tokens == pytest.approx(prompt, rel=0.005, abs=1), route
        assert traffic.output_tokens == pytest.approx(answer, rel=0.005, abs=1), route
        q = traffic.input_quantiles
        assert len(q) == 21 and list(q) == sorted(q) and len(traffic.output_quantiles) == 21
    (warm_share,) = con.execute(
        "SELECT sum(cache_read_tokens) / sum(input_tokens + cache_read_tokens + "
        "cache_write_tokens) FROM attempts WHERE route = 'support' AND served AND "
        "outcome = 'success' AND fallback_depth = 0 AND cache_read_tokens > 0"
    ).fetchone()
    assert nine_days.routes["support"].cached_share == pytest.approx(warm_share, abs=1e-4)
    assert nine_days.routes["classify"].cached_share == 0


def test_each_target_has_its_measured_latency(nine_days, con):
    measured = {
        target: (n, p50, p99)
        for target, n, p50, p99 in con.execute(
            "SELECT target, count(*), quantile_cont(latency_ms, 0.5), "
            "quantile_cont(latency_ms, 0.99) FROM attempts WHERE outcome = 'success' "
            "GROUP BY target"
        ).fetchall()
    }
    assert set(nine_days.target_latency) == set(measured)
    for target, (n, p50, p99) in measured.items():
        latency = nine_days.target_latency[target]
        assert latency.median_ms == pytest.approx(p50, rel=0.03), target
        if n >= 1000:  # the p99 of a few dozen answers is their largest but one, or so
            assert latency.p99_ms == pytest.approx(p99, rel=0.05), target


def test_the_outage_described_is_the_scenarios_one_fault(nine_days):
    start = 3 * 86_400 + 14 * 3600
    assert nine_days.faults == (Fault(SONNET, "overloaded", start, start + 7200),)
    assert nine_days.backups == (MINI,) and nine_days.limits == {HAIKU: Limits(4000, 400_000)}
    assert nine_days.duration_s == DAYS * 86_400 and nine_days.start == START


def test_a_scenario_built_from_the_store_reads_back_equal_from_its_toml(nine_days):
    again = parse_scenario(tomllib.loads(to_toml(nine_days)), source=nine_days.source)
    assert again == nine_days


@pytest.mark.parametrize(
    ("window", "outage", "message"),
    [
        ((START, START), None, "is empty"),
        ((datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)), None,
         "no recorded requests on support, classify, summarize from 2025-01-01 00:00"),
        ((START, END), Outage("claude/claude-opus-9", 0, 60, "auth"),
         "'claude/claude-opus-9' is no target of the routes"),
        ((START, END), Outage(SONNET, DAYS * 86_400, 60, "auth"),
         "it must start inside the window"),
        ((START, END), Outage(SONNET, 0, 60, "meteor"), "kind must be one of"),
    ],
)  # fmt: skip
def test_a_bad_window_or_outage_is_refused_with_what_is_wrong(data, window, outage, message):
    with pytest.raises(ConfigError, match=message):
        scenario_from_traffic(data, demo_config(8700), *window, outage=outage)


def test_a_backup_must_be_a_provider_and_model(data):
    with pytest.raises(ConfigError, match="backup: 'haiku' is not of the form provider/model"):
        scenario_from_traffic(data, demo_config(8700), START, END, outage=None, backups=["haiku"])


# --- from a recorded incident --------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "kind"), [(SONNET, "overloaded"), (MINI, "rate_limit"), (HAIKU, "auth")]
)
def test_a_replay_has_the_incidents_window_and_the_fault_its_attempts_show(data, target, kind):
    incident, begins, ends = incident_of(data, target)
    scenario = scenario_from_incident(data, demo_config(8700), incident["incident_id"])
    assert scenario.start == incident["started_at"].floor("min") - timedelta(minutes=10)
    [fault] = scenario.faults
    assert (fault.target, fault.kind, fault.rate) == (target, kind, 1.0)
    at = scenario.start + timedelta(seconds=fault.start_s)
    until = scenario.start + timedelta(seconds=fault.end_s)
    # Read from minutes of traffic: its edges within the silences around the planned ones.
    assert abs(at - begins) <= timedelta(minutes=2), (at, begins)
    assert abs(until - ends) <= timedelta(minutes=4), (until, ends)
    assert fault.retry_after_s == (20 if kind == "rate_limit" else None)
    assert set(incident["routes"].split(", ")) <= set(scenario.routes)


def test_only_ended_incidents_with_their_minutes_published_can_be_replayed(data, con):
    replayable = set(replayable_incidents(data)["incident_id"])
    ended = {i for (i,) in con.execute(
        "SELECT incident_id FROM incidents WHERE ended_at IS NOT NULL AND target IS NOT NULL"
    ).fetchall()}  # fmt: skip
    assert replayable == ended and len(replayable) >= 3


def test_an_unknown_incident_is_refused_naming_the_ones_there_are(data):
    with pytest.raises(ConfigError, match=r"no incident 'nope' \(the latest replayable: target:"):
        scenario_from_incident(data, demo_config(8700), "nope")


# Fidelity (issue 21): a recorded incident replayed with its recorded backup reproduces its
# failed requests, fallback rate and cost within ± 5 % (or 2 requests: a count of 37 has no
# 5 % to spare), on the routes it touched, over its window.
@pytest.fixture(scope="module")
def replays(data, tmp_path_factory):
    def replay(target):
        incident, _, _ = incident_of(data, target)
        scenario = scenario_from_incident(data, demo_config(8700), incident["incident_id"])
        end = scenario.start + timedelta(seconds=scenario.duration_s)
        recorded = recorded_window(data, scenario.start, end, scenario.routes)
        folder = tmp_path_factory.mktemp("replay")
        run = run_once(scenario, scenario.config, arrivals(scenario), DataPaths(folder),
                       label="replay")  # fmt: skip
        return run, recorded

    return {target: replay(target) for target in (SONNET, MINI, HAIKU)}


@pytest.mark.parametrize("target", [SONNET, MINI, HAIKU])
def test_a_replayed_incident_fails_and_falls_back_as_it_did(replays, target):
    run, recorded = replays[target]
    assert run.requests == recorded.requests > 0
    assert run.failed == pytest.approx(recorded.failed, rel=0.05, abs=2)
    assert run.answered_by_fallback == pytest.approx(recorded.answered_by_fallback, rel=0.05,
                                                     abs=2)  # fmt: skip
    assert recorded.answered_by_fallback >= 20, "an incident, not noise"


# The support route's cost is mostly prompt-cache reads: it agrees because the fake providers
# forget a cached prompt after five minutes, as the simulated ones (and Anthropic) do, and the
# simulated primary starts warm, as the recorded one was.
@pytest.mark.parametrize("target", [SONNET, MINI, HAIKU])
def test_a_replayed_incident_costs_what_it_cost(replays, target):
    run, recorded = replays[target]
    assert float(run.cost_usd) == pytest.approx(float(recorded.cost_usd), rel=0.05)


@pytest.mark.parametrize("target", [SONNET, MINI, HAIKU])
def test_a_replay_says_how_well_it_reproduces_the_record_and_writes_it_as_recorded(
    data, target, tmp_path
):
    """Issue 34: every replay also runs the chain that really served, against the record; the
    calibration line and the JSON's top-level `recorded` say how far apart they are."""
    incident, _, _ = incident_of(data, target)
    scenario = scenario_from_incident(data, demo_config(8700), incident["incident_id"])
    comparison = simulate(scenario, results_dir=tmp_path)
    calibration = comparison.calibration
    assert calibration is not None and calibration.recorded == scenario.recorded
    assert calibration.trusted, calibration_text(comparison)
    assert calibration_text(comparison).startswith("This replay reproduces what happened within")
    assert target not in [run.label for run in comparison.candidates], "never its own backup"
    body = as_json(comparison)
    assert body["recorded"]["answered_by_fallback"] == scenario.recorded.answered_by_fallback
    assert body["recorded"]["trusted"] is True
    assert from_json(body).calibration == calibration


def test_a_from_traffic_run_is_calibrated_against_the_windows_own_incidents(data, tmp_path):
    """Its "as recorded" run replays the incidents the window really had, not the outage it
    injects, and is held against the record of the same window."""
    incident, _, _ = incident_of(data, SONNET)
    begins = incident["started_at"].floor("h").to_pydatetime()
    outage = Outage(MINI, 600, 900, "overloaded")
    scenario = scenario_from_traffic(
        data, demo_config(8700), begins, begins + timedelta(hours=2), outage=outage
    )
    assert [f.target for f in scenario.recorded_faults] == [SONNET]
    assert [f.target for f in scenario.faults] == [MINI]
    comparison = simulate(scenario, results_dir=tmp_path)
    calibration = comparison.calibration
    assert calibration is not None and calibration.trusted, calibration_text(comparison)
    assert calibration.recorded.answered_by_fallback >= 20, "the window held an incident"


def test_a_window_never_runs_past_the_current_minute(data):
    now = datetime.now(UTC)
    scenario = scenario_from_traffic(
        data, demo_config(8700), END - timedelta(hours=1), now + timedelta(hours=1), outage=None
    )
    end = scenario.start + timedelta(seconds=scenario.duration_s)
    assert end == now.replace(second=0, microsecond=0)
