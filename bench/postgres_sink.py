"""`python -m bench.postgres_sink [--quick]`: PostgreSQL as the attempt sink of a fleet of
gateway hosts, measured against a real server: what each host's sink sends, what the server
spends per row, and what the one scheduler pulls.

Starts a throwaway PostgreSQL cluster in a temporary folder on a free port, durable as a
production sink runs (fsync and synchronous_commit on; as root the server runs as the
`postgres` user), and measures:

1. **Writers.** W separate processes, each one gateway host's `PostgresSink` (engine/store/
   postgres.py) called the way the recorder's flusher calls it: `write(table)` of B-row Arrow
   batches, every row a new request id, back to back for S seconds. W = 1, 2 and 4 at the
   recorder's 1,000-row batch, and 2 at 10,000 rows (the batch of a busy recorder), in
   interleaved rounds. Per phase: rows/s in total and per writer, the writers' CPU per row
   (`process_time` in each writer: the gateway host's cost) and the server's (every postgres
   process, from /proc: the database host's cost).
2. **The pull.** `PostgresSource.pull` into a scheduler's store (`open_store`), 50,000 rows a
   call as the scheduler takes them: first the backlog the writers left (catching up after a
   pause), then one cycle's new rows at the fleet's rate (5 s of 10,000 requests/s, written
   with nothing else running): rows/s, and the scheduler's and the server's CPU per row.
3. **Sustained.** Two writers at full speed while the scheduler pulls every second: whether
   the pull keeps up, and the rows still waiting at the end.
4. **Bytes.** WAL and table-plus-index bytes per row.

Everything shares this machine's CPUs (the writers, the server, the puller and whatever else
runs): the rates are what one small box carries, and the CPU per row is what scales out, so
the table ends with the fleet on paper from those per-row costs (docs/deployment.md, "A fleet").
Prints the table; writes nothing outside its temporary folder. Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.compute as pc

from bench import cputime, report
from bench.fake_process import free_port
from bench.stats import Figure
from bench.store import NOW, synthetic
from engine.store import open_store
from engine.store.ingest import LEDGER_KEEP
from engine.store.postgres_pull import PULL_ROWS, PostgresSource
from engine.telemetry.postgres_sink import TABLE, PostgresSink

START_TIMEOUT_S = 30
FLEET_REQUESTS = 10_000  # requests/s: the fleet the issue asks about
# Attempts per request: one, plus a retry or a fallback for the requests whose first attempt
# failed (5 % in bench.scheduler's traffic, near what the demo's outages produce).
ATTEMPTS_PER_REQUEST = 1.05
CYCLE_ROWS = round(FLEET_REQUESTS * ATTEMPTS_PER_REQUEST * 5)  # one 5 s scheduler cycle's


@dataclass(frozen=True)
class Sizes:
    # (writers, rows per batch) of each write phase
    phases: tuple[tuple[int, int], ...] = ((1, 1_000), (2, 1_000), (4, 1_000), (2, 10_000))
    seconds: float = 10.0  # each write phase
    rounds: int = 2  # of every phase, interleaved
    sustained_s: float = 20.0


QUICK = Sizes(phases=((1, 1_000), (2, 1_000)), seconds=3.0, rounds=1, sustained_s=4.0)


# --- the server -------------------------------------------------------------------------------


class Cluster:
    """A throwaway PostgreSQL cluster: `with Cluster() as pg:` serves `pg.url`, in a temporary
    folder of its own (owned by the server's user) deleted at the end."""

    def __init__(self) -> None:
        self.data = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.user: str | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Cluster:
        initdb, postgres = _binary("initdb"), _binary("postgres")
        if os.geteuid() == 0:  # initdb refuses to run as root
            self.user = "postgres"
            entry = pwd.getpwnam(self.user)
            os.chown(self.data, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            [initdb, "-D", str(self.data / "cluster"), "-A", "trust", "-U", "postgres",
             "-E", "UTF8", "--locale", "C"],
            check=True, capture_output=True, user=self.user, group=self.user,
        )  # fmt: skip
        self.process = subprocess.Popen(
            [postgres, "-D", str(self.data / "cluster"), "-p", str(self.port), "-k", str(self.data),
             "-c", "listen_addresses=127.0.0.1", "-c", "max_wal_size=4GB"],
            stdout=subprocess.DEVNULL, stderr=open(self.data / "server.log", "ab"),
            user=self.user, group=self.user,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                return self
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.data / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"postgres did not start:\n{log}") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(2)  # SIGINT: fast shutdown
            self.process.wait(timeout=60)
        shutil.rmtree(self.data, ignore_errors=True)

    def cpu_s(self) -> float:
        """CPU seconds every server process has used so far: the postmaster with the children
        it has reaped (backends of closed connections), and its live children (backends, WAL
        writer, checkpointer)."""
        assert self.process is not None
        return _from_proc(cputime.tree_cpu_s(self.process.pid, reaped=True))

    def query(self, sql: str) -> tuple:
        with psycopg.connect(self.url, autocommit=True) as con:
            return con.execute(sql).fetchone()


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise SystemExit(
            f"{name} is missing: install PostgreSQL (Debian: apt-get install postgresql)"
        )
    return str(found)


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy."""
    return _from_proc(cputime.machine_busy_s())


def _from_proc(seconds: float | None) -> float:
    if seconds is None:
        raise SystemExit("the PostgreSQL bench reads CPU time from /proc: Linux only")
    return seconds


# --- one writer (a gateway host), in its own process ---------------------------------------------


def writer(url: str, batch: int, seconds: float, tag: str) -> None:
    """Print `ready`, wait for a line on stdin, then write `batch`-row tables through one
    PostgresSink for `seconds`; print what was written as JSON."""
    base = synthetic(batch, NOW, timedelta(seconds=1), seed=zlib.crc32(tag.encode()))
    ids = base.column("request_id")
    sink = PostgresSink(url)
    sink.write(_renamed(base, ids, f"{tag}-warm"))  # connected, staging table made
    print("ready", flush=True)
    sys.stdin.readline()
    rows = writes = 0
    started, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        rows += sink.write(_renamed(base, ids, f"{tag}-{writes}"))
        writes += 1
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    sink.close()
    print(json.dumps({"rows": rows, "writes": writes, "seconds": wall, "cpu_s": cpu}), flush=True)


def _renamed(table: pa.Table, ids: pa.ChunkedArray, suffix: str) -> pa.Table:
    """The same rows under new request ids: each write stores every row (none conflicts)."""
    fresh = pc.binary_join_element_wise(ids, f"-{suffix}", "")
    return table.set_column(0, table.field(0), fresh)


@contextlib.contextmanager
def writers(url: str, count: int, batch: int, seconds: float, tag: str) -> Iterator[list[dict]]:
    """Start `count` writer processes, let them go at once when the block begins, and fill the
    yielded list with their results when it ends (after they finish)."""
    command = [sys.executable, "-m", "bench.postgres_sink", "--writer", url, str(batch)]
    procs = [
        subprocess.Popen(
            [*command, str(seconds), f"{tag}w{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    results: list[dict] = []
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdin is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a writer failed to start")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        yield results
        for proc in procs:
            out, _ = proc.communicate(timeout=seconds + 120)
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# --- the phases ---------------------------------------------------------------------------------


@dataclass
class Written:
    rows: int
    seconds: float  # the phase's wall time: first start to last end
    writer_cpu_s: float
    server_cpu_s: float
    busy_s: float  # the whole machine's busy CPU seconds meanwhile

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def write_phase(pg: Cluster, count: int, batch: int, seconds: float, tag: str) -> Written:
    with writers(pg.url, count, batch, seconds, tag) as results:
        server, busy = pg.cpu_s(), machine_busy_s()  # the writers have just been told to go
    return _written(pg, results, server, busy)


def _written(pg: Cluster, results: list[dict], server: float, busy: float) -> Written:
    return Written(
        sum(r["rows"] for r in results), max(r["seconds"] for r in results),
        sum(r["cpu_s"] for r in results), pg.cpu_s() - server, machine_busy_s() - busy,
    )  # fmt: skip


@dataclass
class Pulled:
    rows: int
    seconds: float
    cpu_s: float  # the scheduler's
    server_cpu_s: float
    first_s: float  # the first call, at the whole backlog

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def __add__(self, other: Pulled) -> Pulled:
        return Pulled(self.rows + other.rows, self.seconds + other.seconds,
                      self.cpu_s + other.cpu_s, self.server_cpu_s + other.server_cpu_s,
                      max(self.first_s, other.first_s))  # fmt: skip


def drain(pg: Cluster, source: PostgresSource, con: duckdb.DuckDBPyConnection) -> Pulled:
    """Pull until PostgreSQL has nothing new, as a scheduler cycle does."""
    rows, first, server = 0, None, pg.cpu_s()
    started, cpu = time.perf_counter(), time.process_time()
    while True:
        pulled = source.pull(con)
        rows += pulled.rows
        first = first or time.perf_counter() - started
        if not pulled.more:
            break
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return Pulled(rows, seconds, cpu, pg.cpu_s() - server, first)


def cycle_pull(
    pg: Cluster, source: PostgresSource, con: duckdb.DuckDBPyConnection, rows: int
) -> Pulled:
    """One cycle's pull in the steady state: the `rows` a fleet sends in a cycle, written with
    nothing else running, then pulled; what a row costs the scheduler and the server then."""
    base = synthetic(1_000, NOW, timedelta(seconds=1), seed=7)
    ids = base.column("request_id")
    sink = PostgresSink(pg.url)
    for k in range(-(-rows // 1_000)):
        sink.write(_renamed(base, ids, f"cycle-{k}"))
    sink.close()
    return drain(pg, source, con)


@dataclass
class Sustained:
    written: Written
    pulled: Pulled
    waiting: int  # rows written but not yet pulled when the writers stopped


def sustained(
    pg: Cluster, source: PostgresSource, con: duckdb.DuckDBPyConnection, seconds: float
) -> Sustained:
    """Two writers at full speed while the scheduler pulls, once a second: whether one pulling
    process keeps up with them (the scheduler's own cycle is 5 s)."""
    pulled = Pulled(0, 0.0, 0.0, 0.0, 0.0)
    with writers(pg.url, 2, 1_000, seconds, "sustained") as results:
        server, busy, started = pg.cpu_s(), machine_busy_s(), time.perf_counter()
        while time.perf_counter() - started < seconds:
            tick = time.perf_counter()
            pulled += drain(pg, source, con)
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    written = _written(pg, results, server, busy)
    (total,) = pg.query(f"SELECT count(*) FROM {TABLE}")
    (ingested,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    return Sustained(written, pulled, total - ingested)


# --- the run ------------------------------------------------------------------------------------


@dataclass
class Result:
    phases: dict[tuple[int, int], list[Written]]
    drained: Pulled  # everything the write phases left: a backlog
    cycle: Pulled  # a cycle's worth at the fleet's rate
    sustained: Sustained
    wal_bytes_per_row: float
    stored_bytes_per_row: float  # the table with its indexes
    index_bytes_per_row: dict[str, float]  # of that, each index's


def measure(sizes: Sizes) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-postgres-") as tmp, Cluster() as pg:
        root = Path(tmp)
        PostgresSink(pg.url).close()  # no table yet: the first write makes it
        (wal_start,) = pg.query("SELECT pg_current_wal_lsn()::text")
        phases: dict[tuple[int, int], list[Written]] = {p: [] for p in sizes.phases}
        for r in range(sizes.rounds):
            order = sizes.phases if r % 2 == 0 else tuple(reversed(sizes.phases))
            for count, batch in order:
                tag = f"r{r}-{count}x{batch}"
                phases[(count, batch)].append(write_phase(pg, count, batch, sizes.seconds, tag))
        wal, rows, stored = pg.query(
            f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{wal_start}'), count(*), "
            f"pg_total_relation_size('{TABLE}') FROM {TABLE}"
        )
        (indexes,) = pg.query(_INDEX_SIZES)
        con = open_store(root / "switchover.duckdb")
        source = PostgresSource(pg.url)
        drained = drain(pg, source, con)
        cycle = cycle_pull(pg, source, con, CYCLE_ROWS)
        kept = sustained(pg, source, con, sizes.sustained_s)
        source.close()
        con.close()
    index_bytes = {name: size / rows for name, size in indexes.items()}
    return Result(
        phases, drained, cycle, kept, float(wal) / rows, float(stored) / rows, index_bytes
    )


_INDEX_SIZES = f"""
    SELECT json_object_agg(i.indexrelid::regclass::text, pg_relation_size(i.indexrelid))
    FROM pg_index i WHERE i.indrelid = '{TABLE}'::regclass
"""


def figures(result: Result) -> list[Figure]:
    out: list[Figure] = []
    for (count, batch), runs in result.phases.items():
        rate = statistics.median(w.rate for w in runs)
        each = ", ".join(f"{w.rate / 1000:,.1f} k" for w in runs)
        shown = f"{rate:,.0f} rows/s ({rate / count:,.0f} per writer; runs {each})"
        label = f"COPY: {count} writer{'s' * (count > 1)} × {batch:,}-row batches"
        busy = statistics.median(w.busy_s / w.seconds for w in runs)
        out += [
            Figure(label, rate, "rows/s", shown=shown),
            _per_row("writers' CPU (the gateway hosts')", [(w.writer_cpu_s, w.rows) for w in runs]),
            _per_row("server's CPU (the database host)", [(w.server_cpu_s, w.rows) for w in runs]),
            Figure("the machine's CPUs busy meanwhile", busy, "CPUs", level=1,
                   shown=f"{busy:.2f} of {os.cpu_count()}"),
        ]  # fmt: skip
    d, c, s = result.drained, result.cycle, result.sustained
    pulled = s.pulled.rows / s.written.seconds
    out += [
        Figure(f"pull into DuckDB, a cycle's {c.rows:,} rows (5 s of the fleet below)", c.rate,
               "rows/s", shown=f"{c.rate:,.0f} rows/s"),
        _per_row("the scheduler's CPU", [(c.cpu_s, c.rows)]),
        _per_row("the server's CPU", [(c.server_cpu_s, c.rows)]),
        Figure(f"pull into DuckDB, a backlog of {d.rows:,} rows", d.rate, "rows/s",
               shown=f"{d.rate:,.0f} rows/s"),
        _per_row("the scheduler's CPU", [(d.cpu_s, d.rows)]),
        _per_row("the server's CPU", [(d.server_cpu_s, d.rows)]),
        Figure(f"its first call ({PULL_ROWS:,} rows)", d.first_s, "s", level=1,
               shown=f"{d.first_s:,.2f} s"),
        Figure("sustained: 2 writers × 1,000-row batches, pulled every second", s.written.rate,
               "rows/s", shown=f"{s.written.rate:,.0f} rows/s written"),
        Figure("pulled meanwhile", pulled, "rows/s", level=1,
               shown=f"{pulled:,.0f} rows/s, {s.waiting:,} rows waiting at the end"),
        _bytes("WAL per row", result.wal_bytes_per_row),
        _bytes("table and indexes per row", result.stored_bytes_per_row),
        *(_bytes(f"of which the index {name}", size, level=1)
          for name, size in result.index_bytes_per_row.items()),
    ]  # fmt: skip
    return out


def _per_row(label: str, spent: list[tuple[float, int]]) -> Figure:
    """The median of (CPU seconds, rows) pairs, in µs a row, as a part of the figure above."""
    us = statistics.median(1e6 * seconds / rows for seconds, rows in spent)
    return Figure(label, us, "µs/row", level=1, shown=f"{us:,.1f} µs a row")


def _bytes(label: str, size: float, level: int = 0) -> Figure:
    return Figure(label, size, "B", level=level, shown=f"{size:,.0f} B")


def fleet(result: Result, requests: float = FLEET_REQUESTS) -> list[str]:
    """The fleet on paper: what `requests`/s cost each part, from the per-row costs above."""
    attempts = requests * ATTEMPTS_PER_REQUEST
    runs = [w for (_, batch), done in result.phases.items() if batch == 1_000 for w in done]
    server_us = statistics.median(1e6 * w.server_cpu_s / w.rows for w in runs)
    writer_us = statistics.median(1e6 * w.writer_cpu_s / w.rows for w in runs)
    c = result.cycle
    pull_us, pull_server_us = 1e6 * c.cpu_s / c.rows, 1e6 * c.server_cpu_s / c.rows
    kept = attempts * 86_400 * LEDGER_KEEP.days  # rows PostgreSQL holds after their pull
    return [
        f"A fleet of {requests:,.0f} requests/s ≈ {attempts:,.0f} attempts/s "
        f"({ATTEMPTS_PER_REQUEST:g} attempts a request), {attempts * 86_400 / 1e9:,.2f} B a day:",
        f"- PostgreSQL: {attempts * (server_us + pull_server_us) / 1e6:,.2f} CPUs "
        f"({server_us:,.1f} µs a row written, {pull_server_us:,.1f} pulled); "
        f"WAL {attempts * result.wal_bytes_per_row / 1e6:,.1f} MB/s; {LEDGER_KEEP.days} days of "
        f"rows kept after their pull: {kept / 1e9:,.1f} B rows, "
        f"{kept * result.stored_bytes_per_row / 1e12:,.1f} TB with their indexes",
        f"- the gateway hosts' sinks: {attempts * writer_us / 1e6:,.2f} CPUs in all "
        f"({writer_us:,.1f} µs an attempt)",
        f"- the scheduler's pull: {attempts * pull_us / 1e6:,.2f} CPUs ({pull_us:,.1f} µs a row; "
        f"one process, so at most {1e6 / pull_us:,.0f} attempts/s with nothing else to do)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.postgres_sink", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two short phases, one round")
    parser.add_argument("--writer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        url, batch, seconds, tag = args.writer
        writer(url, int(batch), float(seconds), tag)
        return
    began = time.monotonic()
    load = os.getloadavg()
    result = measure(QUICK if args.quick else Sizes())
    print(report.figures_table(figures(result)))
    print()
    print("\n".join(fleet(result)))
    print(f"\n(ran in {time.monotonic() - began:.0f} s; load average at the start "
          f"{load[0]:.2f}, at the end {os.getloadavg()[0]:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
