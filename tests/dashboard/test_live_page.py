"""The Live page through Streamlit's AppTest: on the fixture dataset (an outage that ended 20
minutes ago), and on a world whose primary's key is revoked as the data ends."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.dashboard_pages import metric as _metric
from helpers.dashboard_pages import open_page, open_with_choices, texts

from engine.published.publish import read_manifest

SONNET, HAIKU, GPT = f"claude/{PRIMARY}", "claude/claude-haiku-4-5", "gpt/gpt-4.1-mini"
UNREADABLE = re.compile(r"\bNone\b|\b(?i:nan)\b|<NA>|\bNaT\b|0E-9")


def _requests(attempts: pd.DataFrame, since: datetime, until: datetime) -> pd.DataFrame:
    """One row a request whose first attempt is in [since, until): whether a backup served it."""
    first = attempts.groupby("request_id").agg(started=("started_at", "min"))
    served = attempts[attempts["served"] & (attempts["outcome"] == "success")]
    first["by_fallback"] = served.set_index("request_id")["fallback_depth"].reindex(first.index) > 0
    return first[(first["started"] >= since) & (first["started"] < until)]


def _data_time(paths) -> pd.Timestamp:
    """When the data was taken: the scheduler cycle the recent attempts are stamped with."""
    return pd.Timestamp(read_manifest(paths.published)["recent_attempts"].written_at)


def _span(paths, length: timedelta) -> tuple[pd.Timestamp, pd.Timestamp, float]:
    """From the start of the minute `length` before the data's time to that time, and the
    minutes between."""
    end = _data_time(paths)
    start = (end - length).floor("min")
    return start, end, (end - start).total_seconds() / 60


def _caption_beside(at, window: str, name: str) -> str:
    """The window's figure under the headline figure `name` ("1 h: 4.5/min")."""
    labels = [m.label for m in at.metric]
    beside = [c.value for c in at.caption if c.value.startswith(f"{window}: ")]
    return beside[labels.index(f"{name} · last 5 min")]


def _everything_shown(at) -> str:
    tables = [e.value.to_string() for e in at.dataframe]
    return "\n".join([texts(at), *(f"{m.label} {m.value}" for m in at.metric), *tables])


def test_the_headline_is_the_last_5_min_with_the_windows_figure_beside_it(app_env):
    """Rates over the exact time elapsed, from the attempts themselves."""
    paths, attempts, _ = app_env
    start, end, minutes = _span(paths, timedelta(minutes=5))
    hour_start, _, hour_minutes = _span(paths, timedelta(hours=1))
    at = open_page()
    recent = _requests(attempts, start, end)
    hour = _requests(attempts, hour_start, end)
    assert _metric(at, "Requests/min · last 5 min") == f"{len(recent) / minutes:,.1f}"
    assert _metric(at, "Fallback rate · last 5 min") == f"{recent['by_fallback'].mean():.1%}"
    assert _metric(at, "Availability · last 5 min") == "100.0%"
    beside = f"1 h: {len(hour) / hour_minutes:,.1f}/min"
    assert _caption_beside(at, "1 h", "Requests/min") == beside
    assert _caption_beside(at, "1 h", "Fallback rate") == f"1 h: {hour['by_fallback'].mean():.1%}"
    span = f"{start:%H:%M}–{end:%H:%M:%S} UTC"
    said = texts(at)
    assert f"{span} (" in said and f"{len(recent):,} requests · under each figure" in said


def test_choosing_another_window_changes_the_figure_beside_each(app_env):
    paths, attempts, _ = app_env
    start, end, minutes = _span(paths, timedelta(minutes=15))
    at = open_page()
    at.sidebar.selectbox(key="window").set_value("15 min").run()
    assert not at.exception
    window = _requests(attempts, start, end)
    beside = f"15 min: {len(window) / minutes:,.1f}/min"
    assert _caption_beside(at, "15 min", "Requests/min") == beside
    assert _caption_beside(at, "15 min", "Fallback rate") == (
        f"15 min: {window['by_fallback'].mean():.1%}"
    )


def test_a_week_reads_hours_and_the_axes_name_the_chosen_time_zone(app_env):
    at = open_with_choices(window="7 d", timezone="Asia/Tokyo")
    axes = {json.loads(c.proto.spec)["layout"]["xaxis"]["title"]["text"]
            for c in at.get("plotly_chart")}  # fmt: skip
    assert axes == {"time (Asia/Tokyo)"}
    assert _caption_beside(at, "7 d", "Latency p99").endswith("(worst hour)")
    assert "Each bar or point is one hour, in Asia/Tokyo." in texts(at)
    assert "Attempt timelines cover the last 24 h." in texts(at)
    assert UNREADABLE.findall(_everything_shown(at)) == []


def test_the_window_draws_its_timelines_and_the_page_shows_no_none_nan_or_na(app_env):
    at = open_page()
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles == [
        "Requests by the target that answered", "Fallback rate by route",
        "Failed attempts by class", "Latency of attempts", "Cost and fallback premium",
    ], "every timeline but time to first token: nothing was streamed"  # fmt: skip
    assert "No streamed answers in this window." in texts(at)
    shown = _everything_shown(at)
    assert f"**{SONNET}** healthy" in shown and "served by " + SONNET + " 100%" in shown
    assert "drill on support" in shown, "the drill running on the backup is named beside it"
    assert UNREADABLE.findall(shown) == []


@pytest.fixture(scope="module")
def revoked_key(tmp_path_factory):
    """20 minutes of support traffic ending now; for the last 8, Sonnet's key is refused (401),
    so its breaker holds it back and Haiku, the next target and a cheaper one, answers."""
    start = (datetime.now(UTC) - timedelta(minutes=20)).replace(second=0, microsecond=0)
    data = config([], rules=None)
    data["routes"]["support"]["targets"] = [SONNET, HAIKU, GPT]
    world = World(tmp_path_factory.mktemp("revoked"), data, start=start, per_minute=6)
    try:
        world.minutes(12)
        world.primary_fails("auth", minutes=8)
        world.minutes(8)
        world.pipeline.publish(world.now)
    finally:
        world.close()
    return world.paths


def test_during_an_outage_live_names_the_failing_model_its_breaker_and_who_serves(
    revoked_key, monkeypatch
):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(revoked_key.root))
    at = open_page()
    shown = _everything_shown(at)
    failing = r"(no attempts|(\d+) of \2 attempts failed \(100%: authentication 401\))"
    breaker = r"breaker open \((account|probe failed)\) for [\d a-z]+, probe (in [\d a-z]+|due)"
    assert re.search(rf"\*\*{SONNET}\*\* down\] · {failing} · {breaker}", shown), shown
    assert re.search(rf"\*\*{HAIKU}\*\* healthy\] · none of \d+ attempts failed", shown)
    assert f"served by {HAIKU} 100%" in shown
    assert _metric(at, "Fallback rate · last 5 min") == "100.0%"
    # A saving or a cost, said as such: Haiku's prices are lower, but it caches no prompt under
    # 4,096 tokens, and whether Sonnet's cache-hit baseline (its previous hour) exists yet
    # depends on the minute this test runs at.
    premium = _metric(at, "Fallback premium/hour · last 5 min")
    assert re.fullmatch(r"saved \$[\d,.]+|cost \$[\d,.]+ more", premium), premium
    assert f"incident: {SONNET} (account)" in shown, "marked on the timelines"
    incidents = [e.value for e in at.error if e.value.startswith("**Ongoing incident**")]
    assert not incidents, "every request was answered: a warning, not red"
    assert UNREADABLE.findall(shown) == []
