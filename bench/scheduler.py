"""`python -m bench.scheduler [--quick] [--stored N]`: one scheduler cycle over a store of 10 M
attempts (or N), and the Live page's reads of what that cycle published. `make bench` runs it
over 1 M attempts first, then over 10 M, each store built on its own.

The store is built once, in a temporary directory deleted at the end:
  1. generate: 10 M attempts over the last 14 days, in time order, written as 1 M-row Parquet
     files (three routes with a priced primary and backup each, ~5 % failed primary attempts
     that a backup then serves under the same request id, costs from engine.pricing);
  2. ingest: those files through `ingest_spool`, into the real `attempts` table of `open_store`;
  3. backfill: the minute, hour and day rollups of the whole history, once (`refresh`, the
     same function the cycle calls, over 14 days instead of 2 minutes).
Then each measured cycle gets one fresh spool file of 1,000 attempts from the minute before it,
the clock moves on a minute, and `Pipeline.cycle()` runs: ingest → minute and hour rollups →
publish every snapshot (the 24 h `recent_attempts` included). Its parts are timed by wrapping
the functions the cycle calls (`ingest_spool`, `refresh`, `Pipeline.publish`, and `publish` for
each snapshot) for the length of the cycle, and each SQL statement by handing the pipeline a
connection that times `execute` (bench.timing). Never changes engine code.

Reads: `PublishedData.query` of what the Live page shows, against the published snapshots.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.dashboard import Render, live_render
from bench.stats import percentile
from bench.timing import Laps, TimedConnection, describe, timing
from engine import scheduler
from engine.paths import DataPaths
from engine.pricing import Pricer
from engine.records import ARROW_SCHEMA, COLUMNS, COST_TYPE
from engine.store import PublishedData, ingest_spool, read_manifest
from engine.store.db import sql_string
from engine.store.publish import RECENT_ATTEMPTS_SQL
from engine.store.rollups import refresh

# Each route's primary and backup: (provider_kind, model), all priced by genai-prices.
ROUTES = (
    ("support", ("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4.1")),
    ("search", ("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5")),
    ("batch", ("anthropic", "claude-haiku-4-5"), ("openai", "gpt-4.1-mini")),
)
FEATURES = (None, "chat", "summarise", "classify")
ALERTING = "alerting"  # the part of the cycle that runs engine.alerts
FAILED_PRIMARY = 0.05


@dataclass(frozen=True)
class Sizes:
    stored: int = 10_000_000
    history: timedelta = timedelta(days=14)
    file_rows: int = 1_000_000  # generated files: large ones ingest fastest
    new_rows: int = 1_000  # the fresh spool file before each cycle
    cycles: int = 6
    # No further cycle starts once the cycles so far took this long (at least one runs), so a
    # slow cycle cannot stretch `make bench` past its ten minutes; the table says so.
    cycles_budget_s: float = 20.0
    reads: int = 20  # per Live-page query
    renders: int = 3  # of the whole Live page (bench.dashboard), first render and refresh


QUICK = Sizes(
    stored=200_000, history=timedelta(days=2), file_rows=100_000, cycles=3, reads=5, renders=1
)


# --- the data ------------------------------------------------------------------------------


def attempts(n: int, start: datetime, span: timedelta, seed: int, pricer: Pricer) -> pa.Table:
    """`n` attempt rows, started_at rising through [start, start + span). An attempt that
    fails on a primary is followed by the next row as its backup attempt (same request id,
    attempt 2, fallback depth 1), unless that row failed too."""
    rng = np.random.default_rng(seed)
    start_us = int(start.timestamp() * 1e6)
    started = start_us + np.sort(rng.integers(0, int(span.total_seconds() * 1e6), n))
    route = rng.choice(len(ROUTES), n, p=[0.5, 0.35, 0.15])
    feature = rng.integers(0, len(FEATURES), n)
    failed = rng.random(n) < FAILED_PRIMARY
    backup = np.zeros(n, bool)
    backup[1:] = failed[:-1] & ~failed[1:]
    request = np.arange(n)
    request[backup] -= 1  # the backup attempt joins the failed one's request
    route[backup] = route[np.flatnonzero(backup) - 1]
    feature[backup] = feature[np.flatnonzero(backup) - 1]

    # Targets: index 2 * route (+1 for the backup) into the flattened table below.
    targets = [t for _, primary, fallback in ROUTES for t in (primary, fallback)]
    target = 2 * route + backup
    kinds = pa.array([k for k, _ in targets])
    models = pa.array([m for _, m in targets])
    names = pa.array([f"{k}/{m}" for k, m in targets])
    at = start + span
    units = [pricer.unit_prices(k, m, at) for k, m in targets]

    def per_target(values: list[float]) -> np.ndarray:
        return np.array(values, float)[target]

    ok = ~failed
    tokens = {
        "input_tokens": np.where(ok, rng.integers(100, 5000, n), 0),
        "output_tokens": np.where(ok, rng.integers(10, 800, n), 0),
        "cache_read_tokens": np.where(ok & (rng.random(n) < 0.6), rng.integers(0, 4000, n), 0),
        "cache_write_tokens": np.where(ok & (rng.random(n) < 0.1), rng.integers(500, 4000, n), 0),
    }
    cost = (
        tokens["input_tokens"] * per_target([float(u.input) for u in units])
        + tokens["output_tokens"] * per_target([float(u.output) for u in units])
        + tokens["cache_read_tokens"] * per_target([float(u.cache_read) for u in units])
        + tokens["cache_write_tokens"] * per_target([float(u.cache_write) for u in units])
    )
    latency = np.where(ok, rng.gamma(2.0, 400.0, n), rng.gamma(2.0, 40.0, n))
    streamed = rng.random(n) < 0.5
    index = pa.array(request).cast(pa.string())
    ids = pc.binary_join_element_wise(f"{seed:08x}", pc.utf8_lpad(index, 24, "0"), "")
    route_names = pa.array([r for r, _, _ in ROUTES])

    def strings(ok_value: str, failed_value: str | None) -> pa.Array:
        return pa.array(np.where(ok, ok_value, failed_value), pa.string())

    values: dict[str, Any] = {
        "request_id": ids,
        "attempt_number": (1 + backup).astype(np.int16),
        "route": route_names.take(route),
        "target": names.take(target),
        "provider": kinds.take(target),
        "provider_kind": kinds.take(target),
        "model": models.take(target),
        "key_kind": pa.array(["managed"]).take(np.zeros(n, np.int64)),
        "host": pa.array(["bench"]).take(np.zeros(n, np.int64)),
        "process_id": np.full(n, 4242, np.int32),
        "started_at": pa.array(started, pa.timestamp("us", tz="UTC")),
        "latency_ms": latency,
        "ttft_ms": pa.array(latency * 0.3, mask=~(streamed & ok)),
        "streamed": streamed,
        "outcome": strings("success", "error"),
        "decision": strings("served", "fall_back"),
        "error_class": pa.array(np.where(ok, None, "overloaded")),
        "fault_kind": pa.array(np.where(ok, None, "provider")),
        "http_status": np.where(ok, 200, 529).astype(np.int16),
        "breaker_state": pa.array(["closed"]).take(np.zeros(n, np.int64)),
        "served": ok,
        "fallback_depth": backup.astype(np.int16),
        **tokens,
        "tokens_estimated": np.zeros(n, bool),
        "cost_usd": pc.round(pa.array(cost), 9).cast(COST_TYPE, safe=False),
        "price_source": pa.array(np.where(ok, units[0].source, None)),
        "feature": pa.array(FEATURES).take(feature),
        "pii_masked": np.zeros(n, np.int32),
    }
    arrays = [_column(values.get(c.name), n, c.arrow) for c in COLUMNS]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def _column(value: Any, n: int, arrow: pa.DataType) -> pa.Array:
    if value is None:
        return pa.nulls(n, arrow)
    return (value if isinstance(value, pa.Array) else pa.array(value)).cast(arrow)


def generate(directory: Path, sizes: Sizes, end: datetime, pricer: Pricer) -> int:
    """The history as Parquet files in `directory`, oldest first; returns how many."""
    directory.mkdir(parents=True, exist_ok=True)
    files = -(-sizes.stored // sizes.file_rows)
    span = sizes.history / files
    start = end - sizes.history
    for i in range(files):
        rows = min(sizes.file_rows, sizes.stored - i * sizes.file_rows)
        table = attempts(rows, start + span * i, span, 1 + i, pricer)
        pq.write_table(table, directory / f"history-{i:05d}.parquet")
    return files


@dataclass
class Clock:
    at: datetime

    def now(self) -> datetime:
        return self.at


@dataclass
class Cycle:
    seconds: float
    parts: dict[str, float]  # ingest, minute rollups, hour rollups, publish
    snapshots: dict[str, float]  # each snapshot's COPY and rename
    statements: dict[str, float]  # every SQL statement the cycle ran


def measure_cycle(pipeline: scheduler.Pipeline) -> Cycle:
    parts, snapshots, statements = Laps(), Laps(), Laps()
    real_con = pipeline.con
    pipeline.con = TimedConnection(real_con, statements)
    try:
        with contextlib.ExitStack() as timers:
            timers.enter_context(timing(scheduler, "ingest_spool", parts, lambda *a, **k: "ingest"))
            timers.enter_context(
                timing(scheduler, "refresh", parts, lambda con, grain, *a, **k: f"{grain} rollups")
            )
            if hasattr(pipeline, "watch"):  # the alerting pass, in a pipeline that has one
                timers.enter_context(timing(pipeline.watch, "run", parts, lambda *a, **k: ALERTING))
            timers.enter_context(timing(pipeline, "publish", parts, lambda *a: "publish"))
            timers.enter_context(
                timing(scheduler.publishing, "publish", snapshots, lambda con, d, n, *a, **k: n)
            )
            started = time.perf_counter()
            pipeline.cycle()
            seconds = time.perf_counter() - started
    finally:
        pipeline.con = real_con
    return Cycle(seconds, parts.seconds, snapshots.seconds, statements.seconds)


# --- the run -------------------------------------------------------------------------------


@dataclass
class Result:
    sizes: Sizes
    build: dict[str, float]  # generate, ingest, backfill: minute / hour / day rollups
    peak_rss_mb: dict[str, float]  # the process's peak resident memory after each build step
    database_mb: float
    cycles: list[Cycle]
    recent_rows: int  # rows in the published 24 h recent_attempts snapshot
    recent_anatomy: dict[str, float]  # the recent_attempts snapshot taken apart, seconds
    reads: dict[str, list[float]]  # Live-page query → seconds per run
    render: Render | None = None  # the whole Live page through Streamlit's AppTest
    report_s: float | None = None  # last week's report, every format (engine.reports)


def run(sizes: Sizes = Sizes(), progress: Callable[[str], None] = print) -> Result:
    pricer = Pricer()
    clock = Clock(datetime.now(UTC).replace(second=0, microsecond=0))
    root = Path(tempfile.mkdtemp(prefix="switchover-bench-cycle-"))
    try:
        paths = DataPaths(root)
        pipeline = scheduler.Pipeline(paths, pricer, now=clock.now)
        try:
            build, peak_rss_mb = build_store(pipeline, sizes, progress)
            pipeline.con.execute("CHECKPOINT")
            database_mb = paths.database.stat().st_size / 1e6
            os.sync()  # the build's writes are not left to the disk during the cycles
            cycles: list[Cycle] = []
            for k in range(sizes.cycles):
                if sum(c.seconds for c in cycles) > sizes.cycles_budget_s:
                    progress(f"stopping after {k} cycles: over {sizes.cycles_budget_s:g} s")
                    break
                clock.at += timedelta(minutes=1)
                fresh = attempts(sizes.new_rows, clock.at - timedelta(minutes=1),
                                 timedelta(minutes=1), 100_000 + k, pricer)  # fmt: skip
                pq.write_table(fresh, paths.spool / f"bench-fresh-{k:05d}.parquet")
                cycles.append(measure_cycle(pipeline))
                progress(f"cycle {k + 1}: {cycles[-1].seconds * 1000:,.0f} ms")
            anatomy = recent_anatomy(pipeline.con, root / "anatomy.parquet", clock.at)
        finally:
            pipeline.close()
        recent_rows = read_manifest(paths.published)["recent_attempts"].rows
        reads = live_reads(paths.published, clock.at, sizes.reads)
        render = live_render(root, repeat=sizes.renders) if sizes.renders else None
        report_s = weekly_report_seconds(paths, clock.at)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Result(
        sizes, build, peak_rss_mb, database_mb, cycles, recent_rows, anatomy, reads, render,
        report_s,
    )  # fmt: skip


def weekly_report_seconds(paths: DataPaths, now: datetime) -> float:
    """Last week's report in every format (HTML, Markdown, CSV, PDF where Chromium is), as the
    scheduler's Monday job makes it, from the published snapshots."""
    from engine.config import ReportsConfig

    started = time.perf_counter()
    scheduler.weekly_report(paths, ReportsConfig(), now=now)
    return time.perf_counter() - started


