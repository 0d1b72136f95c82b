"""`switchover simulate` as a user types it: a scenario file, a date range of the recorded
traffic with an outage, a recorded incident replayed; on three days of the demo's history."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from engine.cli.main import app
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.scheduler.pipeline import Pipeline
from simulations.demo.history import seed_history
from simulations.demo.up import DEMO_CONFIG, DEMO_KEY_ENV, DEMO_MARKER, demo_config
from simulations.whatif.from_store import replayable_incidents

runner = CliRunner()
END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MINI, HAIKU = "gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"
SMALL = """
name = "small outage"
duration = "20m"
start = "2026-11-23T12:00:00Z"
backups = ["claude/claude-haiku-4-5"]
[providers.claude]
kind = "anthropic"
[providers.gpt]
kind = "openai"
[routes.support]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]
[traffic]
rate_per_s = 1
[traffic.routes.support]
share = 1
input_tokens = 1500
output_tokens = 200
[[faults]]
target = "claude/claude-sonnet-4-5"
kind = "overloaded"
start = "5m"
end = "12m"
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Three days of the demo's history (its day-2 Sonnet outage), published as the scheduler
    does: a cycle, then the traffic profile."""
    paths = DataPaths(tmp_path_factory.mktemp("cli") / "data")
    seed_history(paths, demo_config(8700), days=3, end=END, environ={DEMO_KEY_ENV: "k"},
                 say=lambda _: None)  # fmt: skip
    pipeline = Pipeline(paths, now=lambda: END)
    try:
        pipeline.cycle()
        pipeline.traffic_profile()
    finally:
        pipeline.close()
    return paths.root


@pytest.fixture(scope="module")
def incident(data_dir):
    data = PublishedData(data_dir / "published")
    try:
        incidents = replayable_incidents(data)
    finally:
        data.close()
    return incidents[incidents["target"] == "claude/claude-sonnet-4-5"].iloc[0]["incident_id"]


def simulate(*args, data_dir):
    result = runner.invoke(app, ["simulate", *map(str, args), "--data-dir", str(data_dir)])
    return result


def candidates(path):
    return {c["label"]: c for c in json.loads(path.read_text())["candidates"]}


def test_a_scenario_file_runs_as_before_with_a_backup_and_its_json(tmp_path):
    scenario = tmp_path / "small.toml"
    scenario.write_text(SMALL)
    out = tmp_path / "results.json"
    result = simulate(scenario, "--backup", MINI, "--out", out, data_dir=tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("small outage: ") and "2 runs" in result.stdout
    assert "baseline" in result.stdout and MINI in result.stdout
    assert f"results written to {out}" in result.stdout
    [run] = candidates(out).values()
    assert run["label"] == MINI and run["requests"] > 1000


def test_a_recorded_incident_is_replayed_and_saved_as_a_scenario_that_runs_the_same(
    data_dir, incident, tmp_path
):
    saved, first, again = tmp_path / "replay.toml", tmp_path / "a.json", tmp_path / "b.json"
    result = simulate("--replay-incident", incident, "--backup", MINI, "--save", saved,
                      "--out", first, "-c", DEMO_CONFIG, data_dir=data_dir)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Replay of claude/claude-sonnet-4-5 failing" in result.stdout
    assert f"scenario written to {saved}" in result.stdout and MINI in result.stdout
    assert tomllib.loads(saved.read_text())["faults"][0]["kind"] == "overloaded"
    rerun = simulate(saved, "--out", again, data_dir=data_dir)
    assert rerun.exit_code == 0, rerun.output
    for key in ("requests", "failed", "answered_by_fallback", "cost_usd"):
        assert candidates(first)[MINI][key] == candidates(again)[MINI][key], key


def test_recorded_traffic_runs_with_the_outage_described_scaled_and_limited(data_dir, tmp_path):
    saved = tmp_path / "window.toml"
    result = simulate(
        "--from-traffic", "2026-11-29T12:00..2026-11-29T14:00",
        "--outage", "claude/claude-sonnet-4-5,12:30,45m,overloaded,0.5",
        "--backup", MINI, "--limit", f"{HAIKU}=4000,400000", "--limit", f"{MINI}=,2000000",
        "--scale", "0.5", "--save", saved, "-c", DEMO_CONFIG, data_dir=data_dir,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "overloaded for 45m from +30m on 50% of its calls" in result.stdout
    scenario = tomllib.loads(saved.read_text())
    assert scenario["traffic_scale"] == 0.5 and scenario["duration"] == "2h"
    assert scenario["faults"] == [{"target": "claude/claude-sonnet-4-5", "kind": "overloaded",
                                   "start": "30m", "end": "75m", "rate": 0.5}]  # fmt: skip
    assert scenario["limits"] == {HAIKU: {"rpm": 4000, "tpm": 400000}, MINI: {"tpm": 2000000}}


def test_the_demos_data_folder_needs_no_configuration(data_dir, incident, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no switchover.toml here
    (data_dir / DEMO_MARKER).write_text("demo data\n")
    try:
        result = simulate("--replay-incident", incident, "--backup", MINI, data_dir=data_dir)
    finally:
        (data_dir / DEMO_MARKER).unlink()
    assert result.exit_code == 0, result.output
    assert "no switchover.toml: the demo's routes (demo.toml)" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of SCENARIO, --from-traffic or --replay-incident"),
        (["flapping-primary", "--replay-incident", "x"], "(got SCENARIO and --replay-incident)"),
        (["flapping-primary", "--outage", "claude,1h,1h,auth"], "--outage goes with"),
        (["--from-traffic", "2026-11-29..2026-11-30"], "needs --outage TARGET,START,LENGTH,KIND"),
        (["--from-traffic", "2026-11-29", "--outage", "claude,1h,1h,auth"], "write FROM..TO"),
        (["--from-traffic", "2026-11-30..2026-11-29", "--outage", "claude,1h,1h,auth"],
         "TO must come after FROM"),
        (["--from-traffic", "yesterday..", "--outage", "claude,1h,1h,auth"],
         "FROM 'yesterday': not a date"),
        (["--from-traffic", "2026-11-29..", "--outage", "claude,1h"],
         "write TARGET,START,LENGTH,KIND"),
        (["--from-traffic", "2026-11-29..", "--outage", "claude,1h,forever,auth"],
         "LENGTH 'forever' is not a duration"),
        (["--replay-incident", "x", "--limit", "haiku=lots"], "--limit 'haiku=lots': write"),
        (["--replay-incident", "nope"], "no incident 'nope'"),
    ],
)  # fmt: skip
def test_a_wrong_command_line_says_what_is_wrong_in_one_line(data_dir, args, message):
    result = simulate(*args, "-c", DEMO_CONFIG, data_dir=data_dir)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
