"""`python -m bench.ingest_profile [--batches N] [--levers]`: where `ingest_spool`'s time goes
for 100 spool files × 1,000 rows (the recorder's files at low traffic), seen by two profilers:

1. DuckDB's own (`enable_profiling = 'json'`), on the batch's INSERT as `ingest_spool` runs it
   (a connection wrapper switches it on around that one statement): each operator's time,
   reading the Parquet files against the INSERT into `attempts`;
2. py-spy (`record --native`; the `bench` extra: `pip install -e '.[bench]'`), sampling a child
   process that ingests `batches` batches: the share of the on-CPU samples per line of
   engine/store/ingest.py, and within the INSERT per kind of DuckDB native function. DuckDB's
   wheel is stripped, so only the functions it exports have names; the others are "unnamed".

Then the levers, in interleaved runs of the same INSERT into a bare `attempts` table (medians of
`repeat` runs each: rows/s, CPU a row, and the share of that CPU on DuckDB's worker threads,
which says whether it appended on both cores whatever else the machine runs): the same
100,000 rows as 100, 10 and 1 files; the scheduler's full call, 500 files of 1,000 rows; and
the 100 files into row groups of 61,440 rows (engine/store/db.py) and of 30,720.
`--levers` measures only those.

Prints the breakdowns and the levers; writes nothing outside a temporary directory.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import linecache
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from bench.store import NOW, spool_files
from engine.store import ingest as ingest_module
from engine.store import ingest_spool, open_store
from engine.store.db import ROW_GROUP_SIZE
from engine.store.ingest import MAX_FILES
from engine.telemetry.columns import COLUMN_NAMES, DUCKDB_COLUMNS

FILES, ROWS = 100, 1_000
RATE_HZ = 200  # higher, and py-spy's native unwinding falls behind

# Leaf function → what it is doing; the first pattern that matches names it.
KINDS = (
    ("threads: waiting, waking", r"pthread_|sem_post|sem_wait|futex|WaitForTask|SignalAllPools|"
                                 r"__lll_lock|syscall|sched_yield"),
    ("memory: malloc, free, page release", r"malloc|free\b|operator new|operator delete|madvise|"
                                           r"je_|mmap|munmap|_int_"),
    ("storage: compressing the appended columns", r"Compress|Analyze|Bitpacking|FSST|fsst|RLE|"
                                                  r"Chimp|Patas|ALP|DistinctStatistics|"
                                                  r"HyperLogLog|Hash"),
    ("storage: re-reading appended rows (merge, checkpoint)", r"Scan|Fetch"),
    ("storage: appending to in-memory segments", r"Append|ColumnSegment|Segment|ValidityMask|"
                                                 r"Flatten|Vector|Statistics|RowGroup"),
    ("Parquet: reading and decoding", r"Parquet|ColumnReader|Thrift|thrift|Snappy|snappy|zstd|"
                                      r"ZSTD|Dictionary"),
    ("files: open, stat, list, delete", r"xstat|stat64|open|readlink|realpath|unlink|FileExists|"
                                        r"Canonicalize|getdents|pread|read\b|close"),
    ("unnamed DuckDB code", r"^0x.*_duckdb"),
    ("unnamed libc code (memcpy and the like)", r"^0x.*libc"),
    ("other named DuckDB code", r"duckdb::"),
)  # fmt: skip
PY_FRAME = re.compile(r"^(?P<function>.+) \((?P<file>[^():]+\.py):(?P<line>\d+)\)$")


# --- DuckDB's profiler ---------------------------------------------------------------------


class ProfiledInsert:
    """A DuckDB connection that profiles the statement that inserts into `attempts`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, output: Path) -> None:
        self._con, self._output = con, output
        self.operators: dict[str, float] = {}
        self.seconds = 0.0

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if not sql.lstrip().startswith("INSERT INTO attempts"):
            return self._con.execute(sql, *args, **kwargs)
        self._con.execute("PRAGMA enable_profiling = 'json'")
        self._con.execute(f"PRAGMA profiling_output = '{self._output}'")
        try:
            started = time.perf_counter()
            # Fetched before the next statement on the connection replaces the result.
            rows = self._con.execute(sql, *args, **kwargs).fetchall()
            self.seconds = time.perf_counter() - started
        finally:
            self._con.execute("PRAGMA disable_profiling")
        self.operators = _operators(json.loads(self._output.read_text()))
        return _Fetched(rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@dataclass
class _Fetched:
    rows: list[tuple[Any, ...]]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


def _operators(profile: dict[str, Any]) -> dict[str, float]:
    """Seconds per operator name, summed over the plan (DuckDB adds up its threads' time)."""
    seconds: dict[str, float] = collections.Counter()

    def walk(node: dict[str, Any]) -> None:
        if node.get("name"):
            seconds[node["name"]] += node.get("timing", 0.0)
        for child in node.get("children", []):
            walk(child)

    top = profile.get("operator", profile)
    walk(top if isinstance(top, dict) else {"children": top})
    return dict(seconds)


def duckdb_profile(root: Path) -> ProfiledInsert:
    con = open_store(root / "profiled.duckdb")
    try:
        for seed in range(3):  # the first two warm up, the third is profiled
            spool = root / f"profiled-{seed}"
            spool_files(spool, FILES, ROWS, NOW - timedelta(days=30), timedelta(seconds=1), seed)
            profiled = ProfiledInsert(con, root / "profile.json")
            ingest_spool(profiled, spool, max_files=FILES)  # type: ignore[arg-type]
        return profiled
    finally:
        con.close()


# --- py-spy ----------------------------------------------------------------------------------


def child(root: Path) -> None:
    """The sampled process: ingest every batch under `root`, oldest first."""
    con = open_store(root / "sampled.duckdb")
    for spool in sorted(p for p in root.iterdir() if p.is_dir()):
        ingest_spool(con, spool, max_files=FILES)
    con.close()


def sample(root: Path, batches: int) -> Path:
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        raise SystemExit("py-spy is missing: pip install -e '.[bench]'")
    batches_dir = root / "batches"
    for seed in range(batches):
        spool = batches_dir / f"{seed:04d}"
        spool_files(spool, FILES, ROWS, NOW - timedelta(days=30), timedelta(seconds=1), 100 + seed)
    raw = root / "py-spy.txt"
    command = [py_spy, "record", "--native", "--threads", "-r", str(RATE_HZ), "-f", "raw"]
    command += ["-o", str(raw), "--", sys.executable, "-m", "bench.ingest_profile"]
    command += ["--child", str(batches_dir)]
    subprocess.run(command, check=True, capture_output=True)
    return raw


@dataclass
class Breakdown:
    batches: int
    main: int  # on-CPU samples of the main thread inside ingest_spool
    workers: int  # on-CPU samples of DuckDB's worker threads (no Python frame)
    by_line: collections.Counter[int]  # main-thread samples by line of ingest.py
    insert_line: int
    insert_kinds: collections.Counter[str]  # the INSERT's samples (and the workers') by kind
    insert_leaves: collections.Counter[str]  # ... by function

    @property
    def insert(self) -> int:
        return self.by_line[self.insert_line] + self.workers


def analyse(raw: Path, batches: int) -> Breakdown:
    source = ingest_module.__file__
    insert_line = next(
        n for n, line in enumerate(Path(source).read_text().splitlines(), 1)
        if "con.execute(_INSERT_ROWS" in line
    )  # fmt: skip
    by_line: collections.Counter[int] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    main = workers = 0
    for sample in raw.read_text().splitlines():
        stack, count = sample.rsplit(" ", 1)
        frames = stack.split(";")[1:]  # the first names the thread
        if not frames:
            continue
        ours = [int(m["line"]) for f in frames if (m := PY_FRAME.match(f))
                and m["file"].endswith("engine/store/ingest.py")]  # fmt: skip
        python = any(PY_FRAME.match(f) for f in frames)
        if python and not ours:
            continue  # start-up: imports, opening the store
        n = int(count)
        if python:
            main += n
            by_line[ours[-1]] += n
            if ours[-1] != insert_line:
                continue
        else:
            workers += n
        leaves[_name(frames[-1])] += n
        kinds[_kind(frames[-1])] += n
    return Breakdown(batches, main, workers, by_line, insert_line, kinds, leaves)


def _name(frame: str) -> str:
    """A native frame's function; an unnamed one by its library ("0x7f… (libc.so.6)")."""
    if frame.startswith("0x"):
        return "unnamed, in " + frame.split(" (", 1)[-1].rstrip(")")
    return frame.split(" (", 1)[0]


def _kind(leaf: str) -> str:
    if PY_FRAME.match(leaf):
        return "Python"
    return next((kind for kind, pattern in KINDS if re.search(pattern, leaf)), "other")


def report(profiled: ProfiledInsert, b: Breakdown) -> str:
    lines = [
        f"DuckDB's profiler, one batch of {FILES} files × {ROWS:,} rows: the INSERT took "
        f"{profiled.seconds * 1000:,.0f} ms; its operators (thread time, summed over threads):",
    ]
    for name, seconds in sorted(profiled.operators.items(), key=lambda kv: -kv[1]):
        if seconds >= 0.0005:
            lines.append(f"  {seconds * 1000:8.1f} ms  {name}")
    total = b.main + b.workers
    lines += [
        "",
        f"py-spy --native at {RATE_HZ} Hz over {b.batches} batches: {total:,} on-CPU samples, "
        f"{b.main:,} of the main thread in ingest_spool, {b.workers:,} of DuckDB's worker "
        "threads. The main thread, by line of engine/store/ingest.py:",
    ]
    source = ingest_module.__file__
    for line, n in b.by_line.most_common(8):
        text = linecache.getline(source, line).strip()
        lines.append(f"  {100 * n / total:5.1f}%  {line:4d}  {text[:80]}")
    lines.append(
        f"The INSERT (line {b.insert_line}) and the worker threads, {100 * b.insert / total:.0f}% "
        "of the samples, by what the function on CPU was doing:"
    )
    for kind, n in b.insert_kinds.most_common():
        lines.append(f"  {100 * n / total:5.1f}%  {kind}")
    lines.append("Its busiest functions:")
    for leaf, n in b.insert_leaves.most_common(15):
        lines.append(f"  {100 * n / total:5.1f}%  {leaf[:110]}")
    return "\n".join(lines)


# --- the levers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Lever:
    files: int
    rows: int  # a file
    row_group: int = ROW_GROUP_SIZE

    @property
    def label(self) -> str:
        return f"{self.files} files × {self.rows:,} rows, row groups of {self.row_group:,}"


# The same 100,000 rows in fewer, larger files; the scheduler's full call (500 files); and
# smaller row groups.
LEVERS = (
    Lever(FILES, ROWS), Lever(10, FILES * ROWS // 10), Lever(1, FILES * ROWS),
    Lever(MAX_FILES, ROWS), Lever(FILES, ROWS, ROW_GROUP_SIZE // 2),
)  # fmt: skip


@dataclass
class Lap:
    wall: float
    cpu: float  # of every thread of the process
    workers: float  # of which DuckDB's worker threads (all but the calling one)


def levers(root: Path, repeat: int = 5) -> dict[Lever, Lap]:
    """The median lap per lever over interleaved runs of the same INSERT into a bare table."""
    tables = {}
    for i, lever in enumerate(LEVERS):
        con = duckdb.connect()
        con.execute(f"ATTACH '{root}/lever-{i}.duckdb' AS s (ROW_GROUP_SIZE {lever.row_group})")
        con.execute("USE s")
        con.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS}, batch_id BIGINT NOT NULL)")
        con.execute("SET preserve_insertion_order = false")  # as ingest.py does
        tables[lever] = con
    insert = (
        f"INSERT INTO attempts ({', '.join(COLUMN_NAMES)}, batch_id) "
        f"SELECT {', '.join(COLUMN_NAMES)}, 0 FROM read_parquet($files)"  # as ingest.py reads
    )
    laps: dict[Lever, list[Lap]] = {lever: [] for lever in LEVERS}
    for r in range(repeat):
        for i, lever in enumerate(LEVERS if r % 2 == 0 else reversed(LEVERS)):
            spool = root / f"lever-{r}-{i}"
            spool_files(spool, lever.files, lever.rows, NOW, timedelta(seconds=1), 900 + r)
            paths = [str(p) for p in sorted(spool.iterdir())]
            con = tables[lever]
            before, started = _thread_cpu(), time.perf_counter()
            con.begin()
            con.execute(insert, {"files": paths})
            con.commit()
            wall, after = time.perf_counter() - started, _thread_cpu()
            main = threading.get_native_id()
            spent = {t: after[t] - before.get(t, 0.0) for t in after}
            laps[lever].append(Lap(wall, sum(spent.values()), sum(spent.values()) - spent[main]))
    for con in tables.values():
        con.close()
    return {
        lever: Lap(*(statistics.median(getattr(lap, f) for lap in done)
                     for f in ("wall", "cpu", "workers")))
        for lever, done in laps.items()
    }  # fmt: skip


def _thread_cpu() -> dict[int, float]:
    """CPU seconds of each thread of this process (utime + stime in /proc/self/task)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            fields = Path(f"/proc/self/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
            found[int(task)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def levers_report(measured: dict[Lever, Lap]) -> str:
    lines = [
        "The levers: the same INSERT into a bare table (medians; CPU of every thread, and the "
        "share of it on DuckDB's worker threads: above 0 %, it appended on both cores):"
    ]
    for lever, lap in measured.items():
        rows = lever.files * lever.rows
        lines.append(
            f"  {rows / lap.wall:10,.0f} rows/s  {1e6 * lap.cpu / rows:5.2f} µs CPU a row "
            f"({lap.workers / lap.cpu:4.0%} on workers)  {lever.label}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_profile", description=__doc__)
    parser.add_argument("--batches", type=int, default=30, help="batches py-spy samples")
    parser.add_argument("--levers", action="store_true", help="only the levers, no profiles")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench-ingest-profile-") as tmp:
        root = Path(tmp)
        if args.levers:
            print(levers_report(levers(root)))
            return
        profiled = duckdb_profile(root)
        breakdown = analyse(sample(root, args.batches), args.batches)
        print(report(profiled, breakdown), flush=True)
        print("\n" + levers_report(levers(root)))


if __name__ == "__main__":
    main()
