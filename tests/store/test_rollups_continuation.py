"""Rollups of streams a later target continued (engine.fallback.continuation): one request,
answered by
its continuation, its broken part a failed attempt whose cost was served, not wasted; a stream
no backup could continue is one broken stream, and a refused continuation no request fault."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import duckdb
import pytest

from engine.core.attempt import Attempt
from engine.store.eval_drill_tables import READINESS_TABLES
from engine.store.rollups import CURRENT_HELPER_TABLES, CURRENT_ROLLUP_COLUMNS, TABLES, refresh
from engine.telemetry.columns import DUCKDB_COLUMNS, to_row, to_table

from .test_rollups import (
    BACKUP,
    DRILL_ABORT_DDL,
    PRIMARY,
    T0,
    S,
    _lookup,
    attempt,
    failed,
    price,
)


def cut(request: str, at: timedelta) -> Attempt:
    """The primary's stream, 160 characters sent (40 tokens, estimated), then cut."""
    return attempt(request, 1, at, PRIMARY, outcome="error", decision="continue_elsewhere",
                   error_class="stream_cut", fault_kind="provider", served=True, streamed=True,
                   http_status=200, input_tokens=1000, output_tokens=40,
                   tokens_estimated=True)  # fmt: skip


# C1 12:00:05: cut on the primary, finished by the backup from its 160 characters.
CONTINUED = [
    cut("c1", 5 * S),
    attempt("c1", 2, 6 * S, BACKUP, streamed=True, input_tokens=1040, output_tokens=60,
            continues_attempt=1, continued_chars=160),
]  # fmt: skip
# C2 12:01:05: cut on the primary; its one backup refuses the prefill with a 400.
BROKEN = [
    cut("c2", 65 * S),
    failed("c2", 2, 66 * S, BACKUP, "invalid_request", "give_up", kind="request",
           http_status=400, streamed=True, continues_attempt=1, continued_chars=160),
]  # fmt: skip


def store(attempts: list[Attempt]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS})")
    for table in TABLES.values():
        con.execute(f"CREATE TABLE {table} ({CURRENT_ROLLUP_COLUMNS})")
    con.execute(CURRENT_HELPER_TABLES)
    con.execute(f"CREATE TABLE drills ({READINESS_TABLES['drills']}, {DRILL_ABORT_DDL})")
    add(con, attempts)
    return con


def add(con: duckdb.DuckDBPyConnection, attempts: list[Attempt]) -> None:
    con.register("fixture", to_table([to_row(a, price(a), "test") for a in attempts]))
    con.execute("INSERT INTO attempts SELECT * FROM fixture")
    con.unregister("fixture")


@pytest.fixture
def con():
    con = store(CONTINUED + BROKEN)
    refresh(con, "minute", T0, T0 + 3 * 60 * S, _lookup)
    return con


def minute(con: duckdb.DuckDBPyConnection, at: timedelta) -> dict[str, object]:
    keys = ["requests", "answered", "answered_by_fallback", "broken_streams", "request_faults",
            "unavailable", "attempts", "failed_attempts", "provider_faults", "cost_usd",
            "wasted_usd"]  # fmt: skip
    row = con.execute(
        f"SELECT {', '.join(f'sum({k})' for k in keys)} FROM rollup_minute WHERE bucket = $b",
        {"b": T0 + at},
    ).fetchall()[0]
    return dict(zip(keys, row, strict=True))


def test_a_continued_stream_is_one_request_answered_by_its_continuation(con):
    m = minute(con, timedelta(0))
    assert (m["requests"], m["answered"], m["answered_by_fallback"]) == (1, 1, 1)
    assert (m["broken_streams"], m["unavailable"], m["request_faults"]) == (0, 0, 0)
    # The cut is still what happened to the primary: a failed attempt, a provider fault.
    assert (m["attempts"], m["failed_attempts"], m["provider_faults"]) == (2, 1, 1)
    served_by = con.execute(
        "SELECT target FROM rollup_minute WHERE bucket = $b AND requests > 0", {"b": T0}
    ).fetchall()
    assert served_by == [(BACKUP,)]


def test_both_parts_are_costed_and_the_continued_part_is_not_wasted(con):
    m = minute(con, timedelta(0))
    assert m["cost_usd"] == sum(price(a) for a in CONTINUED)
    assert m["wasted_usd"] == 0


def test_a_stream_no_backup_could_continue_is_one_broken_stream_and_its_cost_wasted(con):
    m = minute(con, 60 * S)
    assert (m["requests"], m["answered"], m["broken_streams"]) == (1, 0, 1)
    assert (m["request_faults"], m["unavailable"]) == (0, 0)  # the refusal is no request fault
    assert m["wasted_usd"] == price(BROKEN[0]) == Decimal("0.003600000")


def test_a_request_whose_continuation_is_not_recorded_yet_waits_for_it():
    """The broken part alone, just recorded: the request is not counted (as unavailable or
    broken) before its continuation is in; then it is counted once, answered."""
    first, second = CONTINUED
    con = store([first])
    now = first.started_at + timedelta(seconds=1)
    refresh(con, "minute", T0, T0 + 60 * S, _lookup, now=now)
    assert minute(con, timedelta(0))["requests"] in (None, 0)
    add(con, [second])
    refresh(con, "minute", T0, T0 + 60 * S, _lookup, now=now + timedelta(seconds=1))
    m = minute(con, timedelta(0))
    assert (m["requests"], m["answered"], m["broken_streams"]) == (1, 1, 0)
