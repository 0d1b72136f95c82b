"""The weekly report's files: what `switchover report` writes, the HTML opening offline in
headless Chromium with its charts drawn, and the scheduler's Monday job."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from alerts.harness import World, config
from typer.testing import CliRunner

from dashboard.screenshots import _CHARTS_WITH_DATA, CHROMIUM, FLAGS
from engine.cli import app
from engine.config import ReportsConfig
from engine.reports import render
from engine.reports.week import build_week
from engine.scheduler import weekly_report
from engine.store.read import PublishedData

WEEK = "2026-W47"


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """40 minutes of traffic on Tuesday of week 47, the primary down for 10 of them."""
    world = World(tmp_path_factory.mktemp("week"), config([], rules=None),
                  start=datetime(2026, 11, 17, 14, 0, tzinfo=UTC), per_minute=6)  # fmt: skip
    try:
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
            "incidents", "failures", "breaker_openings", "alerts", "summary"} <= csvs  # fmt: skip
    availability = pd.read_csv(folder / "csv" / "availability.csv")
    assert availability["availability"].dtype == float, "numbers, not display text, in the CSV"
    assert str(availability["cost"].iloc[0]).replace(".", "").isdigit()
    incidents = pd.read_csv(folder / "csv" / "incidents.csv")
    assert len(incidents) == 1 and incidents["what"].iloc[0] == "provider claude"
    if Path(CHROMIUM).exists():
        assert (folder / f"reliability-{WEEK}.pdf").read_bytes().startswith(b"%PDF")


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
