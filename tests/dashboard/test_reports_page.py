"""The Reports page: any published week's report, the same figures as the report files."""

from __future__ import annotations

from helpers.dashboard_pages import arrow_fixes, open_page, texts

from engine.published.read import PublishedData
from engine.reports.week import build_week


def test_this_weeks_report_shows_its_summary_tables_charts_and_downloads(app_env):
    paths, _, _ = app_env
    at = open_page("reports")
    this_week = at.selectbox(key="report_week").options[0]
    at.selectbox(key="report_week").set_value(this_week).run()
    assert not at.exception, [e.value for e in at.exception]
    week = this_week.split(" ")[0]
    report = build_week(PublishedData(paths.published), week)
    shown = texts(at)
    for sentence in report.summary:
        assert sentence in shown
    availability = at.dataframe[0].value.set_index("route")
    for route in report.routes:
        assert availability.loc[route.route, "requests"] == route.requests
    assert len(at.get("plotly_chart")) == 2
    assert len(at.get("download_button")) == 3


def test_every_table_of_the_report_reaches_the_page_as_it_is(app_env):
    """No column mixes numbers with "—" (a drill still running has no request count yet), so
    Streamlit never logs an Arrow conversion it had to fix."""
    with arrow_fixes() as fixed:
        at = open_page("reports")
        at.selectbox(key="report_week").set_value(at.selectbox(key="report_week").options[0])
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    [drills] = [d.value for d in at.dataframe if "served by backups" in d.value.columns]
    assert "—" in set(drills["requests"]), "the running drill: no report, no count yet"
    assert fixed == []


def test_a_week_without_traffic_says_so(app_env):
    at = open_page("reports")
    two_weeks_ago = at.selectbox(key="report_week").options[2]  # the fixture spans 100 minutes
    at.selectbox(key="report_week").set_value(two_weeks_ago).run()
    assert "No traffic was recorded" in texts(at)
