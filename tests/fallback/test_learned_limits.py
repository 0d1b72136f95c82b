"""First-token limits learned from the recorded attempts (`first_token_timeout_s = "learned"`,
issue 35): a multiple of a target's p99, between a floor and the route's static limit, read from
the published target latency; a target without the history keeps the static limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from helpers.chain_rig import BACKUP, PRIMARY, Rig

from engine.config import parse_config
from engine.core.errors import ConfigError
from engine.fallback.learned_limits import (
    FLOOR_S,
    MIN_STREAMS,
    MULTIPLE,
    LearnedLimit,
    LearnedLimits,
)
from engine.published.catalogue import LEVELS
from engine.published.learned_timeouts import learn

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def hour(target: str, at: int, ttft_ms: np.ndarray) -> dict:
    return {
        "hour": NOW - timedelta(hours=at),
        "target": target,
        "answers": len(ttft_ms),
        "latency_ms": list(np.quantile(ttft_ms * 2, LEVELS)),
        "streams": len(ttft_ms),
        "ttft_ms": list(np.quantile(ttft_ms, LEVELS)),
    }


def test_the_p99_is_read_from_every_hour_weighted_by_its_streams_not_the_slowest_hour():
    rng = np.random.default_rng(5)
    busy = rng.lognormal(np.log(600), 0.3, 5_000)  # a day of ordinary first tokens
    slow = rng.lognormal(np.log(9_000), 0.1, 20)  # one bad hour of twenty streams
    latency = pd.DataFrame([hour("claude/a", 3, busy), hour("claude/a", 2, slow)])
    [limit] = learn(latency, NOW - timedelta(hours=24)).values()
    pooled = np.quantile(np.concatenate([busy, slow]), 0.99)
    assert limit.streams == 5_020
    assert limit.ttft_p99_s * 1000 == pytest.approx(pooled, rel=0.1)
    assert limit.ttft_p99_s < 3, "not the slow hour's 9 s"


def test_a_target_with_too_few_streams_learns_nothing():
    few = np.full(MIN_STREAMS - 1, 500.0)
    enough = np.full(MIN_STREAMS, 500.0)
    latency = pd.DataFrame([hour("claude/few", 1, few), hour("gpt/enough", 1, enough)])
    assert set(learn(latency, NOW - timedelta(hours=24))) == {"gpt/enough"}
    assert learn(latency.iloc[0:0], NOW) == {}


@pytest.mark.parametrize(("p99_s", "static_s", "limit_s"), [
    (0.2, 20.0, FLOOR_S),  # never below the floor
    (1.5, 20.0, 1.5 * MULTIPLE),
    (9.0, 20.0, 20.0),  # never above the route's own limit
])  # fmt: skip
def test_a_learned_limit_is_a_multiple_of_the_p99_between_the_floor_and_the_static_limit(
    p99_s: float, static_s: float, limit_s: float
):
    limits = LearnedLimits({"t": LearnedLimit("t", p99_s, 500, NOW)})
    assert limits.first_token_s("t", static_s) == pytest.approx(limit_s)
    assert limits.first_token_s("other", static_s) == static_s, "no history: the static limit"


def test_a_stalled_primary_is_given_up_at_its_learned_limit_and_the_backup_answers():
    rig = Rig(first_token_timeout_s=20)
    rig.chain.first_token_limits = LearnedLimits({PRIMARY: LearnedLimit(PRIMARY, 0.8, 900, NOW)})
    rig.script(PRIMARY, "late_first_token:delay=15")
    events = rig.stream()
    assert events[0].model == BACKUP.partition("/")[2]
    first = rig.attempts[0]
    assert (first.target, first.decision) == (PRIMARY, "fall_back")
    assert first.latency_ms == pytest.approx(0.8 * MULTIPLE * 1000)


def test_without_history_the_static_limit_applies():
    rig = Rig(first_token_timeout_s=5)
    rig.chain.first_token_limits = LearnedLimits()
    rig.script(PRIMARY, "late_first_token:delay=15")
    rig.stream()
    assert rig.attempts[0].latency_ms == pytest.approx(5_000)


def _config(route: dict, policy: dict | None = None):
    return parse_config({
        "providers": {"claude": {"kind": "anthropic", "api_key_env": "K"}},
        "routes": {"support": {"targets": ["claude/claude-haiku-4-5"], **route}},
        "policy": policy or {},
    }, source="test")  # fmt: skip


def test_a_route_learns_its_first_token_limit_under_the_static_one():
    config = _config({"first_token_timeout_s": "learned"}, {"first_token_timeout_s": 12})
    route = config.routes["support"]
    assert route.options.learned_first_token
    assert route.policy.first_token_timeout_s == 12, "the ceiling of what is learned"
    assert not _config({}).routes["support"].options.learned_first_token


def test_learned_is_refused_in_the_policy_defaults_with_where_to_set_it():
    with pytest.raises(ConfigError, match=r"per route, on \[routes.NAME\]"):
        _config({}, {"first_token_timeout_s": "learned"})
