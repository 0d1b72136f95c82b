"""Drills that cannot cause an outage, through a real gateway and the `switchover drill`
command: a drill refuses to start while no other target of its route is healthy (its breaker
open, turned off by an operator, or failing in the last five minutes) unless forced, and a
drill ends itself at the first request that fails with every provider unavailable, after which
the drilled target is probed at once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from engine.cli.main import app
from engine.core.paths import DataPaths

from .conftest import GATEWAY_KEY, user

ROUTE, TARGET, BACKUP = "classify", "gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"
ADMIN = "admin-key-1"


def ask(gw, model: str = ROUTE) -> httpx.Response:
    return httpx.post(
        gw.openai_url + "/chat/completions",
        json={"model": model, "messages": user()},
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
    )


def admin(gw, path: str, body: dict | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {ADMIN}"}
    if body is None:
        return httpx.get(gw.url + path, headers=headers)
    return httpx.post(gw.url + path, json=body, headers=headers)


def start(gw, **extra) -> httpx.Response:
    return admin(gw, "/admin/drills/start", {"route": ROUTE, "target": TARGET, "for_s": 600,
                                             **extra})  # fmt: skip


@pytest.fixture
def gw(gateway, tmp_path):
    return gateway(
        {ROUTE: [TARGET, BACKUP]}, keys=[GATEWAY_KEY], admin_keys=[ADMIN],
        record_to=DataPaths(tmp_path),
    )  # fmt: skip


def breaker_opened_by_its_key(gw, fake) -> None:
    """The backup's key fails one request that names it alone: its breaker opens (account)."""
    fake.script("claude-haiku-4-5", ["401"])
    assert ask(gw, BACKUP).status_code >= 500


def disabled_by_an_operator(gw, fake) -> None:
    body = {"target": BACKUP, "route": ROUTE, "reason": "key rotation"}
    assert admin(gw, "/admin/targets/disable", body).status_code == 200


def overloaded_a_moment_ago(gw, fake) -> None:
    """One 529, then an answer on the retry: the breaker stays closed, the fault is recent."""
    fake.script("claude-haiku-4-5", ["529"])
    assert ask(gw, BACKUP).status_code == 200


@pytest.mark.parametrize(
    ("make_unhealthy", "why"),
    [
        (breaker_opened_by_its_key, r"breaker open \(account\)"),
        (disabled_by_an_operator, r"disabled by an operator switch \(key rotation\)"),
        (overloaded_a_moment_ago, r"a provider fault \(overloaded\) \d+ s ago"),
    ],
    ids=["breaker open", "disabled", "recent fault"],
)
def test_a_drill_without_a_healthy_backup_is_refused_with_the_reason(
    gw, fake, tmp_path, make_unhealthy, why
):
    make_unhealthy(gw, fake)
    reply = start(gw)
    assert reply.status_code == 409, reply.text
    error = reply.json()["error"]
    assert error["type"] == "drill_refused"
    assert f"no other target of route {ROUTE} is healthy now" in error["message"]
    assert re.search(f"backup {BACKUP}: {why}", error["message"]), error["message"]
    assert admin(gw, "/admin/drills").json()["drills"] == []
    assert not list(DataPaths(tmp_path).drills_inbox.glob("*.json")), "no record of a drill"
    assert ask(gw).headers["x-switchover-provider"] == "gpt", "the primary still serves"


def test_force_starts_the_refused_drill_and_its_record_keeps_what_the_pre_flight_found(
    gw, fake, tmp_path
):
    breaker_opened_by_its_key(gw, fake)
    reply = start(gw, force=True)
    assert reply.status_code == 200, reply.text
    drill = reply.json()["drill"]
    assert drill["forced"] is True
    assert drill["preflight"].startswith(f"backup {BACKUP}: breaker open (account)")
    record = DataPaths(tmp_path).drills_inbox / f"{drill['drill_id']}.json"
    assert json.loads(record.read_text())["preflight"] == drill["preflight"]
    assert admin(gw, "/admin/drills").json()["drills"][0]["forced"] is True


def test_force_must_be_true_or_false(gw):
    reply = start(gw, force="yes")
    assert reply.status_code == 400 and "force" in reply.json()["error"]["message"]


def test_a_drill_ends_itself_at_the_first_request_that_fails_and_the_target_probes_at_once(
    gw, fake, tmp_path
):
    drill = start(gw).json()["drill"]
    assert drill["forced"] is False and drill["preflight"] is None
    fake.script("claude-haiku-4-5", ["500"])  # the backup fails the next request
    failed = ask(gw)
    assert failed.status_code >= 500
    request_id = failed.headers["x-request-id"]
    assert admin(gw, "/admin/drills").json()["drills"] == [], "ended before the error went out"
    record = json.loads(
        (DataPaths(tmp_path).drills_inbox / f"{drill['drill_id']}.json").read_text()
    )
    assert record["aborted_by_request"] == request_id
    assert record["ended_reason"] == (
        f"aborted: request {request_id} failed with every provider unavailable"
    )
    served = ask(gw)
    assert served.status_code == 200 and served.headers["x-switchover-provider"] == "gpt"
    assert served.headers["x-switchover-attempts"] == "1"
    probe = gw.attempts[-1]
    assert (probe.target, probe.breaker_state, probe.served) == (TARGET, "half_open", True)


def test_a_failure_on_another_route_leaves_the_drill_running(gateway, fake, tmp_path):
    gw = gateway({ROUTE: [TARGET, BACKUP], "summarize": [BACKUP]}, keys=[GATEWAY_KEY],
                 admin_keys=[ADMIN], record_to=DataPaths(tmp_path))  # fmt: skip
    start(gw)
    fake.script("claude-haiku-4-5", ["500", "500"])  # summarize's only target, and its retry
    assert ask(gw, "summarize").status_code >= 500
    assert len(admin(gw, "/admin/drills").json()["drills"]) == 1


def drill_cli(gw, tmp_path, *extra: str) -> list[str]:
    return ["drill", "--route", ROUTE, "--target", TARGET, "--gateway", gw.url, "--admin-key",
            ADMIN, "--data-dir", str(tmp_path), *extra]  # fmt: skip


def test_the_command_says_why_the_pre_flight_refused_its_drill(gw, fake, tmp_path):
    breaker_opened_by_its_key(gw, fake)
    result = CliRunner().invoke(app, drill_cli(gw, tmp_path, "--for", "30s"))
    assert result.exit_code == 1, result.output
    assert "drill refused: pre-flight: no other target of route classify" in result.output
    assert f"backup {BACKUP}: breaker open (account)" in result.output
    assert "--force" in result.output
    assert admin(gw, "/admin/drills").json()["drills"] == []


def test_the_forced_command_notices_that_its_drill_ended_itself(gw, fake, tmp_path):
    """The command counts a forced drill down; the first request fails (the backup's breaker
    is open), the drill ends itself, and the command stops counting and says so."""
    breaker_opened_by_its_key(gw, fake)
    args = drill_cli(gw, tmp_path, "--for", "10m", "--force", "--report-timeout", "0")
    command = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not admin(gw, "/admin/drills").json()["drills"]:  # the command has started it
            assert command.poll() is None and time.monotonic() < deadline, command.stdout.read()
            time.sleep(0.05)
        assert ask(gw).status_code >= 500
        out, _ = command.communicate(timeout=60)
    finally:
        command.kill()
    assert command.returncode == 1, out  # no scheduler here: no report within 0 s
    assert f"started with --force: backup {BACKUP}: breaker open (account)" in out
    assert "the drill ended before its planned end" in out
