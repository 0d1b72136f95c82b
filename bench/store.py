"""`python -m bench.store`: the store's figures: spool ingest rows/s, publish time of the 24 h
recent-attempts snapshot, and windowed reads from the published snapshots.

Runs in a temporary directory, under a minute; prints a table and writes nothing else. The
schema decision (no primary key on attempts) is measured here too, against the same files.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.records import ARROW_SCHEMA, COLUMNS, DUCKDB_COLUMNS
from engine.store import PublishedData, ingest_spool, open_store, publish_recent_attempts
from engine.store.db import ROW_GROUP_SIZE

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PROVIDERS = np.array(["claude", "gpt", "gemini"])


def synthetic(n: int, start: datetime, span: timedelta, seed: int) -> pa.Table:
    """`n` plausible attempt rows with unique 32-hex-digit request ids, started_at rising
    through [start, start + span)."""
    rng = np.random.default_rng(seed)
    start_us = int(start.timestamp() * 1e6)
    started = start_us + np.sort(rng.integers(0, int(span.total_seconds() * 1e6), n))
    provider = PROVIDERS[rng.integers(0, len(PROVIDERS), n)]
    ok = rng.random(n) < 0.93
    ids = np.char.add(f"{seed:08x}", np.char.zfill(np.arange(n).astype(str), 24))
    values = {
        "request_id": ids,
        "attempt_number": np.ones(n, np.int16),
        "route": np.full(n, "support"),
        "target": np.char.add(provider, "/model"),
        "provider": provider,
        "provider_kind": provider,
        "model": np.full(n, "model"),
        "key_kind": np.full(n, "managed"),
        "host": np.full(n, "bench"),
        "process_id": np.full(n, 4242, np.int32),
        "started_at": pa.array(started, pa.timestamp("us", tz="UTC")),
        "latency_ms": rng.gamma(2.0, 300.0, n),
        "streamed": rng.random(n) < 0.5,
        "outcome": np.where(ok, "success", "error"),
        "decision": np.where(ok, "served", "fall_back"),
        "error_class": pa.array(np.where(ok, None, "overloaded")),
        "fault_kind": pa.array(np.where(ok, None, "provider")),
        "http_status": np.where(ok, 200, 529).astype(np.int16),
        "breaker_state": np.full(n, "closed"),
        "served": ok,
        "fallback_depth": np.zeros(n, np.int16),
        "input_tokens": rng.integers(100, 5000, n),
        "output_tokens": rng.integers(10, 800, n),
        "cache_read_tokens": rng.integers(0, 4000, n),
        "cache_write_tokens": np.zeros(n, np.int64),
        "tokens_estimated": np.zeros(n, bool),
        "pii_masked": np.zeros(n, np.int32),
    }
    arrays = [
        pa.nulls(n, c.arrow) if c.name not in values else pa.array(values[c.name]).cast(c.arrow)
        for c in COLUMNS
    ]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def spool_files(spool: Path, files: int, rows: int, start: datetime, span: timedelta, seed: int):
    spool.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        data = synthetic(rows, start + span * i, span, seed * 10_000 + i)
        pq.write_table(data, spool / f"bench-{seed}-{i:05d}.parquet")


def median_ms(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def ingest_rate(con: duckdb.DuckDBPyConnection, root: Path, files: int, rows: int, seed: int):
    spool = root / f"spool-{seed}"  # a month old: outside the published day below
    spool_files(spool, files, rows, NOW - timedelta(days=30), timedelta(seconds=1), seed)
    started = time.perf_counter()
    result = ingest_spool(con, spool, max_files=files)
    assert result.files == files, result
    return result.rows / (time.perf_counter() - started)


def keyed_ingest_rate(root: Path, files: int, rows: int, seed: int, key: bool) -> float:
    """The schema decision: the same INSERT into attempts with or without a primary key."""
    spool = root / f"keyed-{seed}"
    spool_files(spool, files, rows, NOW, timedelta(seconds=1), seed)
    con = duckdb.connect()
    con.execute(f"ATTACH '{root}/keyed-{seed}.duckdb' AS s (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
    con.execute("USE s")
    primary = ", PRIMARY KEY (request_id, attempt_number)" if key else ""
    con.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS}{primary})")
    con.execute("SET preserve_insertion_order = false")
    paths = [str(p) for p in sorted(spool.iterdir())]
    rates = []
    for round_ in range(2):  # the table grows: 2 × the batch
        started = time.perf_counter()
        con.begin()
        con.execute(
            f"INSERT INTO attempts SELECT request_id || '-{round_}', * EXCLUDE (request_id) "
            "FROM read_parquet($files)",
            {"files": paths},
        )
        con.commit()
        rates.append(files * rows / (time.perf_counter() - started))
    con.close()
    return statistics.median(rates)


def run() -> None:
    rows: list[tuple[str, str, str]] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        con = open_store(root / "switchover.duckdb")
        for files, per_file, repeat in ((100, 1_000, 5), (10, 100_000, 2)):
            seeds = range(10 * files, 10 * files + repeat)
            rate = statistics.median(ingest_rate(con, root, files, per_file, s) for s in seeds)
            label = f"ingest_spool {files} files × {per_file:,} rows"
            rows.append((label, f"{rate:,.0f} rows/s", "≥ 500,000"))
            for key in (False, True):
                rate = keyed_ingest_rate(root, files, per_file, 900 + files + key, key)
                label = f"  its INSERT alone, {'with' if key else 'without'} a primary key"
                rows.append((label, f"{rate:,.0f} rows/s", ""))

        # A day of traffic, 1 M attempts in the last 24 h and 1 M older ones.
        day = timedelta(hours=24)
        spool_files(root / "old", 10, 100_000, NOW - 2 * day, day / 10, 7)
        spool_files(root / "day", 10, 100_000, NOW - day, day / 10, 8)
        ingest_spool(con, root / "old")
        ingest_spool(con, root / "day")
        published = root / "published"
        ms = median_ms(lambda: publish_recent_attempts(con, published, NOW), 3)
        size = (published / "recent_attempts.parquet").stat().st_size / 1e6
        label = f"publish recent_attempts: 24 h = 1,000,000 rows ({size:.0f} MB)"
        rows.append((label, f"{ms:,.0f} ms", "(part of the 10 s freshness)"))
        (total,) = con.execute("SELECT count(*) FROM attempts").fetchone()
        hour = "SELECT provider, count(*), quantile_cont(latency_ms, 0.99) FROM attempts "
        hour += "WHERE started_at >= $since GROUP BY ALL"
        ms = median_ms(lambda: con.execute(hour, {"since": NOW - timedelta(hours=1)}).fetchall(), 5)
        label = f"store: p99 by provider, last hour of {total / 1e6:.1f} M attempts, no index"
        rows.append((label, f"{ms:,.1f} ms", "(zonemaps on started_at)"))
        con.close()

        data = PublishedData(published)
        reads = {
            "recent_attempts, last 15 min": {"since": NOW - timedelta(minutes=15)},
            "recent_attempts, 24 h, gpt errors": {
                "since": NOW - day, "provider": "gpt", "outcome": "error"
            },
            "attempt_counts_by_minute, last hour": {"since": NOW - timedelta(hours=1)},
            "attempt_counts_by_minute, 24 h": {"since": NOW - day},
        }  # fmt: skip
        for label, params in reads.items():
            query = label.split(",")[0]
            data.query(query, **params)
            ms = median_ms(lambda q=query, p=params: data.query(q, **p), 15)
            rows.append((f"read {label}", f"{ms:,.1f} ms", "≤ 100 ms"))
        data.close()

    width = max(len(r[0]) for r in rows)
    print(f"{'store':<{width}}  {'measured':>16}  target")
    for label, value, target in rows:
        print(f"{label:<{width}}  {value:>16}  {target}")
    print(f"\n(ran in {time.monotonic() - began:.0f} s, row groups of {ROW_GROUP_SIZE:,} rows)")


if __name__ == "__main__":
    run()
