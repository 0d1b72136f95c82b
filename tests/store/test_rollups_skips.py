"""The targets a request passed over are on its attempts' rows (`skips`), never rows of their
own: the rollups count exactly the calls the real chain made, and the same with the skips as
without them."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pytest
from helpers.chain_rig import BACKUP, PRIMARY, THIRD, Rig

from engine.core.attempt import Attempt
from engine.core.skips import from_json
from engine.state.breaker import AccountFailure
from engine.store.rollups import refresh
from engine.telemetry.columns import to_row, to_table

from .test_rollups import _lookup
from .test_rollups_continuation import store

COUNTS = ["requests", "answered", "answered_by_fallback", "unavailable", "attempts",
          "failed_attempts", "provider_faults", "account_faults", "rate_limited"]  # fmt: skip


def traffic() -> tuple[list[Attempt], int, int]:
    """Four requests on a route of three targets, the primary's breaker open throughout: (a) the
    backup answers; (b) the backup fails, the third answers; (c) the backup fails and the third's
    breaker is open; (d) every breaker open, no call at all. Their records, the HTTP calls made
    and how many of those failed."""
    rig = Rig(targets=3)

    def open_breaker(target: str) -> None:
        rig.clock.run(rig.chain.breakers.record(target, AccountFailure(), rig.clock.now()))

    open_breaker(PRIMARY)
    rig.complete()
    rig.script(BACKUP, "500")
    rig.complete()
    open_breaker(THIRD)
    rig.script(BACKUP, "500")
    rig.fails()
    open_breaker(BACKUP)
    rig.fails()
    failed = sum(1 for c in rig.calls() if c.status != 200)
    return rig.attempts, len(rig.calls()), failed


def rollup(attempts: list[Attempt]) -> list[tuple[object, ...]]:
    con: duckdb.DuckDBPyConnection = store([])
    con.register("fixture", to_table([to_row(a, None, None) for a in attempts]))
    con.execute("INSERT INTO attempts SELECT * FROM fixture")
    first = min(a.started_at for a in attempts).replace(second=0, microsecond=0)
    end = first + timedelta(minutes=2)
    refresh(con, "minute", first, end, _lookup, now=end + timedelta(hours=1))
    return con.execute(
        f"SELECT target, {', '.join(f'coalesce(sum({c}), 0)::BIGINT' for c in COUNTS)} "
        "FROM rollup_minute "
        "GROUP BY target ORDER BY target"
    ).fetchall()


@pytest.fixture(scope="module")
def recorded() -> tuple[list[Attempt], int, int]:
    return traffic()


def test_the_skips_are_recorded_and_make_no_rows(recorded):
    attempts, calls, _ = recorded
    assert sum(len(from_json(a.skips)) for a in attempts) == 1 + 1 + 2 + 3
    assert len([a for a in attempts if a.outcome != "skipped"]) == calls  # one row a call
    assert [a.outcome for a in attempts].count("skipped") == 1  # (d) alone, as before


def test_the_rollups_count_the_calls_made_and_no_skipped_target(recorded):
    attempts, calls, failed = recorded
    rows = {target: dict(zip(COUNTS, values, strict=True)) for target, *values in rollup(attempts)}
    total = {count: sum(r[count] for r in rows.values()) for count in COUNTS}
    assert (total["attempts"], total["failed_attempts"]) == (calls, failed)
    assert total["provider_faults"] == failed == 2
    assert (total["account_faults"], total["rate_limited"]) == (0, 0)
    assert (total["requests"], total["unavailable"]) == (4, 2)
    assert total["answered"] == total["answered_by_fallback"] == 2
    assert rows[THIRD]["attempts"] == 1  # it answered (b); it was skipped in (c) and (d)
    assert rows.get(PRIMARY, {}).get("attempts", 0) == 0  # skipped by every request


def test_the_rollups_are_the_same_with_the_skips_as_without_them(recorded):
    attempts, _, _ = recorded
    assert rollup(attempts) == rollup([a.replace(skips=None) for a in attempts])
