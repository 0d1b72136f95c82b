"""The weekly report's files: what `switchover report` writes, the HTML opening offline in
headless Chromium with its charts drawn, and the scheduler's Monday job."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from helpers.alert_harness import World, config
from typer.testing import CliRunner

from dashboard.screenshots import _CHARTS_WITH_DATA, CHROMIUM, FLAGS
from engine.cli.main import app
from engine.config import ReportsConfig
from engine.published.read import PublishedData
from engine.reports import render
from engine.reports.week import build_week
from engine.scheduler.weekly_report import weekly_report

WEEK = "2026-W47"
DRILL_AT = datetime(2026, 11, 17, 14, 20, tzinfo=UTC)  # Tuesday, during the traffic below
DRILL = {
    "requests": 30, "served_by": {"gpt/gpt-4.1-mini": 29}, "served_by_backups": 29, "failed": 1,
    "drill_faults": 5, "breaker_opened_after_s": None, "cost_usd": "0.0100",
    "primary_estimate_usd": "0.0125", "cost_difference_usd": "-0.0025", "restored": None,
    "restored_after_s": None, "verdict": "failed", "summary": "the target never recovered",
}  # fmt: skip


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """40 minutes of traffic on Tuesday of week 47, the primary down for 10 of them; a drill
    and an eval run in the middle."""
    world = World(tmp_path_factory.mktemp("week"), config([], rules=None),
                  start=datetime(2026, 11, 17, 14, 0, tzinfo=UTC), per_minute=6)  # fmt: skip
    try:
        con = world.pipeline.con
        con.execute(
            "INSERT INTO drills (drill_id, route, target, started_at, ends_at, ended_at, "
            "requested_by, status, report) VALUES ('d1', 'support', 'claude/claude-sonnet-4-5', "
            "$at, $end, $end, 'ops', 'reported', $report)",
            {"at": DRILL_AT, "end": DRILL_AT + timedelta(minutes=5), "report": json.dumps(DRILL)},
        )
        con.execute(
            "INSERT INTO eval_runs VALUES ('e1', 'support', 'cases.toml', $at, $at, 1, 0.8)",
            {"at": DRILL_AT},
        )
        con.execute("INSERT INTO eval_results VALUES ('e1', 'support', 'gpt/gpt-4.1-mini', "
                    "'refund', true, NULL, 500, 0.0004, 400, 80, NULL)")  # fmt: skip
        world.minutes(15)
        world.primary_fails("overloaded", minutes=10)
        world.minutes(25)
        world.pipeline.day_rollups()
        world.cycle()
    finally:
        world.close()
    return world.paths


def test_switchover_report_writes_every_format_for_the_week(paths, tmp_path):
    result = CliRunner().invoke(app, ["report", "--week", WEEK, "--data-dir", str(paths.root),
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    folder = tmp_path / WEEK
    markdown = (folder / f"reliability-{WEEK}.md").read_text()
    assert "## What changed" in markdown and "## Incidents" in markdown
    assert "| support |" in markdown
    csvs = {p.stem for p in (folder / "csv").glob("*.csv")}
    assert {"availability", "money", "cost_by_route", "cost_by_provider", "cost_by_model",
            "incidents", "drills", "evals", "failures", "breaker_openings", "alerts",
            "summary"} <= csvs  # fmt: skip
    availability = pd.read_csv(folder / "csv" / "availability.csv")
    assert availability["availability"].dtype == float, "numbers, not display text, in the CSV"
    assert str(availability["cost"].iloc[0]).replace(".", "").isdigit()
    incidents = pd.read_csv(folder / "csv" / "incidents.csv")
    assert len(incidents) == 1
    assert incidents["what"].iloc[0] == "claude/claude-sonnet-4-5 failing (5xx, 529, timeouts)"
    if Path(CHROMIUM).exists():
        assert (folder / f"reliability-{WEEK}.pdf").read_bytes().startswith(b"%PDF")


def test_the_drills_and_evals_section_is_in_every_format(paths, tmp_path):
    result = CliRunner().invoke(app, ["report", "--week", WEEK, "--data-dir", str(paths.root),
                                      "--out", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    folder = tmp_path / WEEK
    markdown = (folder / f"reliability-{WEEK}.md").read_text()
    assert "## Drills and evals\n\n### Drills started in the week" in markdown
    drill = (
        "| Tue 17 Nov 14:20 | support | claude/claude-sonnet-4-5 | 5 min | reported "
        "| failed | 30 | 29 | 1 | never | saved $0.0025 | not seen | — | the target never "
        "recovered |"
    )
    run = "| support | gpt/gpt-4.1-mini | Tue 17 Nov 14:20 | cases.toml | 1 | 1 | 100.0% |"
    assert drill in markdown and run in markdown
    page = (folder / f"reliability-{WEEK}.html").read_text()
    assert "<h2>Drills and evals</h2>" in page and "the target never recovered" in page
    drills = pd.read_csv(folder / "csv" / "drills.csv")
    [drill] = drills.to_dict("records")
    assert (drill["served by backups"], drill["failed"]) == (29, 1)
    assert drill["cost difference"] == -0.0025
    assert pd.isna(drill["restored"]), "not seen yet: empty, not false"
    evals = pd.read_csv(folder / "csv" / "evals.csv")
    assert evals[["pass rate", "below minimum"]].to_dict("records") == [
        {"pass rate": 1.0, "below minimum": False}
    ]
    assert (
        "1 drill, 0 passed; claude/claude-sonnet-4-5 on support from Tue 17 Nov 14:20: "
        "the target never recovered." in markdown
    )


def test_a_week_that_is_not_an_iso_week_is_refused(paths):
    result = CliRunner().invoke(app, ["report", "--week", "2026-47", "--data-dir",
                                      str(paths.root)])  # fmt: skip
    assert result.exit_code == 2 and "not an ISO week like 2026-W47" in result.output


def test_the_html_report_opens_offline_and_draws_its_charts(paths, tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing in CI: .ci/run must install Debian's chromium")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    report = build_week(PublishedData(paths.published), WEEK)
    page = tmp_path / "report.html"
    page.write_text(render.html(report))
    asked: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(offline=True)
        context.on("request", lambda r: asked.append(r.url))
        tab = context.new_page()
        tab.goto(page.as_uri())
        tab.wait_for_function(f"() => ({_CHARTS_WITH_DATA})().length == 2", timeout=20_000)
        charts = tab.evaluate(_CHARTS_WITH_DATA)
        tab.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert charts == [True, True]
    assert [url for url in asked if not url.startswith("file:")] == [], "no external asset"
    assert (tmp_path / "report.png").stat().st_size > 20_000


def test_the_scheduler_writes_last_weeks_report_on_monday(paths):
    monday_after = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
    html = weekly_report(paths, ReportsConfig(), now=monday_after)
    assert html == paths.reports / WEEK / f"reliability-{WEEK}.html"
    assert "Reliability report 2026-W47" in html.read_text()
