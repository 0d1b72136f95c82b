"""`python -m bench.scheduler [--quick] [--stored N]`: the scheduler's cycle as the day's
traffic grows, over a store of 100 M attempts (or N), and the Live page's reads of what the
cycles published. `make bench` runs it as a part of the telemetry bench.

The store is built once, in a temporary directory deleted at the end, with bounded memory:
  1. generate: 100 M attempts over the 30 days before the last 24 hours, in time order, as
     1 M-row Parquet files (three routes with a priced primary and backup each, ~5 % failed
     primary attempts that a backup then serves under the same request id, costs from
     engine.core.pricing), a few files at a time;
  2. ingest: those files through `ingest_spool`, into the real `attempts` table of `open_store`,
     a few files a transaction;
  3. backfill: the minute, hour and day rollups of the whole history with the same `refresh`
     the cycle calls, in the same pieces of a few hours (`rollups.chunks`) the scheduler uses
     for a late backlog, so that memory stays bounded (each step's own peak RSS: the kernel's
     high-water mark is reset before it, `peak_memory_mb`).
Then, for each daily volume in turn (1, 5, 10 and 20 M attempts in the last 24 hours), the clock
is set to the end of that volume's day (a day after the one before, the last one ending now,
so that the Live page, which reads by the wall clock, shows it as it happens) and the day is
filled with the volume in time order, as traffic arrives (generated, ingested, its rollups
refreshed); the days of the volumes before stay in the store. The published folder is emptied,
and the cycles run: the first one writes the whole 24 h as one part (what a fresh install or
an upgrade costs once), then the clock moves on 5 s (the scheduler's interval) before each
measured one, which gets one fresh spool file of what the day's rate brings in 5 s (1,157
attempts at 20 M a day), and `Pipeline.cycle()` runs:
ingest → minute and hour rollups → alerting → publish (the attempts ingested since the last
cycle as one new part, the rollups and events whole). Its parts are timed by wrapping the
functions the cycle calls (`ingest_spool`, `refresh`, `Pipeline.publish`, `publish` for each
snapshot and `partitions.append` for the attempts) for the length of the cycle, and each SQL
statement by handing the pipeline a connection that times `execute` (bench.timing). Never
changes engine code. The compaction that merges the parts off the cycle is measured on its
own: one merge of the largest tier, as rows a second.

Reads: `PublishedData.query` of what the Live page shows, against the published snapshots of
the largest volume.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import browser as browser_bench
from bench.dashboard import Render, live_render
from bench.stats import percentile
from bench.timing import Laps, TimedConnection, describe, timing
from dashboard.screenshots import serving
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.published import partitions
from engine.published import publish as publishing
from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.publish import Part, Snapshot, change_entry, read_manifest
from engine.published.read import PublishedData
from engine.scheduler import pipeline as scheduler
from engine.scheduler.weekly_report import weekly_report
from engine.store import ingest_spool
from engine.store.rollups import chunks, refresh
from engine.telemetry.columns import ARROW_SCHEMA, COLUMNS, COST_TYPE

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
    stored: int = 100_000_000  # before the last 24 hours
    history: timedelta = timedelta(days=30)
    daily: tuple[int, ...] = (1_000_000, 5_000_000, 10_000_000, 20_000_000)  # the last 24 h
    file_rows: int = 1_000_000  # generated files: large ones ingest fastest
    files_a_batch: int = 2  # generated and ingested at a time: memory stays bounded
    # Cycles a volume, 5 s apart (scheduler.CYCLE_S) as the scheduler runs them, each after the
    # attempts the day's rate brings in 5 s: a minute of cycles, so the once-a-minute incident
    # pass is in it once (engine.alerts.watch.INCIDENTS_EVERY), in the median's tail.
    cycles: int = 12
    # No further cycle of a volume starts once its cycles so far took this long (at least one
    # runs), so a slow cycle cannot stretch the bench; the table says so.
    cycles_budget_s: float = 20.0
    # At the largest volume, a cycle after a burst of this many new attempts each: what one
    # cycle (every 5 s) keeps up with.
    bursts: tuple[int, ...] = (10_000, 50_000)
    reads: int = 20  # per Live-page query
    renders: int = 3  # of the whole Live page (bench.dashboard), first render and refresh


QUICK = Sizes(
    stored=200_000, history=timedelta(days=2), daily=(20_000, 100_000), file_rows=100_000,
    cycles=12, reads=5, renders=1,
)  # fmt: skip


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


def generate(
    directory: Path, rows: int, start: datetime, span: timedelta, sizes: Sizes, pricer: Pricer,
    seed: int,
) -> list[Path]:  # fmt: skip
    """`rows` attempts over [start, start + span) as Parquet files in `directory`, oldest first."""
    directory.mkdir(parents=True, exist_ok=True)
    files = max(1, -(-rows // sizes.file_rows))
    piece = span / files
    written = []
    for i in range(files):
        n = min(sizes.file_rows, rows - i * sizes.file_rows)
        table = attempts(n, start + piece * i, piece, seed + i, pricer)
        path = directory / f"history-{seed + i:08d}.parquet"
        pq.write_table(table, path)
        written.append(path)
    return written


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
                timing(publishing, "publish", snapshots, lambda con, d, n, *a, **k: n)
            )
            timers.enter_context(
                timing(partitions, "append", snapshots, lambda *a, **k: RECENT_ATTEMPTS)
            )
            started = time.perf_counter()
            pipeline.cycle()
            seconds = time.perf_counter() - started
    finally:
        pipeline.con = real_con
    return Cycle(seconds, parts.seconds, snapshots.seconds, statements.seconds)


# --- the run -------------------------------------------------------------------------------


@dataclass
class Stage:
    daily: int  # attempts in the last 24 hours
    stored: int  # attempts in the store
    first_cycle_s: float  # the first cycle on an empty published folder: the 24 h as one part
    cycles: list[Cycle]
    recent_rows: int  # rows in the published 24 h recent_attempts parts
    parts: int  # the parts they are in
    fill_s: float  # filling the last day up to `daily` (generate, ingest, its rollups)
    peak_rss_mb: float  # the process's peak while filling the day and running the cycles
    # The peak from the first cycle on: the scheduler's own working memory, the generator's
    # tables gone (what remains of them resident counts, so this is an upper bound).
    cycles_peak_rss_mb: float
    new_rows: int  # the attempts before each cycle: what the day's rate brings in 5 s
    bursts: dict[int, float] = dataclasses.field(default_factory=dict)  # new rows → seconds


@dataclass
class Result:
    sizes: Sizes
    build: dict[str, float]  # generate and ingest, backfill: minute / hour / day rollups
    peak_rss_mb: dict[str, float]  # the process's peak resident memory in each build step
    database_mb: float
    stages: list[Stage]
    merge_rows_s: float  # the compaction's merge of the largest tier, rows a second
    reads: dict[str, list[float]]  # Live-page query → seconds per run
    render: Render | None = None  # the whole Live page through Streamlit's AppTest
    browser: list[browser_bench.Timing] | None = None  # every page in Chromium (bench.browser)
    report_s: float | None = None  # last week's report, every format (engine.reports)

    @property
    def cycles(self) -> list[Cycle]:
        """The cycles at the largest daily volume."""
        return self.stages[-1].cycles


def run(sizes: Sizes = Sizes(), progress: Callable[[str], None] = print) -> Result:
    pricer = Pricer()
    clock = Clock(_day_ends(sizes, 0))
    root = Path(tempfile.mkdtemp(prefix="switchover-bench-cycle-"))
    try:
        paths = DataPaths(root)
        pipeline = scheduler.Pipeline(paths, pricer, now=clock.now)
        try:
            pipeline, build, peak_rss_mb = build_store(pipeline, sizes, progress)
            pipeline.con.execute("CHECKPOINT")
            database_mb = paths.database.stat().st_size / 1e6
            stages = []
            for k, daily in enumerate(sizes.daily):
                clock.at = max(clock.at, _day_ends(sizes, k))  # the days before hold the others
                stages.append(run_stage(pipeline, clock, sizes, daily, k, progress))
            merge_rows_s = merge_rate(paths.published, root / "merge", clock.at)
        finally:
            pipeline.close()
        reads = live_reads(paths.published, clock.at, sizes.reads)
        render = live_render(root, repeat=sizes.renders) if sizes.renders else None
        in_browser = None
        if sizes.renders:
            try:
                in_browser = in_chromium(paths, sizes.renders)
            except RuntimeError as error:  # a page that never showed: say so, keep the rest
                progress(f"browser: {error}")
        report_s = weekly_report_seconds(paths, clock.at)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Result(sizes, build, peak_rss_mb, database_mb, stages, merge_rows_s, reads,
                  render=render, browser=in_browser, report_s=report_s)  # fmt: skip


def in_chromium(paths: DataPaths, repeat: int) -> list[browser_bench.Timing]:
    """Every page of `switchover dashboard` on the store, in headless Chromium, and an Explorer
    lookup of a request of the last hour."""
    published = PublishedData(paths.published)
    try:
        since = datetime.now(UTC) - timedelta(hours=1)
        latest = published.query("recent_attempts", since=since, limit=1)
    finally:
        published.close()
    request_id = str(latest["request_id"].iloc[0]) if len(latest) else None
    with serving(paths.root) as url:
        return browser_bench.measure(url, repeat, request_id)


def _day_ends(sizes: Sizes, k: int) -> datetime:
    """When the day of the k-th volume ends: one day apart, the last one now, so that the Live
    page (which reads by the wall clock) shows the largest volume as it happens."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(days=len(sizes.daily) - 1 - k)


