"""The What-if page: a library scenario, scaled down, run from the page; the figures shown are
the simulator's own for the same scenario and traffic."""

from __future__ import annotations

import dataclasses

from simulations.scenario import load_scenario
from simulations.simulate import simulate

from .pages import open_page, texts


def test_running_a_scenario_compares_the_candidates_with_the_baseline(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    at = open_page("whatif")
    at.selectbox(key="whatif_scenario").set_value("Latency spike").run()
    at.segmented_control(key="whatif_scale").set_value("1 %").run()
    at.button(key="whatif_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    shown = at.dataframe[0].value.set_index("run")

    scenario = load_scenario("latency-spike")
    scaled = dataclasses.replace(scenario, rate_per_s=scenario.rate_per_s * 0.01)
    expected = simulate(scaled, list(scenario.backups), results_dir=tmp_path / "check")
    for run in [expected.baseline, *expected.candidates]:
        row = shown.loc[run.label]
        assert (row["requests"], row["failed"]) == (run.requests, run.failed)
        assert row["cost"] == float(run.cost_usd)
    assert len(at.get("plotly_chart")) == 2
    assert (tmp_path / "data" / "simulations").is_dir(), "results live apart from live data"


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
