"""The What-if page: a library scenario, scaled down, run from the page as a job in a process of
its own; the figures shown are the simulator's own for the same scenario and traffic, failing
candidates come first and in red, and a run outlives the visit that started it."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from helpers.alert_harness import PRIMARY
from helpers.dashboard_pages import open_page, texts
from helpers.recorded_incident import recorded

from simulations.whatif import job as jobs
from simulations.whatif.report import calibration_text, sentence, table_rows
from simulations.whatif.scenario import load_scenario, parse_scenario
from simulations.whatif.simulate import simulate


def _run(at, data: Path, timeout_s: float = 180):
    """Press Run, wait for the job the page started, and draw the page again."""
    at.button(key="whatif_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    [job] = jobs.recent(data)
    assert at.query_params["job"] == job.id, "a reload finds it again"
    done = jobs.wait(job.folder, timeout_s)
    assert done.state == "done", done
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return done


def test_running_a_scenario_compares_the_candidates_with_the_baseline(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    at.selectbox(key="whatif_scenario").set_value("Latency spike").run()
    at.segmented_control(key="whatif_scale").set_value("1 %").run()
    _run(at, tmp_path / "data")
    shown = at.dataframe[0].value

    scenario = load_scenario("latency-spike")
    expected = simulate(scenario.scaled(0.01), list(scenario.backups),
                        results_dir=tmp_path / "check")  # fmt: skip
    # The command line's cells, a run a row (all but the wall time each run took).
    rows = table_rows(expected)[:-1]
    assert [list(shown[name.strip() or "run"]) for name, *_ in rows] == [
        cells for _, *cells in rows
    ]
    assert len(at.get("plotly_chart")) == 2
    assert (tmp_path / "data" / "simulations" / "jobs").is_dir(), "apart from live data"


def test_failing_candidates_are_said_first_in_red_with_the_cause(tmp_path, monkeypatch):
    """Issue 21's case at the page's quick setting: Haiku fails nothing at 1 %, but its
    tokens a minute would pass its limit at full traffic; it must not read as a saving."""
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    at.selectbox(key="whatif_scenario").set_value("Anthropic 529s for 2 h at peak").run()
    at.segmented_control(key="whatif_scale").set_value("1 %").run()
    job = _run(at, tmp_path / "data")
    comparison = job.comparison()
    [first, *_] = comparison.ranked()
    [error] = [e.value for e in at.error]
    assert error == sentence(comparison, first)
    assert error.startswith("claude/claude-haiku-4-5 would pass its 400 k tokens/min limit")
    assert list(at.dataframe[0].value["run"])[:2] == ["baseline", "claude/claude-haiku-4-5"]
    said = texts(at)
    assert "This run sends 1 % of the scenario's traffic" in said
    assert "claude/claude-haiku-4-5 over its limits" in said
    assert next(s.value for s in at.success).startswith("gpt/gpt-4.1-mini answers every request")


def test_a_run_goes_on_in_its_own_process_and_another_visit_finds_it(tmp_path, monkeypatch):
    """A reload is a new session: it shows the running job's progress, offers no second run
    while it lasts (one at a time on the machine), and can stop it."""
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    at.selectbox(key="whatif_scenario").set_value("A week at 20 requests/s, Sonnet down 2 h on "
                                                  "Tuesday").run()  # fmt: skip
    at.button(key="whatif_run").click().run()
    [job] = jobs.recent(tmp_path / "data")
    try:
        assert job.state == "running"
        again = open_page("whatif")
        [bar] = again.get("progress")
        assert "Simulating A week at 20 requests/s" in bar.proto.text
        assert again.button(key="whatif_run").disabled
        assert "A simulation is running" in texts(again)
        again.button(key="whatif_stop").click().run()
        assert jobs.status(job.folder).state == "stopped"
        assert any("stopped from the page" in e.value for e in again.error)
        assert not again.button(key="whatif_run").disabled
    finally:
        jobs.stop(job.folder)


def test_an_edited_scenario_that_does_not_parse_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    [area] = at.text_area
    area.set_value(area.value.replace('kind = "overloaded"', 'kind = "meteor"')).run()
    assert "cannot run" in texts(at) and "must be one of" in texts(at)


def test_a_scenario_is_saved_where_the_page_finds_it_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    [area] = at.text_area
    area.set_value(area.value.replace('name = "Anthropic 529s', 'name = "Ours: 529s')).run()
    at.button(key="whatif_save").click().run()
    saved = list((tmp_path / "data" / "scenarios").glob("*.toml"))
    assert len(saved) == 1 and saved[0].name == "ours-529s-for-2-h-at-peak.toml"
    again = open_page("whatif")
    assert "Ours: 529s for 2 h at peak" in again.selectbox(key="whatif_scenario").options


# --- scenarios from the store: recorded traffic with its outage (helpers/recorded_incident.py)


@pytest.fixture(scope="module")
def recorded_data(tmp_path_factory):
    return recorded(tmp_path_factory.mktemp("recorded"))


@pytest.fixture
def recorded_env(recorded_data, tmp_path, monkeypatch):
    """The recorded data's published snapshots in this test's own folder (its jobs stay
    there), and the routes the page reads."""
    paths, routes = recorded_data
    root = tmp_path / "data"
    shutil.copytree(paths.published, root / "published")
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(root))
    monkeypatch.setenv("SWITCHOVER_CONFIG", str(routes))
    return root


def test_our_traffic_with_an_outage_described_runs_on_the_recorded_requests(recorded_env):
    root = recorded_env
    at = open_page("whatif")
    at.segmented_control(key="whatif_source").set_value("our traffic").run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="whatif_outage_target").set_value(f"claude/{PRIMARY}").run()
    at.text_input(key="whatif_outage_for").set_value("20m").run()
    [area] = at.text_area
    scenario = parse_scenario(tomllib.loads(area.value))
    assert scenario.name.startswith("Recorded traffic")
    [fault] = scenario.faults
    assert (fault.target, fault.kind, fault.end_s - fault.start_s) == (
        f"claude/{PRIMARY}", "overloaded", 1200)  # fmt: skip
    sent = sum(sum(r.per_minute) for r in scenario.routes.values())
    assert sent > 0
    job = _run(at, root)
    comparison = job.comparison()
    assert comparison.baseline.requests == round(sent), "every recorded request, once a run"
    [run] = comparison.candidates
    assert run.fallback_rate > 0.2, "by default over the busiest stretch: it moves traffic"
    calibrated = _calibration_shown(at, comparison)
    assert [e.value for e in at.error if e.value != calibrated] + [s.value for s in at.success] == [
        sentence(comparison, run) for run in comparison.ranked()
    ]


def test_an_incident_is_replayed_with_another_backup_from_the_incidents_page(recorded_env):
    root = recorded_env
    at = open_page("incidents")
    chosen = at.selectbox(key="incident").value
    at.button(key="incident_replay").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["incident"] == chosen
    assert at.segmented_control(key="whatif_source").value == "an incident"
    assert at.selectbox(key="whatif_incident").value == chosen
    [area] = at.text_area
    scenario = parse_scenario(tomllib.loads(area.value))
    assert scenario.name.startswith(f"Replay of claude/{PRIMARY}")
    assert {f.target for f in scenario.faults} == {f"claude/{PRIMARY}"}, "its own faults"
    # AppTest reruns the page it was told to open, not the one the script switched to.
    at.switch_page("views/whatif.py")
    job = _run(at, root)
    comparison = job.comparison()
    assert [c.label for c in comparison.candidates] == ["gpt/gpt-4.1-mini"], "its backup"
    assert comparison.baseline.requests == sum(sum(r.per_minute) for r in scenario.routes.values())
    calibrated = _calibration_shown(at, comparison)
    [said] = [s.value for s in at.success] + [e.value for e in at.error if e.value != calibrated]
    assert said == sentence(comparison, comparison.candidates[0])


def _calibration_shown(at, comparison) -> str:
    """The page's calibration line against the window's own record, above the results: in
    blue when the replay reproduces it. The recording is real traffic over loopback, so on a
    loaded machine a few of its requests may time out, which a replay on a virtual clock does
    not reproduce; that is the one miss allowed here, and then the line is in red."""
    calibration = comparison.calibration
    assert calibration is not None, "a run on recorded traffic is calibrated"
    said = calibration_text(comparison)
    if calibration.trusted:
        assert said.startswith("This replay reproduces what happened within")
        assert said in [i.value for i in at.info]
    else:
        assert calibration.worst.name == "requests failed", said
        assert said in [e.value for e in at.error]
    return said