def run_stage(
    pipeline: scheduler.Pipeline, clock: Clock, sizes: Sizes, daily: int, k: int,
    progress: Callable[[str], None],
) -> Stage:  # fmt: skip
    """Fill the last day with `daily` attempts in time order, empty the published folder, run
    the first cycle and then the measured ones."""
    progress(f"{daily:,} attempts in the last 24 h")
    reset_peak_memory()
    started = time.perf_counter()
    day = clock.at - timedelta(days=1)
    _load(pipeline, daily, day, timedelta(days=1), sizes, 10_000_000 * (k + 1), progress)
    _backfill(pipeline, day - timedelta(hours=1), clock.at, ("minute", "hour", "day"))
    fill_s = time.perf_counter() - started
    fill_peak = peak_memory_mb()
    shutil.rmtree(pipeline.paths.published, ignore_errors=True)
    pipeline.paths.published.mkdir(parents=True)
    pa.default_memory_pool().release_unused()
    reset_peak_memory()
    new_rows = round(daily * scheduler.CYCLE_S / 86_400)  # what arrives between two cycles
    first = _cycle(pipeline, clock, new_rows, 1_000 * k).seconds
    progress(f"first cycle (the whole 24 h as one part): {first:,.1f} s")
    cycles: list[Cycle] = []
    for n in range(sizes.cycles):
        if sum(c.seconds for c in cycles) > sizes.cycles_budget_s:
            progress(f"stopping after {n} cycles: over {sizes.cycles_budget_s:g} s")
            break
        cycles.append(_cycle(pipeline, clock, new_rows, 1_000 * k + 1 + n))
        progress(f"cycle {n + 1}: {cycles[-1].seconds * 1000:,.0f} ms")
    bursts = {}
    if daily == sizes.daily[-1]:
        for n, rows in enumerate(sizes.bursts):
            bursts[rows] = _cycle(pipeline, clock, rows, 1_000 * k + 500 + n).seconds
            progress(f"a cycle after {rows:,} new attempts: {bursts[rows]:,.2f} s")
    (stored,) = pipeline.con.execute("SELECT count(*) FROM attempts").fetchone()
    entry = read_manifest(pipeline.paths.published)[RECENT_ATTEMPTS]
    cycles_peak = peak_memory_mb()
    return Stage(daily, stored, first, cycles, entry.rows, len(entry.parts), fill_s,
                 max(fill_peak, cycles_peak), cycles_peak, new_rows, bursts)  # fmt: skip