def build_store(
    pipeline: scheduler.Pipeline, sizes: Sizes, progress: Callable[[str], None]
) -> tuple[dict[str, float], dict[str, float]]:
    """Generate, ingest and backfill the history that ends at the pipeline's clock; return
    the seconds of each step, and the process's peak memory (RSS, MB) after each: a step that
    raised it shows."""
    end = pipeline.now()
    history = pipeline.paths.root / "history"
    seconds: dict[str, float] = {}
    peak_mb: dict[str, float] = {}

    def prices(provider_kind: str, model: str) -> Any:
        return pipeline.pricer.unit_prices(provider_kind, model, end)

    def step(name: str, what: str, action: Callable[[], Any]) -> Any:
        progress(what)
        started = time.perf_counter()
        result = action()
        seconds[name] = time.perf_counter() - started
        peak_mb[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # Linux: KB
        return result

    files = step(
        "generate",
        f"generating {sizes.stored:,} attempts over {sizes.history.days} days",
        lambda: generate(history, sizes, end, pipeline.pricer),
    )
    ingested = step(
        "ingest",
        f"ingesting {files} files",
        lambda: ingest_spool(pipeline.con, history, max_files=files),
    )
    assert ingested.rows == sizes.stored and not ingested.more, ingested
    for grain in ("minute", "hour"):
        step(
            f"backfill {grain} rollups",
            f"backfilling the {grain} rollups",
            lambda g=grain: refresh(pipeline.con, g, end - sizes.history, end, prices),
        )
    step("backfill day rollups", "backfilling the day rollups", pipeline.day_rollups)
    return seconds, peak_mb


def recent_anatomy(con: Any, scratch: Path, now: datetime) -> dict[str, float]:
    """The 24 h recent_attempts snapshot taken apart (best of 3 each): its query alone, the
    rows fetched into Arrow and no Parquet written; the same COPY without its ORDER BY; and the
    same COPY over the last hour only."""
    day = {"since": now - timedelta(hours=scheduler.RECENT_ATTEMPTS_HOURS)}
    hour = {"since": now - timedelta(hours=1)}
    unordered = RECENT_ATTEMPTS_SQL.replace("ORDER BY started_at", "")
    assert unordered != RECENT_ATTEMPTS_SQL, "the snapshot's query changed: update the anatomy"

    def copy(sql: str) -> str:
        target = sql_string(str(scratch))  # compressed as publish_recent_attempts does
        return f"COPY ({sql}) TO {target} (FORMAT parquet, COMPRESSION snappy)"

    actions = {
        "its query alone, fetched into Arrow (no Parquet)": (
            lambda: con.sql(RECENT_ATTEMPTS_SQL, params=day).to_arrow_table()
        ),
        "the same COPY without its ORDER BY": lambda: con.execute(copy(unordered), day),
        "the same COPY for the last hour only": (
            lambda: con.execute(copy(RECENT_ATTEMPTS_SQL), hour)
        ),
    }
    best = {}
    for label, action in actions.items():
        times = []
        for _ in range(3):
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
        best[label] = min(times)
    scratch.unlink(missing_ok=True)
    return best


def live_reads(published: Path, now: datetime, repeat: int) -> dict[str, list[float]]:
    """The Live page's queries, each run once to warm up and then `repeat` times."""
    queries = {
        "minute_rollups, last hour": ("minute_rollups", {"since": now - timedelta(hours=1)}),
        "recent_attempts, last 15 min, 200 rows": (
            "recent_attempts", {"since": now - timedelta(minutes=15), "limit": 200}
        ),
        "attempt_counts_by_minute, last hour": (
            "attempt_counts_by_minute", {"since": now - timedelta(hours=1)}
        ),
    }  # fmt: skip
    data = PublishedData(published)
    times: dict[str, list[float]] = {}
    try:
        for label, (name, params) in queries.items():
            assert len(data.query(name, **params)) > 0, label
            for _ in range(repeat):
                started = time.perf_counter()
                data.query(name, **params)
                times.setdefault(label, []).append(time.perf_counter() - started)
    finally:
        data.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200,000 attempts over 2 days")
    parser.add_argument("--stored", type=int, help="attempts in the store (default 10 M)")
    args = parser.parse_args()
    began = time.monotonic()
    sizes = QUICK if args.quick else Sizes()
    if args.stored:
        sizes = dataclasses.replace(
            sizes, stored=args.stored, file_rows=min(args.stored, sizes.file_rows)
        )
    result = run(sizes)
    for name, seconds in result.build.items():
        print(f"{name:<24} {seconds:8.1f} s, peak RSS {result.peak_rss_mb[name]:,.0f} MB")
    print(f"database {result.database_mb:,.0f} MB")
    print(f"recent_attempts {result.recent_rows:,} rows")
    for label, seconds in result.recent_anatomy.items():
        print(f"    {label}: {seconds * 1000:,.0f} ms")
    for i, cycle in enumerate(result.cycles, 1):
        parts = ", ".join(f"{k} {v * 1000:,.0f}" for k, v in cycle.parts.items())
        print(f"cycle {i}: {cycle.seconds * 1000:,.0f} ms ({parts})")
        for name, seconds in cycle.snapshots.items():
            print(f"    snapshot {name:<20} {seconds * 1000:8.1f} ms")
        top = sorted(cycle.statements.items(), key=lambda kv: -kv[1])[:6]
        for sql, seconds in top:
            print(f"    {seconds * 1000:8.1f} ms  {describe(sql)}")
    for label, values in result.reads.items():
        p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
        print(f"read {label:<42} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    print(f"\n(ran in {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
