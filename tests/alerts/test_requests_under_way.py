"""A request whose primary failed and whose fallback is still on its way is not an unavailable
request: the scheduler waits for it, so the start of every outage does not page anyone with a
false "all providers unavailable"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers.store_rows import attempt

from engine.alerts.conditions import Context, evaluate
from engine.config.alerting import DEFAULT_RULES
from engine.store import open_store
from engine.store.rollups import refresh

T0 = datetime(2026, 11, 30, 12, 0, 10, tzinfo=UTC)


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "switchover.duckdb")
    yield con
    con.close()


def minute(con, now: datetime) -> tuple[int, int]:
    refresh(con, "minute", T0, now, lambda provider, kind, model: None, now=now)
    (requests, unavailable) = con.execute(
        "SELECT coalesce(sum(requests), 0)::INT, coalesce(sum(unavailable), 0)::INT "
        "FROM rollup_minute"
    ).fetchone()
    return requests, unavailable


def test_a_request_between_its_failed_primary_and_its_backup_waits_then_counts(con, tmp_path):
    attempt(con, T0, request_id="r1", outcome="error", decision="fall_back", served=False,
            fault_kind="provider", error_class="overloaded")  # fmt: skip
    now = T0 + timedelta(seconds=5)  # the backup's answer is not recorded yet
    assert minute(con, now) == (0, 0)
    rules = [r for r in DEFAULT_RULES if r.kind == "unavailable"]
    assert evaluate(rules, Context(con, now, spool_dir=tmp_path / "spool")) == {
        "all-unavailable": []
    }
    attempt(con, T0 + timedelta(seconds=1), request_id="r1", attempt_number=2, target="gpt/m",
            provider="gpt", fallback_depth=1)  # fmt: skip
    assert minute(con, now + timedelta(seconds=1)) == (1, 0)  # answered by the backup


def test_a_request_that_gave_up_counts_at_once_and_one_left_hanging_counts_later(con):
    attempt(con, T0, request_id="r1", outcome="error", decision="give_up", served=False,
            fault_kind="provider", error_class="overloaded")  # fmt: skip
    attempt(con, T0, request_id="r2", outcome="error", decision="fall_back", served=False,
            fault_kind="provider", error_class="overloaded")  # fmt: skip
    assert minute(con, T0 + timedelta(seconds=5)) == (1, 1)
    # r2's backup was skipped (its breaker open): nothing more comes, and after 30 s it counts.
    assert minute(con, T0 + timedelta(seconds=31)) == (2, 2)