def _cycle(pipeline: scheduler.Pipeline, clock: Clock, rows: int, seed: int) -> Cycle:
    """One measured cycle, the scheduler's interval after the last, with one fresh spool file of
    `rows` attempts from that interval."""
    step = timedelta(seconds=scheduler.CYCLE_S)
    clock.at += step
    fresh = attempts(rows, clock.at - step, step, 100_000_000 + seed, pipeline.pricer)
    pq.write_table(fresh, pipeline.paths.spool / f"bench-fresh-{seed:08d}.parquet")
    return measure_cycle(pipeline)


def weekly_report_seconds(paths: DataPaths, now: datetime) -> float:
    """Last week's report in every format (HTML, Markdown, CSV, PDF where Chromium is), as the
    scheduler's Monday job makes it, from the published snapshots."""
    from engine.config import ReportsConfig

    started = time.perf_counter()
    weekly_report(paths, ReportsConfig(), now=now, background=False)
    return time.perf_counter() - started


def reset_peak_memory() -> None:
    """Start the process's peak resident memory again from what it holds now (Linux: writing
    5 to clear_refs resets VmHWM), so that the next step's peak is its own."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_mb() -> float:
    """The process's peak resident memory since the last reset, in MB."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1e3  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # since the start


def build_store(
    pipeline: scheduler.Pipeline, sizes: Sizes, progress: Callable[[str], None]
) -> tuple[scheduler.Pipeline, dict[str, float], dict[str, float]]:
    """Generate, ingest and backfill the history that ends a day before the pipeline's clock;
    return the pipeline to go on with, the seconds of each step, and the process's peak memory
    (RSS, MB) in each. The store is closed and opened again between the generation and the
    backfill, and pyarrow's pool hands its free memory back, so that the backfill's peak is
    what the backfill holds, not what the bench's generator left behind."""
    end = pipeline.now() - timedelta(days=1)
    seconds: dict[str, float] = {}
    peak_mb: dict[str, float] = {}

    def step(name: str, what: str, action: Callable[[], Any]) -> Any:
        progress(what)
        reset_peak_memory()
        started = time.perf_counter()
        result = action()
        seconds[name] = time.perf_counter() - started
        peak_mb[name] = peak_memory_mb()
        return result

    step(
        "generate and ingest",
        f"generating and ingesting {sizes.stored:,} attempts over {sizes.history.days} days",
        lambda: _load(pipeline, sizes.stored, end - sizes.history, sizes.history, sizes, 1,
                      progress),
    )  # fmt: skip
    pipeline.close()
    pa.default_memory_pool().release_unused()
    pipeline = scheduler.Pipeline(pipeline.paths, pipeline.pricer, now=pipeline.now)
    for grain in ("minute", "hour", "day"):
        step(
            f"backfill {grain} rollups",
            f"backfilling the {grain} rollups",
            lambda g=grain: _backfill(pipeline, end - sizes.history, end, (g,)),
        )
    return pipeline, seconds, peak_mb


