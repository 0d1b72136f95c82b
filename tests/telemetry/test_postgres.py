"""The PostgreSQL sink (engine/telemetry/postgres_sink.py) and pull (engine/store/postgres_pull.py)
against a real PostgreSQL: the sink stores each attempt once, the pull moves each row into DuckDB
once however commits interleave, and a PostgreSQL that is down costs a delay, never an attempt
or an exception."""

from __future__ import annotations

import logging
import socket
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from helpers.postgres_server import Server
from helpers.postgres_writer import attempt

from engine.config import parse_config
from engine.core.attempt import Attempt
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from engine.store import open_store
from engine.store.ingest import ingest_spool
from engine.store.postgres_pull import PostgresSource
from engine.telemetry import columns as records
from engine.telemetry.postgres_sink import PostgresSink, connect, copy_rows, describe
from engine.telemetry.recorder import Recorder

STARTED = datetime(2026, 1, 5, 9, 0, 0, 123456, tzinfo=UTC)


def table(tag: str, count: int) -> pa.Table:
    return records.to_table([records.to_row(attempt(tag, n), None, None) for n in range(count)])


def varied(n: int) -> Attempt:
    """Attempts that fill every kind of column: NULLs, errors, decimals, microseconds."""
    base = attempt("v", n)
    if n % 2:
        return replace(
            base, started_at=STARTED + timedelta(seconds=n), outcome="error",
            decision="fall_back", error_class="overloaded", fault_kind="provider",
            http_status=529, error_type="overloaded_error", error_code="", served=False,
            error_message="Overloaded ’ é", retry_after_s=2.5, ttft_ms=None, feature=None,
            cache_read_tokens=7, tokens_estimated=True, provider_request_id="req_x",
        )  # fmt: skip
    return replace(base, started_at=STARTED + timedelta(seconds=n), streamed=True, ttft_ms=40.25)


class FixedPricer:
    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]:
        if attempt.served:
            return Decimal("0.000123456789"), "test"
        return None, None


def store(tmp_path: Path, name: str = "store.duckdb") -> duckdb.DuckDBPyConnection:
    return open_store(tmp_path / name)


def rows_of(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "SELECT * EXCLUDE (batch_id) FROM attempts ORDER BY request_id, attempt_number"
    ).fetchall()


def test_rows_are_pulled_exactly_as_the_spool_would_have_ingested_them(
    tmp_path: Path, postgres_url: str
):
    """The contract of an attempt sink: the same attempts through PostgreSQL or through spool
    files end up as the same rows in DuckDB."""
    attempts = [varied(n) for n in range(40)]
    via_spool = Recorder(tmp_path / "spool", pricer=FixedPricer())
    via_postgres = Recorder(
        tmp_path / "unused", pricer=FixedPricer(), sink=PostgresSink(postgres_url)
    )
    for a in attempts:
        via_spool(a)
        via_postgres(a)
    via_spool.close()
    via_postgres.close()
    assert via_postgres.stats().written == 40
    assert not (tmp_path / "unused").exists() or not list((tmp_path / "unused").glob("*.parquet"))

    spooled, pulled = store(tmp_path, "spooled.duckdb"), store(tmp_path, "pulled.duckdb")
    ingest_spool(spooled, tmp_path / "spool")
    result = PostgresSource(postgres_url).pull(pulled)
    assert (result.rows, result.more) == (40, False)
    assert (result.oldest, result.newest) == (STARTED, STARTED + timedelta(seconds=39))
    assert rows_of(pulled) == rows_of(spooled)


def test_rows_committed_out_of_id_order_are_each_pulled_once(tmp_path: Path, postgres_url: str):
    """A transaction that took lower ids commits after one that took higher ids: the puller
    waits for it instead of reading past its ids (as "id > last seen" would) and losing them."""
    slow, fast = connect(postgres_url), connect(postgres_url)
    source, con = PostgresSource(postgres_url), store(tmp_path)
    with slow.transaction():
        copy_rows(slow, table("slow", 3))
        PostgresSink(postgres_url).write(table("fast", 2))  # commits while `slow` is open
        (fast_min_id,) = fast.execute("SELECT min(id) FROM switchover_attempts").fetchone()
        (slow_ids,) = slow.execute(
            "SELECT max(id) FROM switchover_attempts WHERE request_id LIKE 'slow-%'"
        ).fetchone()
        assert slow_ids < fast_min_id  # the uncommitted rows hold the lower ids
        assert source.pull(con).rows == 0  # the committed rows wait behind the open transaction
    assert source.pull(con).rows == 5
    assert source.pull(con).rows == 0
    (count, distinct) = con.execute(
        "SELECT count(*), count(DISTINCT request_id) FROM attempts"
    ).fetchone()
    assert (count, distinct) == (5, 5)
    slow.close()
    fast.close()


