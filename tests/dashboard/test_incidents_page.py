"""The Incidents & alerts page on two overlapping incidents of two routes: each incident's
detail shows only the routes and targets it touched, and every target keeps its colour."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.dashboard_pages import dollars, open_page, texts

from dashboard.charts import FAILED, colour_of
from engine.published.read import PublishedData

from .test_live_page import UNREADABLE

SONNET, HAIKU = f"claude/{PRIMARY}", "claude/claude-haiku-4-5"
MINI, GPT41 = "gpt/gpt-4.1-mini", "gpt/gpt-4.1"
ROUTES = {"support": [SONNET, MINI], "summarize": [HAIKU, GPT41]}


@pytest.fixture(scope="module")
def two_incidents(tmp_path_factory):
    """40 minutes ending now: Sonnet (support's primary) answers 529 from minute 20 for 8
    minutes; from minute 23 Haiku (summarize's primary) has its key refused for 3."""
    start = (datetime.now(UTC) - timedelta(minutes=40)).replace(second=0, microsecond=0)
    world = World(tmp_path_factory.mktemp("incidents-page"), config([], [], routes=ROUTES),
                  start=start, routes=("support", "summarize"))  # fmt: skip
    try:
        world.minutes(20)
        world.fails(PRIMARY, "overloaded", minutes=8)
        world.minutes(3)
        world.fails("claude-haiku-4-5", "auth", minutes=3)
        world.minutes(17)
        world.pipeline.publish(world.now)
    finally:
        world.close()
    published = PublishedData(world.paths.published)
    try:
        incidents = published.query("incidents", since=start)
    finally:
        published.close()
    return world.paths, incidents


@pytest.fixture
def page(two_incidents, monkeypatch):
    paths, incidents = two_incidents
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    return open_page("incidents"), incidents


def _figure(at, title: str) -> dict:
    [spec] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
              if title in c.proto.spec]  # fmt: skip
    return spec


def _choose(at, target: str, incidents):
    [incident_id] = incidents[incidents["subject"] == target]["incident_id"]
    at.selectbox(key="incident").set_value(incident_id).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_two_incidents_are_listed_by_what_failed_and_how(page):
    at, incidents = page
    table = at.dataframe[0].value
    assert list(table["what"]) == [
        f"{HAIKU} refusing its key or account (401, 403, 402, 404 model, quota)",
        f"{SONNET} failing (5xx, 529, timeouts)",
    ]
    assert dict(zip(table["what"].str.split(" ").str[0], table["routes"], strict=True)) == {
        SONNET: "support",
        HAIKU: "summarize",
    }
    assert all(text.startswith(("saved $", "cost $", "no difference")) for text in
               table["extra_cost"]), "money said as a saving or a cost"  # fmt: skip
    assert len(incidents) == 2


@pytest.mark.parametrize(
    ("target", "route", "targets"),
    [(SONNET, "support", {SONNET, MINI}), (HAIKU, "summarize", {HAIKU, GPT41})],
)
def test_the_detail_shows_only_the_routes_and_targets_the_incident_touched(
    page, target, route, targets
):
    at, incidents = page
    at = _choose(at, target, incidents)
    assert f"routes affected: {route} ·" in texts(at)
    traffic = _figure(at, "Where the traffic went")
    shown = {trace["name"] for trace in traffic["data"]}
    assert shown - {"failed"} == targets, "the route's primary and its backup, nothing else"
    breakers = [d.value for d in at.dataframe if "from_status" in d.value.columns]
    for frame in breakers:
        assert set(frame["target"]) <= targets


def test_every_target_has_its_one_colour_in_every_incident(page):
    at, incidents = page
    seen: dict[str, set[str]] = {}
    for target in (SONNET, HAIKU):
        at = _choose(at, target, incidents)
        for title in ("Where the traffic went", "Incidents"):
            for trace in _figure(at, title)["data"]:
                seen.setdefault(trace["name"], set()).add(trace["marker"]["color"])
    expected = {name: {FAILED if name == "failed" else colour_of(name)} for name in seen}
    assert seen == expected
    assert {SONNET, HAIKU, MINI, GPT41} <= set(seen)


def test_no_cell_of_any_table_or_figure_reads_none_nan_or_na(page):
    """Breaker events without a reason, alerts not yet resolved: "—", never None."""
    at, incidents = page
    for target in (SONNET, HAIKU):
        at = _choose(at, target, incidents)
        tables = [d.value.to_string() for d in at.dataframe]
        metrics = [f"{m.label} {m.value}" for m in at.metric]
        assert UNREADABLE.findall("\n".join([texts(at), *metrics, *tables])) == []
        assert any("—" in table for table in tables), "the missing values are said as —"


def test_the_period_at_a_glance_is_the_total_of_the_incidents_table(page):
    at, incidents = page
    table = at.dataframe[0].value
    headline = {m.label: m.value for m in at.metric[:6]}
    assert headline["Incidents"] == str(len(table)) == str(len(incidents))
    assert headline["Ongoing now"] == str(int(incidents["ended_at"].isna().sum()))
    assert (
        headline["Requests affected (all incidents)"]
        == f"{int(table['requests_affected'].sum()):,}"
    )
    assert headline["Failed (all incidents)"] == f"{int(table['failed'].sum()):,}"
    assert dollars(headline["Extra cost (all incidents)"]) == sum(map(dollars, table["extra_cost"]))
    alerts = [d.value for d in at.dataframe if {"rule", "fired_at"} <= set(d.value.columns)]
    assert headline["Alerts fired"] == str(sum(len(frame) for frame in alerts))
    assert "The period at a glance" in texts(at) and "to now (UTC)" in texts(at)


def test_a_period_without_incidents_says_none_and_raises_nothing(tmp_path, monkeypatch):
    start = (datetime.now(UTC) - timedelta(minutes=10)).replace(second=0, microsecond=0)
    world = World(tmp_path, config([], []), start=start)
    try:
        world.minutes(10)
        world.pipeline.publish(world.now)
    finally:
        world.close()
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(world.paths.root))
    at = open_page("incidents")
    assert not at.exception, [e.value for e in at.exception]
    shown = {m.label.split(" ·")[0]: m.value for m in at.metric}
    assert shown["Incidents"] == "0" and shown["Ongoing now"] == "0", shown