def _load(
    pipeline: scheduler.Pipeline, rows: int, start: datetime, span: timedelta, sizes: Sizes,
    seed: int, progress: Callable[[str], None],
) -> None:  # fmt: skip
    """`rows` attempts over [start, start + span) into the store, `files_a_batch` files of
    `file_rows` at a time (generated, ingested, deleted)."""
    folder = pipeline.paths.root / "history"
    batch_rows = sizes.files_a_batch * sizes.file_rows
    batches = max(1, -(-rows // batch_rows))
    piece = span / batches
    for b in range(batches):
        n = min(batch_rows, rows - b * batch_rows)
        files = generate(folder, n, start + piece * b, piece, sizes, pipeline.pricer,
                         seed + b * sizes.files_a_batch)  # fmt: skip
        ingested = ingest_spool(pipeline.con, folder, max_files=len(files))
        assert ingested.rows == n and not ingested.more, ingested
        if b % 5 == 4:
            progress(f"  {min((b + 1) * batch_rows, rows):,} of {rows:,}")


def _backfill(
    pipeline: scheduler.Pipeline, since: datetime, until: datetime, grains: tuple[str, ...]
) -> None:
    """The rollups of [since, until], in the scheduler's pieces, as a late backlog is done."""
    for lo, hi in chunks(since, until):
        for grain in grains:
            refresh(pipeline.con, grain, lo, hi, pipeline._prices, now=until)  # type: ignore[arg-type]


def merge_rate(published: Path, scratch: Path, now: datetime, ways: int = 4) -> float:
    """Rows a second of the compaction's merge of its largest tier: the published 24 h cut in
    `ways` parts by time, merged into one by `partitions.compact`."""
    entry = read_manifest(published)[RECENT_ATTEMPTS]
    files = [str(published / p.file) for p in entry.parts]
    scratch.mkdir(parents=True)
    con = duckdb.connect()
    try:
        lo, hi = con.execute(
            "SELECT min(started_at), max(started_at) FROM read_parquet($f)", {"f": files}
        ).fetchone()
        step = (hi - lo) / ways
        parts = []
        for i in range(ways):
            name = f"{RECENT_ATTEMPTS}/{i:012d}-{i:012d}-t{len(partitions.FANOUT) - 1}.parquet"
            (scratch / RECENT_ATTEMPTS).mkdir(exist_ok=True)
            sql = ("SELECT * FROM read_parquet($f) WHERE started_at >= $lo AND started_at < $hi"
                   " ORDER BY started_at")  # fmt: skip
            bounds = {"f": files, "lo": lo + step * i, "hi": lo + step * (i + 1)}
            if i == ways - 1:
                bounds["hi"] = hi + timedelta(seconds=1)
            target = str(scratch / name).replace("'", "''")
            (rows,) = con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet)", bounds).fetchone()
            parts.append(Part(name, rows, i, i, lo + step * (i + 1), len(partitions.FANOUT) - 1))
    finally:
        con.close()
    change_entry(scratch, RECENT_ATTEMPTS, lambda _: Snapshot(
        RECENT_ATTEMPTS, f"{RECENT_ATTEMPTS}/", sum(p.rows for p in parts), now, 0.0,
        parts=tuple(parts), through_batch=ways - 1, schema=partitions.SCHEMA))  # fmt: skip
    started = time.perf_counter()
    done = partitions.compact(scratch, now, hours=24 * 365)
    seconds = time.perf_counter() - started
    assert done.merged == ways, done
    return sum(p.rows for p in parts) / seconds


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
    parser.add_argument("--stored", type=int, help="attempts in the store (default 100 M)")
    parser.add_argument("--days", type=int, help="the days they span (default 30)")
    parser.add_argument("--daily", help="attempts in the last 24 h, in millions: 1,5,10,20")
    args = parser.parse_args()
    began = time.monotonic()
    sizes = QUICK if args.quick else Sizes()
    if args.stored:
        sizes = dataclasses.replace(
            sizes, stored=args.stored, file_rows=min(args.stored, sizes.file_rows)
        )
    if args.days:
        sizes = dataclasses.replace(sizes, history=timedelta(days=args.days))
    if args.daily:
        daily = tuple(int(float(m) * 1e6) for m in args.daily.split(","))
        sizes = dataclasses.replace(sizes, daily=daily)
    result = run(sizes)
    for name, seconds in result.build.items():
        print(f"{name:<24} {seconds:8.1f} s, peak RSS {result.peak_rss_mb[name]:,.0f} MB")
    print(f"database {result.database_mb:,.0f} MB; merge {result.merge_rows_s:,.0f} rows/s")
    for stage in result.stages:
        totals = [c.seconds * 1000 for c in stage.cycles]
        print(f"{stage.daily:,} a day ({stage.stored:,} stored, {stage.recent_rows:,} published "
              f"in {stage.parts} parts): first cycle {stage.first_cycle_s:,.1f} s, then "
              f"median {statistics.median(totals):,.0f} ms, max {max(totals):,.0f} ms; "
              f"peak RSS {stage.peak_rss_mb:,.0f} MB, "
              f"from the first cycle on {stage.cycles_peak_rss_mb:,.0f} MB")  # fmt: skip
        for i, cycle in enumerate(stage.cycles, 1):
            parts = ", ".join(f"{k} {v * 1000:,.0f}" for k, v in cycle.parts.items())
            print(f"  cycle {i}: {cycle.seconds * 1000:,.0f} ms ({parts})")
            top = sorted(cycle.statements.items(), key=lambda kv: -kv[1])[:5]
            for sql, seconds in top:
                print(f"      {seconds * 1000:8.1f} ms  {describe(sql)}")
    for label, values in result.reads.items():
        p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
        print(f"read {label:<42} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    if result.render:
        first, refresh = result.render.first_s, result.render.refresh_s
        print(f"Live through AppTest: first render median {statistics.median(first):.2f} s, "
              f"refresh median {statistics.median(refresh):.2f} s")  # fmt: skip
    if result.browser:
        print(browser_bench.describe(result.browser))
    if result.report_s is not None:
        print(f"last week's report, every format: {result.report_s:.1f} s")
    print(f"\n(ran in {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
