"""Operator actions on the dashboard record who took them: a silence asked for on the Incidents
page carries its `created_by` through the scheduler to the Silences table, and a target
switched off on the Live page (after a confirmation) is a switch whose `by` is the person;
nobody signed in, no form."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.dashboard_pages import APP
from streamlit.testing.v1 import AppTest

from dashboard.auth import CONFIG_ENV, SECRET_ENV, SECRETS_FILE_ENV
from engine.alerts.silences import inbox
from engine.state.switches_file import TargetSwitches

SECRET = "correct horse battery staple"
SONNET, MINI = f"claude/{PRIMARY}", "gpt/gpt-4.1-mini"
CONFIG = f"""
[providers.claude]
kind = "anthropic"
[providers.gpt]
kind = "openai"
[routes.support]
targets = ["{SONNET}", "{MINI}"]
[routes.triage]
targets = ["{MINI}"]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Five minutes of the support route's traffic, ending now (its primary down in the
    fourth), published; the scheduler's pipeline stays open, to take in what the dashboard
    asks for."""
    start = (datetime.now(UTC) - timedelta(minutes=5)).replace(second=0, microsecond=0)
    world = World(tmp_path_factory.mktemp("operator"), config([], rules=None), start=start)
    world.minutes(3)
    world.primary_fails("overloaded", minutes=1)  # the backup serves a minute
    world.minutes(2)
    world.pipeline.publish(world.now)
    yield world
    world.close()


@pytest.fixture
def board(world, monkeypatch):
    """The dashboard on the world's data folder, with no switch and no silence pending."""
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(world.paths.root))
    for name in (SECRET_ENV, SECRETS_FILE_ENV, CONFIG_ENV):
        monkeypatch.delenv(name, raising=False)
    yield world
    world.paths.target_switches.unlink(missing_ok=True)
    for pending in inbox(world.paths).glob("*.json"):
        pending.unlink()


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def opened(page: str | None = None, *, as_: str | None = None) -> AppTest:
    """The app, signed in with the shared secret as `as_` when given, on `page`."""
    at = run(AppTest.from_file(APP, default_timeout=60))
    if as_ is not None:
        at.text_input[0].input(as_)
        at.text_input[1].input(SECRET)
        at.button[0].click()
        run(at)
    if page is not None:
        at.switch_page(f"views/{page}.py")
        run(at)
    return at


def press(at: AppTest, label: str) -> AppTest:
    [found] = [b for b in at.button if b.label == label]
    found.click()
    return run(at)


def labels(at: AppTest) -> list[str]:
    return [w.label for w in (*at.text_input, *at.button, *at.checkbox)]


def requested_silences(world: World) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(inbox(world.paths).glob("*.json"))]


def switches(world: World) -> list[dict]:
    return asyncio.run(TargetSwitches(world.paths.target_switches).entries())


def silence(at: AppTest, rule: str, reason: str) -> AppTest:
    [rule_box] = [t for t in at.text_input if t.label == "Rule"]
    [reason_box] = [t for t in at.text_input if t.label == "Reason" and t.form_id == "silence"]
    rule_box.input(rule)
    reason_box.input(reason)
    return press(at, "Silence")


def test_the_operator_forms_are_there_only_once_signed_in(board, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    before = opened()
    assert "Rule" not in labels(before) and "Disable" not in labels(before)
    after = opened("incidents", as_="alice")
    assert "Rule" in labels(after) and "Silence" in labels(after)


def test_a_silence_asked_for_on_the_dashboard_reaches_the_silences_table_with_who(
    board, monkeypatch
):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    at = silence(opened("incidents", as_="alice"), "fallback-rate-5m", "known outage")
    assert any("Silence requested for fallback-rate-5m" in s.value for s in at.success)
    [asked] = requested_silences(board)
    assert asked["created_by"] == "dashboard: alice"
    board.cycle()  # the scheduler takes it in and publishes
    stored = board.query("SELECT rule, reason, created_by FROM alert_silences")
    assert ("fallback-rate-5m", "known outage", "dashboard: alice") in stored
    shown = opened("incidents", as_="bob")
    [table] = [d.value for d in shown.dataframe if "created_by" in d.value.columns]
    row = table[table["reason"] == "known outage"].iloc[0]
    assert (row["rule"], row["created_by"]) == ("fallback-rate-5m", "dashboard: alice")


def test_on_loopback_without_a_sign_in_the_local_user_silences(board):
    silence(opened("incidents"), "breaker-open", "deploying")
    [asked] = requested_silences(board)
    assert (asked["rule"], asked["created_by"]) == ("breaker-open", "dashboard: local")


def test_disabling_a_target_needs_the_confirmation_and_records_the_person(board, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    at = opened(as_="alice")
    assert at.selectbox(key="switch_target").options == [SONNET, MINI]  # the traffic's targets
    at.selectbox(key="switch_target").set_value(SONNET)
    at.text_input(key="switch_reason").input("529s since 10:02")
    press(at, "Disable")
    assert switches(board) == []
    assert any("tick the confirmation" in w.value for w in at.warning)
    at.checkbox(key="switch_sure").check()
    press(at, "Disable")
    [switch] = switches(board)
    assert (switch["target"], switch["route"], switch["by"], switch["reason"]) == (
        SONNET, None, "dashboard: alice", "529s since 10:02",
    )  # fmt: skip
    assert any(f"{SONNET} disabled for every route by dashboard: alice" in s.value
               for s in at.success)  # fmt: skip
    [listing] = [d.value for d in at.dataframe if "by" in d.value.columns]
    assert listing[["target", "route", "by"]].values.tolist() == [
        [SONNET, "every route", "dashboard: alice"]
    ]


def test_enabling_a_target_again_from_the_live_page(board, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    asyncio.run(TargetSwitches(board.paths.target_switches).disable(MINI, by="cli (ops)"))
    at = opened(as_="alice")
    press(at, f"Enable {MINI} (every route)")
    assert switches(board) == []
    assert any(f"{MINI} enabled." in s.value for s in at.success)


def test_with_the_configuration_a_switch_for_one_route_names_only_its_targets(
    board, monkeypatch, tmp_path
):
    path = tmp_path / "switchover.toml"
    path.write_text(CONFIG)
    monkeypatch.setenv(CONFIG_ENV, str(path))
    at = opened()  # loopback, nothing configured: the local user
    at.selectbox(key="switch_target").set_value(SONNET)
    at.selectbox(key="switch_route").set_value("triage")
    at.checkbox(key="switch_sure").check()
    press(at, "Disable")
    assert switches(board) == []
    assert any("route triage has no such target" in w.value for w in at.warning)
    at.selectbox(key="switch_target").set_value(MINI)
    at.checkbox(key="switch_sure").check()
    press(at, "Disable")
    [switch] = switches(board)
    assert (switch["target"], switch["route"], switch["by"]) == (MINI, "triage", "dashboard: local")
