"""The Readiness page on the fixture dataset (its eval runs and drills are conftest's EVAL_RUNS,
EVAL_RESULTS and DRILLS): every pass rate, latency and cost equals one computed by hand from
those rows, only the target below its route's minimum is marked, the route chosen changes
what is shown, and without evals or drills the page says what to run. Also the Drills section
of Incidents & alerts."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.dashboard_pages import metric, open_page, texts

from dashboard import data
from dashboard.definitions import define
from dashboard.readiness_metrics import (
    BELOW,
    MET,
    drill_why,
    preflight_note,
    quality_by_target,
    waiting_text,
)
from engine.core.formats import format_latency
from engine.core.money import format_usd
from engine.core.paths import DataPaths
from engine.published.publish import publish
from engine.published.read import PublishedData
from engine.runtime.drills import start_drill
from engine.store.db import open_store

from .conftest import CLAUDE, DRILLS, EVAL_RESULTS, EVAL_RUNS, GPT


def _by_hand(run_id: str, target: str) -> dict:
    """A target's figures in one run, from the fixture's rows."""
    cases = [r for r in EVAL_RESULTS if r[0] == run_id and r[1] == target]
    passed = sum(1 for r in cases if r[3])
    return {
        "pass_rate": passed / len(cases),
        "passed": f"{passed}/{len(cases)}",
        "latency_p50_ms": statistics.median(r[5] for r in cases),
        "cost_usd": float(sum(Decimal(r[6]) for r in cases if r[6] is not None)),
    }


def _targets(at) -> pd.DataFrame:
    [table] = [d.value for d in at.dataframe if "pass_rate" in d.value.columns]
    return table.set_index("target")


def test_each_targets_pass_rate_latency_and_cost_come_from_its_cases_in_the_latest_run(app_env):
    at = open_page("readiness")
    assert at.selectbox(key="readiness_route").value == "support"
    table = _targets(at)
    assert list(table.index) == [CLAUDE, GPT], "the primary first"
    assert list(table["role"]) == ["primary", "backup"]
    for target in (CLAUDE, GPT):
        expected = _by_hand("support-2", target)  # the newer of support's two runs
        row = table.loc[target]
        assert row["pass_rate"] == pytest.approx(expected["pass_rate"])
        assert row["passed"] == expected["passed"]
        assert row["latency_p50_ms"] == format_latency(expected["latency_p50_ms"])
        assert row["cost_usd"] == format_usd(expected["cost_usd"])
    assert table.loc[GPT, "pass_rate"] == pytest.approx(3 / 5)
    assert "`cases.toml` · 5 cases · minimum pass rate 80%" in texts(at)


def test_only_the_target_below_the_routes_minimum_is_marked(app_env):
    at = open_page("readiness")
    table = _targets(at)
    minimum = next(run[5] for run in EVAL_RUNS if run[0] == "support-2")
    below = {t for t in table.index if _by_hand("support-2", t)["pass_rate"] < minimum}
    assert below == {GPT}
    assert table["minimum"].to_dict() == {CLAUDE: MET, GPT: BELOW}
    [warning] = at.warning
    assert f"**{GPT}** (backup) passed 60% of the cases (3/5)" in warning.value
    assert "if it had to take the traffic" in warning.value


def test_the_failed_cases_of_the_latest_run_say_why(app_env):
    at = open_page("readiness")
    [failed] = [d.value for d in at.dataframe if "case" in d.value.columns]
    expected = sorted(
        (r[2], r[1], r[4] or r[7]) for r in EVAL_RESULTS if r[0] == "support-2" and not r[3]
    )
    assert list(failed[["case", "target", "reason"]].itertuples(index=False, name=None)) == expected
    assert "Failed cases of the latest run (2)" in [e.label for e in at.expander]


def test_the_pass_rate_chart_and_the_history_of_runs_are_drawn(app_env):
    at = open_page("readiness")
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(charts) == 2
    assert "Pass rate by target, latest run" in charts[0]
    assert "Pass rate by eval run" in charts[1]


def test_the_latest_drill_report_is_shown_with_its_figures(app_env):
    at = open_page("readiness")
    report = next(d[7] for d in DRILLS if d[0] == "drill-2")  # newer than drill-1's
    assert metric(at, "Verdict") == report["verdict"] == "passed"
    assert metric(at, "Served by backups") == "30 of 30"
    assert metric(at, "Failed requests") == "0"
    assert metric(at, "Breaker opened after") == "0.4 s"
    assert metric(at, "Cost difference") == "cost $0.0022 more", "the backups cost more"
    assert metric(at, "Restored") == "yes"
    [restored] = [m for m in at.metric if m.label == "Restored"]
    assert restored.delta == "after 1.2 s"
    shown = texts(at)
    assert report["summary"] in shown
    assert f"A drill on **{GPT}** is running" in shown, "drill-3 has no report yet"


def test_a_drill_that_aborted_itself_says_on_the_page_why_it_failed(tmp_path, monkeypatch):
    """A forced drill through the real chain, recorder and scheduler: the backup's breaker is
    open (its key failed), so the first request fails everywhere and the drill ends itself; the
    page says so, never "failed" and "0 of 1" alone."""
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    world = World(tmp_path, config([], rules=None), start=start)
    try:
        world.minutes(1)
        world.transport.script(PRIMARY, ["529", "529"])  # one request fails on both targets,
        world.transport.script("gpt-4.1-mini", ["401"])  # the backup on its key
        world.minutes(1)
        world.clock.run(start_drill(world.sw, "support", CLAUDE, timedelta(minutes=5),
                                    by="ops@example.com", now=world.now, force=True))  # fmt: skip
        world.minutes(2)
        world.pipeline.publish(world.now)
        [(request_id,)] = world.query("SELECT aborted_by_request FROM drills")
    finally:
        world.close()
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(world.paths.root))
    at = open_page("readiness")
    assert metric(at, "Verdict") == "failed"
    assert metric(at, "Served by backups") == "0 of 1"
    assert metric(at, "Failed requests") == "1"
    [why] = [e.value for e in at.error]
    assert why.startswith("**Why the drill failed**")
    assert f"- aborted after request {request_id} failed: every provider unavailable" in why
    assert "- 1 request failed with every provider unavailable: the drill caused it" in why
    assert ("- started with --force although no other target was healthy: "
            f"backup {GPT}: breaker open (account)") in why  # fmt: skip


def test_a_failed_drill_reported_before_reasons_existed_gives_its_summary_as_the_reason():
    old = next(d for d in DRILLS if d[0] == "drill-1")[7]
    drill = pd.Series({"verdict": "failed", "summary": old["summary"], "report": json.dumps(old)})
    assert drill_why(drill) == [old["summary"]]
    assert drill_why(drill.copy().replace({"failed": "passed"})) == []


def test_a_drill_that_ended_itself_says_why_while_its_report_is_due():
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    why = "aborted: request r1 failed with every provider unavailable"
    [row] = pd.DataFrame([{"target": GPT, "ends_at": at + timedelta(minutes=5), "ended_at": at,
                           "ended_reason": why, "requested_by": "ops"}]).itertuples()  # fmt: skip
    assert waiting_text(row, lambda t: f"{t:%H:%M}") == (
        f"A drill on **{GPT}** has ended (at 09:00, {why}, requested by ops): its report comes "
        "once its attempts are in."
    )


def test_a_passed_drill_keeps_what_its_pre_flight_noted():
    found = f"backup {GPT}: a provider fault (overloaded) 12 s ago"
    report = {"verdict": "passed", "forced": False, "preflight": found, "why": []}
    drill = pd.Series({"verdict": "passed", "summary": "ok", "report": json.dumps(report)})
    assert drill_why(drill) == []
    assert preflight_note(drill) == f"at its start the pre-flight found: {found}"


def test_choosing_another_route_shows_its_run_and_its_missing_drill(app_env):
    at = open_page("readiness")
    at.selectbox(key="readiness_route").set_value("triage").run()
    assert not at.exception
    table = _targets(at)
    assert set(table.index) == {CLAUDE, GPT}
    for target in (CLAUDE, GPT):
        assert table.loc[target, "pass_rate"] == pytest.approx(
            _by_hand("triage-1", target)["pass_rate"]
        )
    assert set(table["minimum"]) == {MET}, "50% is not below a 50% minimum"
    assert not at.warning
    assert len(at.get("plotly_chart")) == 1, "one run: no history"
    assert "Run a drill: `switchover drill --route triage --target" in texts(at)
    assert not [m for m in at.metric if m.label == "Verdict"]


def test_quality_errors_are_summed_per_target_over_the_window(app_env):
    paths, _, _ = app_env
    at = open_page("readiness")
    [shown] = [d.value for d in at.dataframe if "quality_errors" in d.value.columns]
    since = (data.now() - timedelta(hours=1)).replace(second=0, microsecond=0)
    rollups = PublishedData(paths.published).query("minute_rollups", since=since, route="support")
    answered = rollups.groupby("target")["answered"].sum()
    assert shown.set_index("target")["answered"].to_dict() == answered.to_dict()
    assert shown["quality_errors"].sum() == rollups["quality_errors"].sum()


def test_quality_errors_per_answered_divide_by_the_targets_answers():
    rollups = pd.DataFrame(
        {
            "provider": ["claude", "claude", "gpt", "gpt"],
            "target": [CLAUDE, CLAUDE, GPT, GPT],
            "answered": [10, 30, 0, 0],
            "quality_errors": [1, 3, 2, None],
        }
    )
    table = quality_by_target(rollups)
    assert list(table["target"]) == [CLAUDE, GPT]
    assert list(table["quality_errors"]) == [4, 2]
    assert table["per_answered"].iloc[0] == pytest.approx(4 / 40)
    assert pd.isna(table["per_answered"].iloc[1]), "no answer: no share, not infinity"


def test_every_metric_on_the_page_has_its_definition_as_tooltip(app_env):
    at = open_page("readiness")
    assert len(at.metric) == 6
    defined = {define(name) for name in _DEFINED}
    for m in at.metric:
        assert m.proto.help in defined, m.label


_DEFINED = ("drill verdict", "served by backups", "failed in the drill", "breaker opened after",
            "cost difference", "restored")  # fmt: skip


def test_a_route_without_evals_or_drills_says_what_to_run(tmp_path, monkeypatch):
    """Published data with traffic on `support` but no eval run and no drill."""
    paths = DataPaths(tmp_path / "data")
    con = open_store(paths.database)
    try:
        con.execute(
            "INSERT INTO route_primaries BY NAME SELECT 'support' AS route, $t AS target, "
            "'anthropic' AS provider_kind, 'm' AS model, now() AS last_seen",
            {"t": CLAUDE},
        )
        for name in ("route_primaries", "eval_runs", "eval_results", "drills"):
            publish(con, paths.published, name, f"SELECT * FROM {name}")
    finally:
        con.close()
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    at = open_page("readiness")
    shown = texts(at)
    assert "Run `switchover eval cases.toml --route support` (docs/evals.md)" in shown
    assert f"Run a drill: `switchover drill --route support --target {CLAUDE} --for 5m`" in shown
    assert not at.get("plotly_chart") and not at.metric


def test_without_any_data_the_page_says_how_to_send_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "empty"))
    at = open_page("readiness")
    assert "No data yet" in texts(at)


def test_the_incidents_page_lists_the_drills_apart_from_the_incidents(app_env):
    at = open_page("incidents")
    incidents = at.dataframe[0].value
    assert list(incidents["what"]) == ["claude/claude-sonnet-4-5 failing (5xx, 529, timeouts)"], (
        "one incident, the outage: no drill became one"
    )
    [drills] = [d.value for d in at.dataframe if "verdict" in d.value.columns]
    assert list(drills["target"]) == [d[2] for d in sorted(DRILLS, key=lambda d: -d[3])]
    assert list(drills["status"]) == ["running", "reported", "reported"]
    assert list(drills["verdict"]) == ["—", "passed", "failed"]
    assert list(drills["duration"])[1:] == ["5 min", "5 min"]
    assert drills["duration"].iloc[0].endswith(", running")
    assert "A drill is not an incident" in texts(at)
