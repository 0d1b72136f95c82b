"""The operator endpoints: a target turned off through one gateway is skipped by its routes
until it is turned back on, and only an admin may do it."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.core.paths import DataPaths
from engine.state.switches_file import TargetSwitches

from .conftest import GATEWAY_KEY, user

ROUTES = {"support": ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]}
ADMIN = "admin-key-1"


def ask(gw, model: str = "support") -> httpx.Response:
    return httpx.post(
        gw.openai_url + "/chat/completions",
        json={"model": model, "messages": user()},
        headers={"authorization": f"Bearer {GATEWAY_KEY}"},
    )


def admin(gw, path: str, body: dict | None = None, key: str | None = ADMIN) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    if body is None:
        return httpx.get(gw.url + path, headers=headers)
    return httpx.post(gw.url + path, json=body, headers=headers)


@pytest.fixture
def gw(gateway, tmp_path):
    return gateway(ROUTES, keys=[GATEWAY_KEY], admin_keys=[ADMIN], record_to=DataPaths(tmp_path))


def test_a_disabled_target_is_skipped_until_it_is_enabled_again(gw, tmp_path):
    assert ask(gw).headers["x-switchover-provider"] == "claude"
    reply = admin(gw, "/admin/targets/disable",
                  {"target": "claude/claude-sonnet-4-5", "reason": "529 storm"})  # fmt: skip
    assert reply.status_code == 200, reply.text
    (switch,) = reply.json()["switches"]
    assert switch["target"] == "claude/claude-sonnet-4-5" and switch["reason"] == "529 storm"
    served = ask(gw)
    assert served.status_code == 200
    assert served.headers["x-switchover-provider"] == "gpt"
    assert served.headers["x-switchover-attempts"] == "1"  # skipped, not tried and failed
    listing = admin(gw, "/admin/targets").json()
    assert listing["routes"]["support"] == {
        "order_now": ["gpt/gpt-4.1-mini"],
        "disabled": ["claude/claude-sonnet-4-5"],
    }
    # The switch lives in the data folder, where every worker and the CLI read it.
    assert (tmp_path / "control" / "targets.json").exists()
    assert admin(gw, "/admin/targets/enable", {"target": "claude/claude-sonnet-4-5"}).json() == {
        "switches": []
    }
    assert ask(gw).headers["x-switchover-provider"] == "claude"


def test_a_switch_made_by_another_process_is_seen_at_once(gw, tmp_path):
    import asyncio

    cli_side = TargetSwitches(DataPaths(tmp_path).target_switches)
    asyncio.run(cli_side.disable("claude/claude-sonnet-4-5", route="support", by="cli"))
    assert ask(gw).headers["x-switchover-provider"] == "gpt"


def test_when_every_target_is_disabled_they_are_all_tried_rather_than_none(gw):
    for target in ROUTES["support"]:
        assert admin(gw, "/admin/targets/disable", {"target": target}).status_code == 200
    reply = ask(gw)
    assert reply.status_code == 200 and reply.headers["x-switchover-provider"] == "claude"


def test_a_gateway_key_does_not_unlock_the_admin_endpoints(gw):
    body = {"target": "claude/claude-sonnet-4-5"}
    assert admin(gw, "/admin/targets/disable", body, key=GATEWAY_KEY).status_code == 401
    assert admin(gw, "/admin/targets/disable", body, key=None).status_code == 401
    assert ask(gw).headers["x-switchover-provider"] == "claude"


def test_without_admin_keys_a_keyed_gateway_refuses_admin_calls(gateway, tmp_path):
    gw = gateway(ROUTES, keys=[GATEWAY_KEY], record_to=DataPaths(tmp_path))
    reply = admin(gw, "/admin/targets", key=GATEWAY_KEY)
    assert reply.status_code == 403 and "SWITCHOVER_ADMIN_KEYS" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"target": "claude/claude-opus-4"}, 404, "unknown target"),
        ({"target": "gpt/gpt-4.1-mini", "route": "billing"}, 404, "unknown route"),
        ({"route": "support"}, 400, "provider/model"),
        ({"target": "gpt/gpt-4.1-mini", "reason": 7}, 400, "reason"),
    ],
)
def test_a_bad_switch_is_refused_with_a_clear_error(gw, body, status, words):
    reply = admin(gw, "/admin/targets/disable", body)
    assert reply.status_code == status and words in reply.json()["error"]["message"]
    assert admin(gw, "/admin/targets").json()["switches"] == []


def test_a_body_that_is_not_json_is_a_400(gw):
    reply = httpx.post(gw.url + "/admin/targets/disable", content=b"{nope",
                       headers={"authorization": f"Bearer {ADMIN}"})  # fmt: skip
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]["message"]


def test_a_drill_fails_its_target_on_its_route_until_it_is_ended(gw, tmp_path):
    body = {"route": "support", "target": "claude/claude-sonnet-4-5", "for_s": 600}
    reply = admin(gw, "/admin/drills/start", body)
    assert reply.status_code == 200, reply.text
    drill = reply.json()["drill"]
    served = ask(gw)
    assert served.status_code == 200 and served.headers["x-switchover-provider"] == "gpt"
    drilled = [a for a in gw.attempts if a.fault_kind == "drill"]
    assert [(a.target, a.error_class, a.decision) for a in drilled] == [
        ("claude/claude-sonnet-4-5", "drill_invalid_key", "fall_back_now")
    ]
    assert admin(gw, "/admin/drills").json()["drills"][0]["drill_id"] == drill["drill_id"]
    record = json.loads((tmp_path / "control" / "drills" / f"{drill['drill_id']}.json").read_text())
    assert record["ended_at"] is None and record["route"] == "support"

    ended = admin(gw, "/admin/drills/end", {"drill_id": drill["drill_id"]})
    assert ended.status_code == 200 and ended.json()["drill"]["ended_at"] is not None
    assert ask(gw).headers["x-switchover-provider"] == "claude"  # restored at once
    assert admin(gw, "/admin/drills").json()["drills"] == []
    assert admin(gw, "/admin/drills/end", {"drill_id": drill["drill_id"]}).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"route": "support", "target": "claude/claude-sonnet-4-5"}, 400, "for_s"),
        ({"route": "billing", "target": "gpt/gpt-4.1-mini", "for_s": 60}, 404, "unknown route"),
        ({"route": "support", "target": "gpt/gpt-5", "for_s": 60}, 404, "unknown target"),
        ({"route": "support", "target": "gpt/gpt-4.1-mini", "for_s": 99999}, 409, "at most"),
    ],
)
def test_a_drill_that_cannot_run_is_refused_with_the_reason(gw, body, status, words):
    reply = admin(gw, "/admin/drills/start", body)
    assert reply.status_code == status and words in reply.json()["error"]["message"]
    assert admin(gw, "/admin/drills").json()["drills"] == []


def test_a_drill_needs_an_admin_key(gw):
    body = {"route": "support", "target": "claude/claude-sonnet-4-5", "for_s": 60}
    assert admin(gw, "/admin/drills/start", body, key=GATEWAY_KEY).status_code == 401
    assert ask(gw).headers["x-switchover-provider"] == "claude"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"target": "gpt/gpt-4.1-mini", "route": ["support"]}',
        b'{"target": {"a": 1}}',
        b'{"route": "support", "target": "gpt/gpt-4.1-mini", "for_s": Infinity}',
        b'{"route": "support", "target": "gpt/gpt-4.1-mini", "for_s": NaN}',
        b'{"route": "support", "target": "gpt/gpt-4.1-mini", "for_s": 1e999}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"reason": "\\ud800", "target": "gpt/gpt-4.1-mini"}',
    ],
)
@pytest.mark.parametrize("path", ["/admin/targets/disable", "/admin/drills/start"])
def test_a_hostile_admin_body_is_a_400_that_changes_nothing(gw, raw, path):
    reply = httpx.post(gw.url + path, content=raw, headers={"authorization": f"Bearer {ADMIN}"})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "admin_error"
    assert admin(gw, "/admin/targets").json()["switches"] == []


def test_a_drill_longer_than_a_timedelta_holds_is_a_400(gw):
    body = {"route": "support", "target": "gpt/gpt-4.1-mini", "for_s": 1e300}
    reply = admin(gw, "/admin/drills/start", body)
    assert reply.status_code == 400 and "for_s" in reply.json()["error"]["message"]
