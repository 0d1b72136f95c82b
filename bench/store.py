"""`python -m bench.store [--quick]`: the store's figures: spool ingest rows/s, publish time of
the 24 h recent-attempts snapshot, and windowed reads from the published snapshots.

Runs in a temporary directory, under a minute; prints a table and writes nothing else; `run()`
returns its figures for `make bench`. The
schema decision (no primary key on attempts) is measured here too, against the same files.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import report
from bench.stats import Figure
from bench.timing import Laps, TimedConnection
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


def ingest_rate(
    con: duckdb.DuckDBPyConnection, root: Path, files: int, rows: int, seed: int
) -> tuple[float, dict[str, float]]:
    """Rows/s of one `ingest_spool` call, and its seconds by part (see `ingest_parts`)."""
    spool = root / f"spool-{seed}"  # a month old: outside the published day below
    spool_files(spool, files, rows, NOW - timedelta(days=30), timedelta(seconds=1), seed)
    laps = Laps()
    started = time.perf_counter()
    result = ingest_spool(TimedConnection(con, laps), spool, max_files=files)
    seconds = time.perf_counter() - started
    assert result.files == files, result
    return result.rows / seconds, ingest_parts(laps, seconds)


# Where an ingest's time goes, by the statements it runs (the first match names the part).
INGEST_PARTS = (
    ("INSERT INTO attempts", "INSERT of the rows (read_parquet of every file)"),
    ("INSERT INTO ingested_files", "ledger INSERT (parquet_file_metadata of every file)"),
    ("COMMIT", "COMMIT (with DuckDB's automatic checkpoint when the WAL is full)"),
    ("", "other SQL (ledger lookup and check, the batch's span, settings)"),
)


def ingest_parts(laps: Laps, total: float) -> dict[str, float]:
    parts = dict.fromkeys((name for _, name in INGEST_PARTS), 0.0)
    for sql, seconds in laps.seconds.items():
        name = next(name for prefix, name in INGEST_PARTS if sql.startswith(prefix))
        parts[name] += seconds
    parts["outside SQL (listing, deleting the files)"] = total - sum(parts.values())
    return parts


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


@dataclass(frozen=True)
class Sizes:
    # (files, rows per file, repeats) of each ingest shape
    shapes: tuple[tuple[int, int, int], ...] = ((100, 1_000, 5), (10, 100_000, 2))
    day: int = 1_000_000  # attempts in the published day (and as many older ones)
    reads: int = 15


# Smoke sizes: the second shape is a tenth of the real one.
QUICK = Sizes(shapes=((100, 1_000, 1), (10, 10_000, 1)), day=100_000, reads=3)
INGEST_TARGET = 500_000  # rows/s
READ_TARGET_MS = 100.0


def run(sizes: Sizes = Sizes()) -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        con = open_store(root / "switchover.duckdb")
        for files, per_file, repeat in sizes.shapes:
            seeds = range(10 * files, 10 * files + repeat)
            runs = [ingest_rate(con, root, files, per_file, s) for s in seeds]
            rate = statistics.median(r for r, _ in runs)
            label = f"ingest_spool {files} files × {per_file:,} rows"
            figures.append(Figure(label, rate, "rows/s", at_least=INGEST_TARGET))
            total = statistics.median(1000 * files * per_file / r for r, _ in runs)
            for part in runs[0][1]:
                ms = statistics.median(1000 * p[part] for _, p in runs)
                shown = f"{ms:,.1f} ms of {total:,.0f} ({ms / total:.0%})"
                figures.append(Figure(part, ms, "ms", shown=shown, level=1))
            for key in (False, True):
                rate = keyed_ingest_rate(root, files, per_file, 900 + files + key, key)
                label = f"its INSERT alone, {'with' if key else 'without'} a primary key"
                figures.append(Figure(label, rate, "rows/s", level=1))

        # A day of traffic: `day` attempts in the last 24 h and as many older ones.
        day = timedelta(hours=24)
        per_file = sizes.day // 10
        spool_files(root / "old", 10, per_file, NOW - 2 * day, day / 10, 7)
        spool_files(root / "day", 10, per_file, NOW - day, day / 10, 8)
        ingest_spool(con, root / "old")
        ingest_spool(con, root / "day")
        published = root / "published"
        ms = median_ms(lambda: publish_recent_attempts(con, published, NOW), 3)
        size = (published / "recent_attempts.parquet").stat().st_size / 1e6
        label = f"publish recent_attempts: 24 h = {sizes.day:,} rows ({size:.0f} MB)"
        figures.append(Figure(label, ms, "ms"))
        (total,) = con.execute("SELECT count(*) FROM attempts").fetchone()
        hour = "SELECT provider, count(*), quantile_cont(latency_ms, 0.99) FROM attempts "
        hour += "WHERE started_at >= $since GROUP BY ALL"
        ms = median_ms(lambda: con.execute(hour, {"since": NOW - timedelta(hours=1)}).fetchall(), 5)
        label = f"store: p99 by provider, last hour of {total / 1e6:.1f} M attempts, no index"
        figures.append(Figure(label, ms, "ms"))
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
            ms = median_ms(lambda q=query, p=params: data.query(q, **p), sizes.reads)
            figures.append(Figure(f"read {label} (median)", ms, "ms", at_most=READ_TARGET_MS))
        data.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    args = parser.parse_args()
    began = time.monotonic()
    figures = run(QUICK if args.quick else Sizes())
    print(report.figures_table(figures))
    print(f"\n(ran in {time.monotonic() - began:.0f} s, row groups of {ROW_GROUP_SIZE:,} rows)")


if __name__ == "__main__":
    main()
