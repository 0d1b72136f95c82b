"""A budget's spend from the store (engine.store.budgets): exact to the nano-dollar for each
scope, counted across the archive, bounded by the calendar period; the spool watermarks that say
which files it holds; and budgets.json as the scheduler's cycle publishes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from helpers.spool import make_attempt, write_table

from engine.config.alerting import AlertingConfig
from engine.config.budgets import Budget
from engine.core.attempt import Attempt
from engine.core.paths import DataPaths
from engine.published.budgets import read_budgets
from engine.scheduler.pipeline import Pipeline
from engine.store.budgets import budget_statuses, budgets_snapshot, ingested_watermarks
from engine.store.ingest import ingest_spool
from engine.store.retention import archive_old_attempts
from engine.telemetry import columns as records

NOW = datetime(2026, 12, 20, 12, 0, tzinfo=UTC)  # a Sunday; the month began 19 days ago
PROCESS = "gw-host-4242-1796000000000"


def _spool(spool: Path, name: str, priced: list[tuple[Attempt, Decimal | None]]) -> None:
    rows = [records.to_row(a, cost, "test") for a, cost in priced]
    write_table(spool, name, records.to_table(rows))


def _attempt(n: int, at: datetime, **fields) -> Attempt:
    return make_attempt(request_id=f"r{n}", started_at=at, **fields)


@pytest.fixture
def month(store: duckdb.DuckDBPyConnection, spool: Path) -> duckdb.DuckDBPyConnection:
    """December's attempts of three callers, November's, and one of another route, priced."""
    day = timedelta(days=1)
    _spool(
        spool,
        f"{PROCESS}-00000001",
        [
            (_attempt(1, NOW - 15 * day, route="support", key_label="team-a"), Decimal("1.25")),
            (_attempt(2, NOW - 2 * day, route="support", feature="triage"), Decimal("0.000000001")),
            # failed and unserved, still billed: counted
            (
                _attempt(3, NOW - day, route="support", served=False, outcome="timeout"),
                Decimal("0.333333333"),
            ),
            (_attempt(4, NOW - 3 * day, route="search", key_label="team-a"), Decimal("2.5")),
            (_attempt(5, NOW - 20 * day, route="support", key_label="team-a"), Decimal("7")),
            (_attempt(6, NOW - timedelta(hours=1), route="support"), None),  # unpriced: $0
        ],
    )
    ingest_spool(store, spool, now=NOW)
    return store


BUDGETS = (
    Budget("support-monthly", "route", "support", "month", Decimal("500")),
    Budget("triage", "feature", "triage", "month", Decimal("10")),
    Budget("team-a", "key", "team-a", "month", Decimal("100"), hard_cap=True),
    Budget("support-today", "route", "support", "day", Decimal("1")),
)


def _spend(con, archive: Path | None = None) -> dict[str, Decimal]:
    return {s.name: s.spend_usd for s in budget_statuses(con, archive, BUDGETS, NOW)}


def test_spend_is_the_exact_sum_of_each_scopes_attempts_in_the_period(month):
    assert _spend(month) == {
        "support-monthly": Decimal("1.583333334"),  # 1.25 + 0.000000001 + 0.333333333
        "triage": Decimal("0.000000001"),
        "team-a": Decimal("3.75"),  # its key on two routes; November's $7 is not this month
        "support-today": Decimal(0),
    }


def test_a_period_with_nothing_spent_reads_zero_never_0E_9(month):
    (today,) = [s for s in budget_statuses(month, None, BUDGETS, NOW) if s.period == "day"]
    assert str(today.spend_usd) == "0"
    assert (today.period_start, today.period_end) == (
        datetime(2026, 12, 20, tzinfo=UTC),
        datetime(2026, 12, 21, tzinfo=UTC),
    )


def test_archived_days_still_count(month, tmp_path):
    archive = tmp_path / "archive"
    before = _spend(month)
    moved = archive_old_attempts(month, archive, 2, NOW, max_days=40)
    assert moved.rows == 3  # 5 and 17 Dec (team-a's $3.75) and November left the table
    (left,) = month.execute("SELECT count(*) FROM attempts").fetchone()
    assert left == 3
    assert _spend(month, archive) == before


def test_the_forecast_window_is_the_last_day_and_its_spend(month):
    (support,) = [s for s in budget_statuses(month, None, BUDGETS, NOW) if s.name == "triage"]
    assert support.rate_since == NOW - timedelta(hours=24)
    statuses = {s.name: s for s in budget_statuses(month, None, BUDGETS, NOW)}
    assert statuses["support-monthly"].rate_spend_usd == Decimal("0.333333333")
    assert statuses["support-today"].rate_since == datetime(2026, 12, 20, tzinfo=UTC)


def test_watermarks_are_each_processs_highest_ingested_seq(store, spool):
    other = "gw-other-7-1796000000001"
    for name in (f"{PROCESS}-00000002", f"{PROCESS}-00000010", f"{other}-00000003"):
        _spool(spool, name, [(_attempt(hash(name) % 1000, NOW, route="support"), Decimal(1))])
    _spool(spool, "not-a-spool-name", [(_attempt(9, NOW, route="support"), Decimal(1))])
    ingest_spool(store, spool, now=NOW)
    gone = "gw-gone-9-1790000000000"
    _spool(spool, f"{gone}-00000099", [(_attempt(77, NOW, route="x"), Decimal(1))])
    ingest_spool(store, spool, now=NOW - timedelta(days=40))  # before every period: left out
    marks = ingested_watermarks(store, datetime(2026, 12, 1, tzinfo=UTC))
    assert marks == {PROCESS: 10, other: 3}


def test_the_snapshot_reads_spend_and_watermarks_together(month):
    snapshot = budgets_snapshot(month, None, BUDGETS, NOW)
    assert snapshot.ingested == {PROCESS: 1}
    assert snapshot.computed_at == NOW
    assert [s.name for s in snapshot.budgets] == [b.name for b in BUDGETS]


def test_no_budgets_no_figures(month):
    assert budgets_snapshot(month, None, (), NOW).budgets == ()


def test_the_cycle_publishes_budgets_json_right_after_ingest(tmp_path):
    paths = DataPaths(tmp_path / "data")
    alerting = AlertingConfig(budgets=BUDGETS)
    pipeline = Pipeline(paths, now=lambda: NOW, alerting=alerting)
    try:
        _spool(
            paths.spool,
            f"{PROCESS}-00000005",
            [(_attempt(1, NOW - timedelta(hours=2), route="support"), Decimal("0.5"))],
        )
        pipeline.cycle()
    finally:
        pipeline.close()
    snapshot = read_budgets(paths.budgets)
    assert snapshot is not None
    assert snapshot.ingested == {PROCESS: 5}
    spend = {s.name: s.spend_usd for s in snapshot.budgets}
    assert spend["support-monthly"] == spend["support-today"] == Decimal("0.5")
    raw = paths.budgets.read_text()
    assert '"spend_usd": "0.500000000"' in raw and '"version": 1' in raw
