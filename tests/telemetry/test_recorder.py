"""The recorder spools every attempt in complete Parquet files, never failing a request."""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.sample_attempt import STARTED, make_attempt

from engine.core.attempt import Attempt
from engine.core.clock import SystemClock, VirtualClock
from engine.telemetry.columns import ARROW_SCHEMA, HOST
from engine.telemetry.pacing import FlushPacing
from engine.telemetry.recorder import FILE_ROWS, Recorder

REPO = Path(__file__).resolve().parents[2]


class FixedPricer:
    def __init__(self, cost: str = "0.012345678") -> None:
        self.cost = Decimal(cost)

    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]:
        return self.cost, "genai-prices"


class PricerFailingFor:
    def __init__(self, model: str) -> None:
        self.model = model

    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]:
        if attempt.model == self.model:
            raise KeyError(attempt.model)
        return Decimal("0.5"), "genai-prices"


class WriteSignallingClock(SystemClock):
    """Real time that signals each successful write (the recorder stamps `last_flush_at`)."""

    def __init__(self) -> None:
        self.wrote = threading.Event()

    def wall(self) -> datetime:
        self.wrote.set()
        return super().wall()


@pytest.fixture
def open_recorders() -> Iterator[list[Recorder]]:
    made: list[Recorder] = []
    yield made
    for recorder in made:
        recorder.close()


@pytest.fixture
def recorder_at(open_recorders: list[Recorder]):
    def make(spool: Path, **options: Any) -> Recorder:
        options.setdefault("flush_interval_s", 3600)  # flush() drives the writes, not the timer
        recorder = Recorder(spool, **options)
        open_recorders.append(recorder)
        return recorder

    return make


def spool_files(spool: Path) -> list[Path]:
    return sorted(p for p in spool.iterdir() if p.suffix == ".parquet" and p.name[0] != ".")


def spooled_ids(spool: Path) -> list[str]:
    if not spool.exists() or not spool_files(spool):
        return []
    rows = duckdb.sql(f"SELECT request_id FROM read_parquet('{spool}/*.parquet')").fetchall()
    return sorted(r[0] for r in rows)


# --- what is written ---------------------------------------------------------------------


def test_attempts_are_spooled_with_the_row_schema_and_their_values(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path / "spool", pricer=FixedPricer())
    recorder(make_attempt(0))
    recorder(make_attempt(1, served=False, decision="fall_back", http_status=529))

    assert recorder.flush() == 2

    (file,) = spool_files(tmp_path / "spool")
    table = pq.read_table(file)
    assert table.schema.remove_metadata() == ARROW_SCHEMA
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    rows = duckdb.sql(
        f"SELECT request_id, cost_usd, price_source, started_at, served, http_status, host "
        f"FROM read_parquet('{file}') ORDER BY request_id"
    ).fetchall()
    assert rows[0][:3] == ("req-000000", Decimal("0.012345678"), "genai-prices")
    assert rows[0][3] == STARTED  # microseconds and the UTC instant survive
    assert rows[1][4:6] == (False, 529)
    assert rows[0][6] == HOST


def test_file_names_are_unique_and_ordered_across_recorders(tmp_path, recorder_at):
    spool = tmp_path / "spool"
    first, second = recorder_at(spool), recorder_at(spool)
    written = []
    for n in range(4):
        recorder = first if n % 2 else second
        recorder(make_attempt(n))
        recorder.flush()
        written.append(f"req-{n:06d}")

    files = spool_files(spool)
    assert len(files) == 4
    pattern = re.compile(rf"{re.escape(HOST)}-{os.getpid()}-\d{{13}}-\d{{8}}\.parquet")
    assert all(pattern.fullmatch(f.name) for f in files)
    assert [pq.read_table(f)["request_id"][0].as_py() for f in files] == written


def test_without_a_pricer_cost_and_price_source_are_null(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path)
    recorder(make_attempt())
    recorder.flush()

    row = pq.read_table(spool_files(tmp_path)[0]).to_pylist()[0]
    assert (row["cost_usd"], row["price_source"]) == (None, None)


def test_flush_with_nothing_buffered_writes_no_file(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path)
    assert recorder.flush() == 0
    assert list(tmp_path.iterdir()) == []


# --- when it is written ------------------------------------------------------------------


def test_reaching_flush_rows_writes_without_waiting_for_the_interval(tmp_path, recorder_at):
    clock = WriteSignallingClock()
    recorder = recorder_at(tmp_path, flush_rows=5, flush_interval_s=3600, clock=clock)
    for n in range(5):
        recorder(make_attempt(n))

    assert clock.wrote.wait(timeout=10)
    assert recorder.stats().written == 5


