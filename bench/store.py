"""`python -m bench.store [--quick]`: the store's figures: spool ingest rows/s at the recorder's
file sizes (1,000, 10,000 and 100,000 rows a file), the publish of the 24 h recent-attempts
snapshot from nothing, and windowed reads from the published snapshots.

Runs in a temporary directory, in one to two minutes; prints a table and writes nothing else;
`run()` returns its figures for `make bench`. The schema decision (no primary key on attempts)
is measured here too, against the same files.
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
from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import report
from bench.stats import Figure
from bench.timing import Laps, TimedConnection
from engine.published.partitions import append as publish_recent_attempts
from engine.published.read import PublishedData
from engine.store import ingest_spool, open_store
from engine.store.db import ROW_GROUP_SIZE
from engine.store.ingest import MAX_FILES
from engine.telemetry.columns import ARROW_SCHEMA, COLUMNS, DUCKDB_COLUMNS

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


@dataclass(frozen=True)
class Ingested:
    rate: float  # rows/s of the call
    cpus: float  # CPU seconds of the process per second of the call: above 1, DuckDB used both
    parts: dict[str, float]  # seconds by part (see `ingest_parts`)


def ingest_rate(
    con: duckdb.DuckDBPyConnection, root: Path, files: int, rows: int, seed: int
) -> Ingested:
    """One `ingest_spool` call of `files` files of `rows` rows, as the scheduler makes it."""
    spool = root / f"spool-{seed}"  # a month old: outside the published day below
    spool_files(spool, files, rows, NOW - timedelta(days=30), timedelta(seconds=1), seed)
    laps = Laps()
    started, cpu = time.perf_counter(), time.process_time()
    result = ingest_spool(TimedConnection(con, laps), spool, max_files=files)
    seconds = time.perf_counter() - started
    assert result.files == files, result
    cpus = (time.process_time() - cpu) / seconds
    return Ingested(result.rows / seconds, cpus, ingest_parts(laps, seconds))


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


class Shape(NamedTuple):
    files: int
    rows: int  # a file
    repeat: int

    @property
    def label(self) -> str:
        what = {1_000: "the recorder's at low traffic", 10_000: "a busy recorder's, FILE_ROWS"}
        why = what.get(self.rows, "a backfill's, the simulator's")
        if self.files >= MAX_FILES:
            why = f"{why}; the scheduler's full call"
        files = f"{self.files} file{'s' * (self.files != 1)}"
        return f"ingest_spool {files} × {self.rows:,} rows ({why})"


# The recorder writes 1,000-row files at low traffic and up to FILE_ROWS (10,000) when busy
# (engine.telemetry.recorder.FlushPacing). The scheduler takes up to MAX_FILES files a call, so many
# when they wait for it: after a pause, or at ~100,000 attempts/s of 1,000-row files.
SHAPES = (Shape(MAX_FILES, 1_000, 3), Shape(100, 1_000, 5), Shape(50, 10_000, 3),
          Shape(5, 100_000, 3))  # fmt: skip


@dataclass(frozen=True)
class Sizes:
    shapes: tuple[Shape, ...] = SHAPES
    day: int = 1_000_000  # attempts in the published day (and as many older ones)
    reads: int = 15


# Smoke sizes: a tenth of the rows, once each.
QUICK = Sizes(
    shapes=tuple(Shape(max(1, s.files // 10), s.rows, 1) for s in SHAPES),
    day=100_000,
    reads=3,
)
INGEST_TARGET = 500_000  # rows/s
READ_TARGET_MS = 100.0


def ingest_figures(
    con: duckdb.DuckDBPyConnection, root: Path, shapes: tuple[Shape, ...]
) -> list[Figure]:
    """Every shape's runs interleaved (round r runs each shape still owed a repeat, in the
    opposite order to round r - 1), so that a noisy minute on the machine hits them all."""
    runs: dict[Shape, list[Ingested]] = {shape: [] for shape in shapes}
    for r in range(max(s.repeat for s in shapes)):
        for shape in shapes if r % 2 == 0 else reversed(shapes):
            if r < shape.repeat:
                seed = 10 * shape.files + shape.rows + r
                runs[shape].append(ingest_rate(con, root, shape.files, shape.rows, seed))
    figures = []
    for shape, done in runs.items():
        rate = statistics.median(r.rate for r in done)
        cpus = statistics.median(r.cpus for r in done)
        each = ", ".join(f"{r.rate / 1000:,.0f} k" for r in done)
        label = shape.label
        shown = f"{rate:,.0f} rows/s (runs {each}; {cpus:.1f} CPUs busy)"
        figures.append(Figure(label, rate, "rows/s", at_least=INGEST_TARGET, shown=shown))
        total = statistics.median(1000 * shape.files * shape.rows / r.rate for r in done)
        for part in done[0].parts:
            ms = statistics.median(1000 * r.parts[part] for r in done)
            shown = f"{ms:,.1f} ms of {total:,.0f} ({ms / total:.0%})"
            figures.append(Figure(part, ms, "ms", shown=shown, level=1))
    return figures


def run(sizes: Sizes = Sizes()) -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        con = open_store(root / "switchover.duckdb")
        figures += ingest_figures(con, root, sizes.shapes)
        smaller = min(sizes.shapes, key=lambda s: s.files * s.rows)
        for key in (False, True):
            rate = keyed_ingest_rate(root, smaller.files, smaller.rows, 900 + key, key)
            label = (
                f"its INSERT alone ({smaller.files} files × {smaller.rows:,} rows), "
                f"{'with' if key else 'without'} a primary key"
            )
            figures.append(Figure(label, rate, "rows/s", level=1))

        # A day of traffic: `day` attempts in the last 24 h and as many older ones.
        day = timedelta(hours=24)
        per_file = sizes.day // 10
        spool_files(root / "old", 10, per_file, NOW - 2 * day, day / 10, 7)
        spool_files(root / "day", 10, per_file, NOW - day, day / 10, 8)
        ingest_spool(con, root / "old")
        ingest_spool(con, root / "day")
        # From nothing each time, as after a fresh start: a cycle then appends only its batch.
        tries = iter(range(3))
        ms = median_ms(lambda: publish_recent_attempts(con, root / f"fresh-{next(tries)}", NOW), 3)
        published = root / "published"
        publish_recent_attempts(con, published, NOW)
        size = sum(p.stat().st_size for p in published.rglob("*.parquet")) / 1e6
        label = f"publish recent_attempts from nothing: 24 h = {sizes.day:,} rows ({size:.0f} MB)"
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