def test_a_pull_in_batches_resumes_after_its_watermark(tmp_path: Path, postgres_url: str):
    sink, source, con = PostgresSink(postgres_url), PostgresSource(postgres_url), store(tmp_path)
    sink.write(table("a", 15))
    sink.write(table("b", 10))
    pulls = [source.pull(con, limit=10) for _ in range(4)]
    assert [(p.rows, p.more) for p in pulls] == [(10, True), (10, True), (5, False), (0, False)]
    con.close()
    con = store(tmp_path)  # a restarted scheduler goes on from the watermark it committed
    sink.write(table("c", 4))
    assert source.pull(con).rows == 4
    (count, distinct) = con.execute(
        "SELECT count(*), count(DISTINCT request_id) FROM attempts"
    ).fetchone()
    assert (count, distinct) == (29, 29)


def test_a_batch_sent_again_after_a_lost_commit_is_stored_once(postgres_url: str):
    """The recorder re-sends a batch whose write raised, even when the COMMIT itself went
    through; the rows that are in already are not stored twice."""
    sink = PostgresSink(postgres_url)
    assert sink.write(table("r", 5)) == 5
    assert sink.write(pa.concat_tables([table("r", 5), table("s", 2)])) == 2
    with connect(postgres_url) as pg:
        assert pg.execute("SELECT count(*) FROM switchover_attempts").fetchone() == (7,)


def test_a_nul_in_an_error_message_does_not_block_the_sink(tmp_path: Path, postgres_url: str):
    bad = replace(attempt("nul", 0), error_message="bad\x00byte")
    assert PostgresSink(postgres_url).write(records.to_table([records.to_row(bad, None, None)]))
    con = store(tmp_path)
    PostgresSource(postgres_url).pull(con)
    assert con.execute("SELECT error_message FROM attempts").fetchall() == [("bad�byte",)]


def test_the_recorder_keeps_attempts_while_postgresql_is_down_and_writes_them_when_it_is_back(
    postgres_server: Server, postgres_url: str, caplog: pytest.LogCaptureFixture
):
    url = postgres_url.replace("postgres@", "postgres:s3cret@")  # trust auth ignores it
    recorder = Recorder(Path("/nonexistent/spool"), sink=PostgresSink(url), flush_interval_s=3600)
    for n in range(10):
        recorder(attempt("up", n))
    assert recorder.flush() == 10
    postgres_server.stop()
    try:
        for n in range(20):
            recorder(attempt("down", n))
        with caplog.at_level(logging.WARNING, logger="switchover.recorder"):
            assert recorder.flush() == 0  # no exception: the batch goes back to the buffer
        stats = recorder.stats()
        assert (stats.buffered, stats.written, stats.failed_flushes) == (20, 10, 1)
        assert stats.last_error and "s3cret" not in stats.last_error
        assert "s3cret" not in caplog.text and "20 attempts kept for retry" in caplog.text
    finally:
        postgres_server.start()
    assert recorder.flush() == 20
    recorder.close()
    with connect(postgres_url) as pg:
        assert pg.execute("SELECT count(*) FROM switchover_attempts").fetchone() == (30,)


def test_a_scheduler_cycle_goes_on_while_postgresql_is_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    pipeline = Pipeline(
        DataPaths(tmp_path / "data"), postgres_url=f"postgresql://u:s3cret@127.0.0.1:{port}/x"
    )
    try:
        with caplog.at_level(logging.WARNING, logger="switchover.scheduler"):
            assert pipeline.cycle().rows == 0
            assert pipeline.cycle().rows == 0
    finally:
        pipeline.close()
    warnings = [r for r in caplog.records if "cannot pull" in r.getMessage()]
    assert len(warnings) == 1  # once until it is back, not every cycle
    assert "s3cret" not in caplog.text


def test_the_url_is_described_without_its_password():
    assert describe("postgresql://app:s3cret@db.internal:6432/telemetry?sslmode=require") == (
        "postgresql://app@db.internal:6432/telemetry"
    )


def test_state_postgres_url_is_read_from_the_config():
    provider = {"providers": {"gpt": {"kind": "openai"}}}
    url = "postgresql://app@db/telemetry"
    assert parse_config({**provider, "state": {"postgres_url": url}}).state.postgres_url == url
    assert parse_config(provider).state.postgres_url is None
    with pytest.raises(ConfigError, match=r"state\.postgres_url"):
        parse_config({**provider, "state": {"postgres_url": "mysql://db"}})
