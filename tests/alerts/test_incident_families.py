"""Incidents as a user lives them: what failed, how, where, and until when. Real chains on the
fake providers, the real recorder and scheduler pass, a virtual clock."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY, World, config

from engine.alerts.incidents import IncidentPolicy

SONNET, HAIKU, MINI = f"claude/{PRIMARY}", "claude/claude-haiku-4-5", "gpt/gpt-4.1-mini"
SETTLE = IncidentPolicy().settle


def _incidents(world: World) -> pd.DataFrame:
    return world.pipeline.con.execute("SELECT * FROM incidents ORDER BY started_at").df()


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory):
    """Sonnet (support's primary) answers 529 for 8 minutes; 2 minutes in, Haiku (summarize's
    primary, on the same provider) loses its key for 4."""
    routes = {"support": [SONNET, MINI], "summarize": [HAIKU, "gpt/gpt-4.1"]}
    world = World(tmp_path_factory.mktemp("overlap"), config([], [], routes=routes),
                  routes=("support", "summarize"))  # fmt: skip
    try:
        world.minutes(5)
        world.fails(PRIMARY, "overloaded", minutes=8)
        world.minutes(2)
        world.fails("claude-haiku-4-5", "auth", minutes=4)
        world.minutes(25)
        yield _incidents(world), world.pipeline.con.execute("SELECT * FROM attempts").df()
    finally:
        world.close()


def test_two_targets_failing_differently_at_once_are_two_incidents(overlapping):
    incidents, _ = overlapping
    assert list(zip(incidents["subject"], incidents["family"], strict=True)) == [
        (SONNET, "availability"),
        (HAIKU, "account"),
    ]
    sonnet, haiku = incidents.itertuples()
    assert haiku.started_at < sonnet.ended_at, "they overlap in time"
    assert set(incidents["scope"]) == {"target"} and set(incidents["provider"]) == {"claude"}


def test_each_incident_has_its_own_routes_and_top_error(overlapping):
    incidents, _ = overlapping
    sonnet, haiku = incidents.itertuples()
    assert (sonnet.routes, haiku.routes) == ("support", "summarize")
    assert sonnet.top_error.startswith("overloaded (529) ×")
    assert haiku.top_error.startswith("authentication (401) ×")


def test_each_incident_counts_the_requests_that_counted_on_its_target(overlapping):
    incidents, attempts = overlapping
    first = attempts.sort_values("attempt_number").groupby("request_id").first()
    served = attempts[attempts["served"] & (attempts["outcome"] == "success")]
    answered_by = served.set_index("request_id")["target"]
    for incident in incidents.itertuples():
        route = incident.routes
        hi = pd.Timestamp(incident.ended_at).ceil("min")
        mine = first[(first["route"] == route) & (first["started_at"] >= incident.started_at)
                     & (first["started_at"] < hi)].index  # fmt: skip
        not_by_target = [r for r in mine if answered_by.get(r) != incident.target]
        assert incident.requests == len(mine)
        assert incident.requests_affected == len(not_by_target) > 0
        assert incident.requests_affected == incident.answered_by_fallback + incident.failed
        # DECIMAL(18,9) in the store, floats here: equal to the nano-dollar.
        assert incident.extra_cost_usd == pytest.approx(
            incident.fallback_premium_usd + incident.rewarm_usd, rel=0, abs=5e-10
        )


@pytest.fixture(scope="module")
def rate_limited(tmp_path_factory):
    """classify's primary answers 429 (Retry-After 20 s) for 3 minutes; the settle time is
    configured to 3 minutes."""
    data = config([], [], routes={"classify": [MINI, HAIKU]})
    data["alerting"]["incident_settle"] = "3m"
    world = World(tmp_path_factory.mktemp("rate"), data, routes=("classify",))
    try:
        world.minutes(3)
        world.fails("gpt-4.1-mini", "rate_limit:retry_after=20", minutes=3)
        states = []
        for _ in range(12):
            world.minutes(1)
            states.append((world.now, world.query("SELECT ended_at FROM incidents")))
        [(last_429,)] = world.query("SELECT max(started_at) FROM attempts WHERE http_status = 429")
        yield _incidents(world), states, last_429
    finally:
        world.close()


def test_a_rate_limit_incident_ends_its_settle_time_after_the_last_429(rate_limited):
    incidents, _, last_429 = rate_limited
    [incident] = incidents.itertuples()
    assert (incident.subject, incident.family, incident.routes) == (MINI, "rate_limit", "classify")
    assert incident.top_error.startswith("rate_limit (429) ×")
    assert incident.ended_at == last_429 + timedelta(minutes=3)


def test_it_is_ongoing_until_then_and_ended_from_the_first_refresh_after(rate_limited):
    _, states, last_429 = rate_limited
    end = last_429 + timedelta(minutes=3)
    for now, rows in states:
        if not rows:
            continue
        [(ended_at,)] = rows
        assert (ended_at is None) == (now < end), now
    assert any(now >= end for now, _ in states)
