"""The incidents' evidence kept between passes: read again only where the rollups were
refreshed, it finds exactly what a whole read finds, pass after pass, through late refreshes,
drills and a changed primary."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from helpers.store_rows import rollup

from engine.alerts.incident_evidence import Evidence
from engine.alerts.incidents import IncidentPolicy, detect
from engine.store.db import open_store

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
POLICY = IncidentPolicy()


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    _primary(con, "claude/m")
    yield con
    con.close()


def _primary(con, target: str) -> None:
    provider, model = target.split("/")
    con.execute("DELETE FROM route_primaries WHERE route = 'support'")
    con.execute(
        "INSERT INTO route_primaries VALUES ('support', $target, 'anthropic', $model, $t, $p)",
        {"target": target, "model": model, "t": T0, "p": provider},
    )


def _refresh(con, rng: random.Random, lo: datetime, hi: datetime) -> None:
    """What a rollup refresh does to [lo, hi): its minutes deleted and written again, here with
    traffic that fails often enough to make incidents, and sometimes falls back."""
    con.execute("DELETE FROM rollup_minute WHERE bucket >= $lo AND bucket < $hi",
                {"lo": lo, "hi": hi})  # fmt: skip
    bucket = lo
    while bucket < hi:
        failing = rng.random() < 0.4
        attempts = rng.randint(0, 12)
        rollup(con, bucket, attempts=attempts, requests=attempts,
               provider_faults=rng.randint(0, attempts) if failing else 0,
               rate_limited=rng.randint(0, attempts // 2) if rng.random() < 0.2 else 0,
               answered_by_fallback=rng.randint(0, attempts) if failing else 0)  # fmt: skip
        if rng.random() < 0.5:
            rollup(con, bucket, target="gpt/x", provider="gpt", model="x",
                   attempts=rng.randint(1, 5), provider_faults=rng.randint(0, 2))  # fmt: skip
        bucket += MINUTE


def _windows(con, now: datetime, evidence: Evidence | None = None) -> list[tuple]:
    return [
        (w.target, w.family, w.start, w.last_fault, w.ongoing, w.peak, w.evidence)
        for w in detect(con, now, POLICY, evidence)
    ]


@pytest.mark.parametrize("seed", range(4))
def test_evidence_read_again_where_refreshed_finds_what_a_whole_read_finds(con, seed):
    rng = random.Random(seed)
    evidence = Evidence()
    now = T0 + 30 * MINUTE
    _refresh(con, rng, T0, now)
    evidence.refreshed(T0)
    for _ in range(60):
        now += MINUTE
        since = now - 2 * MINUTE
        if rng.random() < 0.1:  # a late file: refreshed back to its first minute
            since = now - rng.randint(3, 40) * MINUTE
        _refresh(con, rng, since, now)
        evidence.refreshed(since)
        if rng.random() < 0.05:  # a drill starts on the primary, or the last one ends early
            con.execute(
                "INSERT INTO drills (drill_id, route, target, started_at, ends_at, requested_by,"
                " status) VALUES ($id, 'support', 'claude/m', $at, $ends, 'test', 'running')",
                {"id": f"d{now:%H%M}", "at": now - 3 * MINUTE, "ends": now + 10 * MINUTE},
            )
        elif rng.random() < 0.05:
            con.execute("UPDATE drills SET ended_at = $at WHERE ended_at IS NULL",
                        {"at": now - 5 * MINUTE})  # fmt: skip
        if rng.random() < 0.03:  # the route's primary changes: every held minute with it
            _primary(con, rng.choice(["claude/m", "gpt/x"]))
        if rng.random() < 0.5:  # the incidents run once a minute, the cycles more often
            assert _windows(con, now, evidence) == _windows(con, now)
    assert _windows(con, now, evidence) == _windows(con, now)
    assert _windows(con, now), "the traffic made no incident: the comparison proved nothing"


def test_evidence_told_of_a_refresh_it_cannot_bound_reads_everything(con):
    evidence = Evidence()
    rng = random.Random(7)
    _refresh(con, rng, T0, T0 + 20 * MINUTE)
    evidence.refreshed(T0)
    before = _windows(con, T0 + 20 * MINUTE, evidence)
    # Older minutes change without a bounded refresh (a rollup rebuild, say).
    _refresh(con, random.Random(8), T0, T0 + 20 * MINUTE)
    evidence.refreshed(None)
    after = _windows(con, T0 + 20 * MINUTE, evidence)
    assert after == _windows(con, T0 + 20 * MINUTE)
    assert after != before


def test_evidence_holds_only_the_minutes_over_the_fault_rate(con):
    rollup(con, T0, attempts=10, provider_faults=1)  # 10 %: a fault, not evidence
    rollup(con, T0 + MINUTE, attempts=10, provider_faults=2)  # 20 %: evidence
    evidence = Evidence()
    evidence.read(con, POLICY.fault_rate)
    assert evidence.bad["claude/m"] == {T0 + MINUTE: {"availability": (2, 0.2)}}
