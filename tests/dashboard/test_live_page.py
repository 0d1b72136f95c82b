"""The Live page through Streamlit's AppTest: on the fixture dataset (an outage that ended 20
minutes ago), on a world whose primary's key is revoked as the data ends, and on one whose
primary is overloaded as the data ends, beside a real gateway whose breaker has moved on since
the published events."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

import httpx
import pandas as pd
import pytest
from gateway.conftest import PROVIDER_KEYS, ServerThread, config_for
from helpers.alert_harness import PRIMARY, World, config
from helpers.dashboard_pages import metric as _metric
from helpers.dashboard_pages import open_page, open_with_choices, texts

from dashboard import data
from dashboard.live_breakers import GATEWAY_URL_ENV
from engine.gateway.app import GatewaySettings, create_app
from engine.published.publish import read_manifest
from engine.published.read import PublishedData
from engine.runtime.switchover import Switchover
from engine.state.breaker import BreakerState
from engine.telemetry.breaker_events import EVENTS_DIR, event_for_change, write_events
from simulations.fakes import FakeProviders

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
    passed = r"(, \d+ of \d+ requests of support went to backups)?"
    breaker = r"breaker open \((account|probe failed)\) for [\d a-z]+, "
    breaker += r"(next probe in [\d a-z]+|probe due)"
    line = rf"\*\*{SONNET}\*\* down\] · last 5 min: {failing}{passed} · {breaker}"
    assert re.search(line, shown), shown
    assert re.search(rf"\*\*{HAIKU}\*\* healthy\] · last 5 min: none of \d+ attempts failed", shown)
    assert f"served by {HAIKU} 100% · now (last min) and last 5 min" in shown
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


# --- the breakers the gateway uses, and "now" --------------------------------------------------

WINDOWS = re.compile(
    r"last 5 min|last min|in this incident so far|this week|in the last 5 min|"
    r"\b(15 min|1 h|6 h|24 h|7 d)\b"
)
FIGURES = re.compile(r"\d[\d,.]*\s?(%|requests|attempts|/min|/h)|\$\d")


@pytest.fixture(scope="module")
def outage(tmp_path_factory):
    """20 minutes of support traffic ending now; for the last 3, Sonnet is overloaded (529) and
    Haiku, the next target, answers. The published breaker events end with Sonnet half-open:
    a probe admitted 5 s before the data's time, whose failure and reopening the scheduler has
    not taken in yet, as a published snapshot always trails the gateway."""
    start = (datetime.now(UTC) - timedelta(minutes=20)).replace(second=0, microsecond=0)
    data = config([], rules=None)
    data["routes"]["support"]["targets"] = [SONNET, HAIKU, GPT]
    world = World(tmp_path_factory.mktemp("outage"), data, start=start, per_minute=6)
    try:
        world.minutes(17)
        world.primary_fails("overloaded", minutes=3)
        world.minutes(3)
        admitted = world.now - timedelta(seconds=5)
        was, now = BreakerState(status="open"), BreakerState(status="half_open")
        probe = event_for_change(SONNET, was, now, wall=admitted, now=0.0)
        write_events(world.paths.spool / EVENTS_DIR, [probe])
        world.cycle()
        world.pipeline.publish(world.now)
        attempts = world.pipeline.con.execute("SELECT * FROM attempts").df()
    finally:
        world.close()
    return world.paths, attempts


@pytest.fixture
def gateway(outage, monkeypatch):
    """The real gateway app on a free port, recording into the outage's data folder (so its
    breakers live in that folder's SQLite file, as `switchover serve` keeps them), on fake
    providers where Sonnet answers 529: one request opens its breaker for 2 minutes."""
    paths, _ = outage
    fake = FakeProviders.start_in_thread(valid_keys=list(PROVIDER_KEYS.values()))
    fake.script(PRIMARY, ["529"], cycle=True)
    routes = {"support": {"targets": [SONNET, HAIKU, GPT], "breaker_failures": 1,
                          "breaker_cooldown_s": 120}}  # fmt: skip
    sw = Switchover(config_for(fake, routes), environ=PROVIDER_KEYS, record_to=paths)
    server = ServerThread(create_app(sw, GatewaySettings(), owns=True))
    question = {"model": "support", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=question, timeout=30)
    assert answer.status_code == 200, answer.text
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    monkeypatch.setenv(GATEWAY_URL_ENV, server.url)
    try:
        yield server
    finally:
        server.stop()
        fake.close()
        for leftover in paths.breaker_states.parent.glob("breakers.sqlite*"):
            leftover.unlink()


def _gateway_says(server) -> dict:
    return httpx.get(f"{server.url}/v1/status").json()["breakers"][SONNET]


def _seconds(said: str) -> int:
    """ "1 min 55 s", "2 min", "45 s" as seconds."""
    found = re.fullmatch(r"(?:(\d+) min)? ?(?:(\d+) s)?", said)
    assert found and said, said
    return int(found[1] or 0) * 60 + int(found[2] or 0)


def _line_of(shown: str, target: str) -> str:
    [line] = [line for line in shown.splitlines() if f"**{target}**" in line]
    return line


def test_live_shows_the_breaker_the_gateway_holds_not_the_published_events(outage, gateway):
    """The events say half-open, probe under way; the gateway says open, n s left: the page
    says what the gateway says, with its seconds, as of the moment it asked."""
    paths, _ = outage
    every = datetime(2000, 1, 1, tzinfo=UTC)
    events = PublishedData(paths.published).query("breaker_events", since=every)
    assert events[events["target"] == SONNET].iloc[-1]["to_status"] == "half_open"
    before = _gateway_says(gateway)
    at = open_page()
    after = _gateway_says(gateway)
    assert before["status"] == after["status"] == "open"
    shown = texts(at)
    line = _line_of(shown, SONNET)
    said = re.search(
        r"\] · last 5 min: .+ · breaker open \(failures\) for (?P<ago>[\d a-z]+), "
        r"next probe in (?P<left>[\d a-z]+)$",
        line,
    )
    assert f"**{SONNET}** down]" in line and said, line
    assert after["open_remaining_s"] - 1 <= _seconds(said["left"]) <= before["open_remaining_s"]
    assert _seconds(said["ago"]) <= after["opened_s_ago"] + 1, "since it opened, not the outage"
    assert "half-open" not in line
    assert f"breakers now, from the gateway ({gateway.url}) at " in shown
    assert "published events" not in shown


def test_with_the_gateway_gone_live_reads_the_breaker_store_it_used(outage, gateway):
    """The data folder's SQLite file is where the gateway's workers keep their breakers: the
    page reads it (never writing) and says the gateway did not answer."""
    gateway.stop()
    time.sleep(data.BREAKERS_TTL_S)  # the reading the last page took is kept this long
    shown = texts(open_page())
    line = _line_of(shown, SONNET)
    assert re.search(r"breaker open \(failures\) for [\d a-z]+, next probe in [\d a-z]+$", line)
    outage_paths, _ = outage
    store = outage_paths.breaker_states
    assert f"from the breaker store the gateway uses (the data folder's file: {store})" in shown
    assert f"Breakers: the gateway at {gateway.url} did not answer (ConnectError)." in shown


def test_without_gateway_or_store_the_published_events_are_shown_with_their_age(
    outage, monkeypatch
):
    """The last resort says it is one, and claims nothing the events cannot know."""
    paths, _ = outage
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    at = open_page()
    shown = texts(at)
    line = _line_of(shown, SONNET)
    assert re.search(r"· breaker half-open for \d+ s$", line), line
    assert "probe under way" not in shown
    [warning] = [w.value for w in at.warning if w.value.startswith("Breakers: ")]
    data_time = _data_time(paths)
    assert re.search(rf"Shown from the published events as of {data_time:%H:%M:%S} UTC, "
                     r"[\d a-z]+ old: they lag the gateway", warning), warning  # fmt: skip


def test_during_an_outage_the_routes_say_who_serves_now_beside_the_last_5_min(outage, monkeypatch):
    """Sonnet failed for the last 3 minutes: the last minute is Haiku's alone, the 5 minutes
    still partly Sonnet's; both shares checked against the attempts."""
    paths, attempts = outage
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    shown = texts(open_page())
    end = _data_time(paths)
    answers = attempts[attempts["served"] & (attempts["outcome"] == "success")]
    last_minute = answers[answers["started_at"] >= end - timedelta(minutes=1)]
    assert set(last_minute["target"]) == {HAIKU}, "the ground truth: Haiku alone, now"
    start, _, _ = _span(paths, timedelta(minutes=5))
    requests = _requests(attempts, start, end)
    served = answers.set_index("request_id").reindex(requests.index)["target"].value_counts()
    said = re.search(rf"served by · now \(last min\): {HAIKU} 100% · last 5 min: (.+)$", shown,
                     re.MULTILINE)  # fmt: skip
    assert said, shown
    five = dict(part.rsplit(" ", 1) for part in said[1].split(", "))
    assert set(five) == {SONNET, HAIKU}
    for target, percent in five.items():
        assert abs(int(percent.rstrip("%")) - 100 * served[target] / served.sum()) < 1


def test_every_figure_on_live_names_its_window(outage, monkeypatch):
    """An incident's "18 requests affected" beside a target's "18 of 30 requests went to
    backups" must not look contradictory: each says what it counts over, and the page says
    once the time they all count to."""
    paths, _ = outage
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    at = open_page()
    blocks = [m.value for m in at.markdown] + [c.value for c in at.caption]
    blocks += [e.value for kind in ("error", "warning", "info") for e in at.get(kind)]
    lines = [line for block in blocks for line in block.splitlines() if FIGURES.search(line)]
    assert any("in this incident so far" in line for line in lines), "the fixture's incident"
    unnamed = [line for line in lines if not WINDOWS.search(line)]
    assert unnamed == [], unnamed
    assert all("· last 5 min" in m.label for m in at.metric)
    data_time = _data_time(paths)
    assert f"As of {data_time:%H:%M:%S} UTC: the time of the published data" in texts(at)