def test_the_interval_writes_a_partial_buffer(tmp_path, recorder_at):
    clock = WriteSignallingClock()
    recorder = recorder_at(tmp_path, flush_rows=1000, flush_interval_s=0.02, clock=clock)
    recorder(make_attempt())

    assert clock.wrote.wait(timeout=10)
    assert spooled_ids(tmp_path) == ["req-000000"]


def test_hooks_called_from_many_threads_lose_nothing(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path, flush_rows=300, flush_interval_s=0.01)

    def record(offset: int) -> None:
        for n in range(offset, offset + 3000):
            recorder(make_attempt(n))

    threads = [threading.Thread(target=record, args=(k * 3000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorder.close()

    assert spooled_ids(tmp_path) == [f"req-{n:06d}" for n in range(12_000)]
    assert recorder.stats().dropped == 0


def test_a_file_appears_under_its_final_name_only_once_complete(tmp_path, recorder_at, monkeypatch):
    """While pyarrow is still writing, only the dot-prefixed temporary name exists."""
    writing, release = threading.Event(), threading.Event()
    real_write = pq.write_table

    def slow_write(table: pa.Table, where: Any, **kwargs: Any) -> None:
        real_write(table, where, **kwargs)
        writing.set()
        release.wait(timeout=10)

    recorder = recorder_at(tmp_path)
    monkeypatch.setattr(pq, "write_table", slow_write)
    recorder(make_attempt())
    flusher = threading.Thread(target=recorder.flush)
    flusher.start()

    assert writing.wait(timeout=10)
    names = [p.name for p in tmp_path.iterdir()]
    release.set()
    flusher.join()
    assert len(names) == 1
    assert names[0].startswith(".") and names[0].endswith(".tmp")
    assert [p.name for p in tmp_path.iterdir()] == [spool_files(tmp_path)[0].name]


def test_the_hook_does_not_wait_for_a_write_in_progress(tmp_path, recorder_at, monkeypatch):
    writing, release = threading.Event(), threading.Event()
    real_write = pq.write_table

    def stuck_write(table: pa.Table, where: Any, **kwargs: Any) -> None:
        writing.set()
        release.wait(timeout=10)
        real_write(table, where, **kwargs)

    recorder = recorder_at(tmp_path)
    monkeypatch.setattr(pq, "write_table", stuck_write)
    recorder(make_attempt(0))
    flusher = threading.Thread(target=recorder.flush)
    flusher.start()
    assert writing.wait(timeout=10)

    for n in range(1, 1001):
        recorder(make_attempt(n))  # returns although the writer is stuck
    assert recorder.stats().buffered == 1001
    release.set()
    flusher.join()
    recorder.flush()

    assert len(spooled_ids(tmp_path)) == 1001


def test_close_writes_everything_and_can_be_called_twice(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path)
    for n in range(3):
        recorder(make_attempt(n))

    recorder.close()
    recorder.close()

    assert len(spooled_ids(tmp_path)) == 3
    assert recorder.stats().buffered == 0


# --- how large the files are: FlushPacing, on a virtual clock ---------------------------------

INTERVAL_S, MIN_ROWS = 1.0, 1_000
TICK_S = 0.001
WRITE_S, ROW_S = 0.002, 11e-6  # a flush: ~2 ms a file and ~11 µs a row (docs/benchmarks.md)


@dataclass(frozen=True)
class Written:
    rows: int
    age_s: float  # from the recording of its oldest attempt to the end of its write


def paced_files(phases: list[tuple[float, float]]) -> list[Written]:
    """Attempts arriving at `rate`/s for `seconds`, phase after phase, and a flusher that does
    what Recorder._run does: sleep until the pacing's due time or until its threshold of rows
    waits, then write everything waiting, in files of at most FILE_ROWS, taking virtual time."""
    clock = VirtualClock()
    pacing = FlushPacing(INTERVAL_S, MIN_ROWS, FILE_ROWS, clock.now())
    arrivals = [rate * TICK_S for rate, seconds in phases for _ in range(round(seconds / TICK_S))]
    files: list[Written] = []
    buffered, oldest = 0, 0.0  # attempts waiting, and when the first of them was recorded
    writing: tuple[float, float, int] | None = None  # (began, ends, rows)
    tick, owed = 0, 0.0
    while tick < len(arrivals) or buffered or writing:
        now = clock.now()
        if tick < len(arrivals):
            owed += arrivals[tick]
            arrived = round(owed) if tick == len(arrivals) - 1 else int(owed)  # all, at the end
            if arrived and not buffered:
                oldest = now
            buffered, owed = buffered + arrived, owed - arrived
        if writing and now >= writing[1]:
            pacing.wrote(*writing)
            writing = None
        if not writing and buffered and (now >= pacing.due() or buffered >= pacing.threshold):
            ends = now + WRITE_S * -(-buffered // FILE_ROWS) + ROW_S * buffered
            for start in range(0, buffered, FILE_ROWS):
                files.append(Written(min(FILE_ROWS, buffered - start), ends - oldest))
            writing, buffered = (now, ends, buffered), 0
        elif not writing and now >= pacing.due():
            pacing.wrote(now, now, 0)  # an idle cycle: nothing waiting
        clock.advance(TICK_S)
        tick += 1
    return files


@pytest.mark.parametrize(
    ("rate", "low", "high"),
    [
        (200, 180, 200),  # below flush_rows a second: a file a second, as before
        (1_000, 900, 1_000),
        (5_000, 4_000, 5_000),  # busy: about a second of traffic, not five 1,000-row files
        (20_000, FILE_ROWS, FILE_ROWS),  # beyond FILE_ROWS a second: files of FILE_ROWS
    ],
)
def test_files_hold_about_an_interval_of_traffic_up_to_file_rows(rate, low, high):
    files = paced_files([(rate, 10.0)])
    steady = sorted(f.rows for f in files[len(files) // 2 :])
    assert low <= steady[len(steady) // 2] <= high


@pytest.mark.parametrize("rate", [50, 1_000, 5_000, 20_000, 60_000])
def test_every_attempt_is_written_within_the_interval_at_any_steady_rate(rate):
    files = paced_files([(rate, 6.0)])
    assert sum(f.rows for f in files) == round(rate * 6.0)
    assert max(f.age_s for f in files) <= INTERVAL_S


def test_a_burst_wakes_the_flusher_early_and_keeps_the_deadline():
    """Traffic ten times higher all at once: the files double over a few writes instead of
    waiting for the interval, and no attempt waits longer than the interval meanwhile."""
    files = paced_files([(1_000, 4.0), (10_000, 4.0)])
    assert max(f.age_s for f in files) <= INTERVAL_S
    grown = [f.rows for f in files]
    assert all(b <= 2 * a + 10 for a, b in itertools.pairwise(grown))  # + a tick's arrivals
    assert grown[-2] >= 8_000


def test_files_shrink_back_when_traffic_falls():
    files = paced_files([(10_000, 4.0), (100, 4.0)])
    assert all(95 <= f.rows <= 100 for f in files[-4:-1])  # the last: what the end left
    assert max(f.age_s for f in files) <= INTERVAL_S


def test_a_recorder_that_has_seen_no_traffic_writes_at_flush_rows():
    assert paced_files([(10_000, 1.0)])[0].rows == MIN_ROWS


# --- process exit --------------------------------------------------------------------------

RECORD_THEN_WAIT = """
    import sys
    from pathlib import Path
    from engine.telemetry.recorder import Recorder
    from helpers.sample_attempt import make_attempt

    recorder = Recorder(Path(sys.argv[1]), flush_interval_s=3600, flush_rows=10**6)
    for n in range(int(sys.argv[2])):
        recorder(make_attempt(n))
    print("recorded", flush=True)
    if sys.argv[3] == "wait":
        sys.stdin.read()  # until SIGTERM
"""


def start_recording_process(spool: Path, n: int, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RECORD_THEN_WAIT), str(spool), str(n), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def test_sigterm_leaves_every_recorded_attempt_in_the_spool(tmp_path):
    process = start_recording_process(tmp_path, 2500, "wait")
    assert process.stdout.readline().strip() == "recorded"

    process.send_signal(signal.SIGTERM)

    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert len(spooled_ids(tmp_path)) == 2500


def test_a_normal_exit_leaves_every_recorded_attempt_in_the_spool(tmp_path):
    process = start_recording_process(tmp_path, 2500, "exit")
    process.communicate(timeout=30)

    assert process.returncode == 0
    assert len(spooled_ids(tmp_path)) == 2500


def test_an_application_sigterm_handler_is_never_replaced(tmp_path):
    script = """
        import signal, sys
        from pathlib import Path
        from engine.telemetry.recorder import Recorder

        def mine(signum, frame):
            pass

        signal.signal(signal.SIGTERM, mine)
        Recorder(Path(sys.argv[1])).close()
        print(signal.getsignal(signal.SIGTERM) is mine)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
        check=True,
    )
    assert result.stdout.strip() == "True"


# --- failure -------------------------------------------------------------------------------


def blocked_spool(tmp_path: Path) -> Path:
    """A spool folder that cannot be created even as root: its parent is a regular file."""
    (tmp_path / "disk").write_text("not a directory")
    return tmp_path / "disk" / "spool"


def unblock(tmp_path: Path) -> None:
    (tmp_path / "disk").unlink()


def test_an_unwritable_spool_keeps_the_newest_attempts_within_the_bound(tmp_path, recorder_at):
    spool = blocked_spool(tmp_path)
    recorder = recorder_at(spool, max_buffered=50, flush_rows=1000)
    for n in range(120):
        recorder(make_attempt(n))  # never raises

    assert recorder.flush() == 0
    stats = recorder.stats()
    assert (stats.buffered, stats.dropped, stats.written) == (50, 70, 0)
    assert stats.failed_flushes == 1
    assert stats.last_error is not None and "NotADirectoryError" in stats.last_error

    unblock(tmp_path)
    assert recorder.flush() == 50
    assert spooled_ids(spool) == [f"req-{n:06d}" for n in range(70, 120)]
    assert list(spool.iterdir()) == spool_files(spool)  # no temporary file left behind


def test_the_flusher_retries_a_failed_write_on_its_next_cycle(tmp_path, recorder_at):
    spool = blocked_spool(tmp_path)
    clock = WriteSignallingClock()
    recorder = recorder_at(spool, flush_interval_s=0.02, clock=clock)
    recorder(make_attempt())
    recorder.flush()
    assert recorder.stats().failed_flushes >= 1

    unblock(tmp_path)

    assert clock.wrote.wait(timeout=10)
    assert spooled_ids(spool) == ["req-000000"]
    assert recorder.stats().last_error is not None  # the last error stays for the operator


def test_write_failures_warn_at_most_once_a_minute(tmp_path, recorder_at, caplog):
    clock = VirtualClock()
    recorder = recorder_at(blocked_spool(tmp_path), clock=clock)
    recorder(make_attempt())
    caplog.set_level(logging.WARNING, logger="switchover.recorder")

    for _ in range(3):
        recorder.flush()
        clock.advance(20)
    assert len(caplog.records) == 1
    clock.advance(1)
    recorder.flush()

    assert len(caplog.records) == 2
    assert recorder.stats().failed_flushes == 4
    assert "kept for retry" in caplog.records[0].getMessage()


def test_a_pricer_that_raises_leaves_cost_null_and_keeps_the_attempt(tmp_path, recorder_at, caplog):
    recorder = recorder_at(tmp_path, pricer=PricerFailingFor("mystery-model"))
    for n in range(3):
        recorder(make_attempt(n, model="mystery-model"))
    recorder(make_attempt(3))

    assert recorder.flush() == 4

    rows = {r["request_id"]: r for r in pq.read_table(spool_files(tmp_path)[0]).to_pylist()}
    assert rows["req-000000"]["cost_usd"] is None
    assert rows["req-000000"]["price_source"] is None
    assert rows["req-000003"]["cost_usd"] == Decimal("0.5")
    pricing_warnings = [r for r in caplog.records if "pricing" in r.getMessage()]
    assert len(pricing_warnings) == 1


def test_an_attempt_arrow_rejects_is_dropped_instead_of_blocking_the_spool(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path)
    recorder(make_attempt(0))
    recorder(make_attempt(1, attempt_number=70_000))  # beyond SMALLINT
    recorder(make_attempt(2))

    assert recorder.flush() == 2
    assert spooled_ids(tmp_path) == ["req-000000", "req-000002"]
    assert recorder.stats().dropped == 1
    assert recorder.stats().buffered == 0


# --- the one price of an attempt, told to listeners ------------------------------------------


def test_listeners_hear_each_written_attempt_once_with_the_price_that_was_stored(
    tmp_path, recorder_at
):
    spool = blocked_spool(tmp_path)
    recorder = recorder_at(spool, pricer=PricerFailingFor("mystery-model"))
    heard: list[tuple[str, Decimal | None]] = []
    recorder.on_priced(lambda attempt, cost: heard.append((attempt.request_id, cost)))
    recorder(make_attempt(0))
    recorder(make_attempt(1, model="mystery-model"))
    recorder.flush()
    assert recorder.stats().failed_flushes >= 1 and heard == [], "nothing written, nothing told"

    unblock(tmp_path)
    recorder.flush()
    recorder.flush()

    assert heard == [("req-000000", Decimal("0.5")), ("req-000001", None)]
    rows = {
        r["request_id"]: r["cost_usd"] for r in pq.read_table(spool_files(spool)[0]).to_pylist()
    }
    assert rows == {"req-000000": Decimal("0.5"), "req-000001": None}


def test_a_listener_that_raises_costs_the_spool_nothing(tmp_path, recorder_at):
    recorder = recorder_at(tmp_path, pricer=FixedPricer())

    def broken(attempt: Attempt, cost: Decimal | None) -> None:
        raise RuntimeError("metrics backend gone")

    recorder.on_priced(broken)
    recorder(make_attempt(0))
    assert recorder.flush() == 1
    assert spooled_ids(tmp_path) == ["req-000000"]
