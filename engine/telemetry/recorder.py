"""The recorder: the attempt hook that makes attempts durable without slowing or failing a request.

    hook (any thread, O(1)) ──► deque ──► flusher thread: price, Arrow table, Parquet file
                          spool_dir/.<name>…tmp ──fsync, rename──► spool_dir/<name>.parquet

The scheduler ingests `*.parquet` files whose name does not start with "." and deletes them, so
a file appears under its final name only once it is complete and fsynced (engine.telemetry.spool
names and writes it; the folder is fsynced once a cycle).

Files grow with traffic (engine.telemetry.pacing.FlushPacing): a quiet recorder writes what
arrived each `flush_interval_s`, or at `flush_rows` rows; a busy one writes about an interval of
traffic a file (up to `FILE_ROWS`). Every attempt is still in the spool within
`flush_interval_s` of its recording (while the spool is writable).

It must never raise into the chain, do I/O or pricing on the caller's thread, or grow without
bound. When the spool cannot be written (disk full, folder unwritable or gone), the attempts stay
buffered and are retried every interval; beyond `max_buffered` the oldest are dropped and
counted. Failures are logged at most once a minute, counted in `stats()` (/metrics, /v1/status)
and told to the scheduler in a status file (engine.telemetry.status), so that losses alert.

Exit: `close()` stops the flusher and writes everything; it runs from `atexit` too. SIGINT
already becomes KeyboardInterrupt, so atexit runs. For SIGTERM, when the process still has the
default handler (which kills it without atexit) and the recorder is created on the main thread,
a handler raising SystemExit(143) is installed so that atexit runs. An application's own handler
is never replaced: uvicorn installs one and exits cleanly, so atexit runs there too. SIGKILL, a
crash or power loss lose what is buffered (at most `flush_interval_s` of attempts). What
`close()` cannot write is counted as dropped (`lost_at_exit`) and its status file says so.

A Recorder belongs to the process that created it: after a fork, create a new one in the child.

With a `sink` (engine.telemetry.postgres_sink.PostgresSink, for gateways on several hosts) each
batch goes to `sink.write(table)` instead of a spool file, with the same guarantees: a write that
raises (the database is down) keeps the batch buffered for the next cycle. Breaker events still
go to `spool_dir/events/`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.attempt import Attempt
from engine.core.clock import Clock, SystemClock
from engine.core.files import fsync_path
from engine.telemetry import columns as records
from engine.telemetry.breaker_events import EVENTS_DIR, BreakerEvent, write_events
from engine.telemetry.pacing import FlushPacing
from engine.telemetry.spool import process_name, write_spool_file
from engine.telemetry.status import RecorderStats, RecorderStatus, StatusFile, redact

__all__ = ["AttemptPricer", "AttemptSink", "Recorder", "RecorderStats"]

log = logging.getLogger("switchover.recorder")

WARN_EVERY_S = 60.0
# At most this many rows per file (more when flush_rows is larger): writing one takes ~0.1 s
# of the flusher's CPU (pricing, rows, Arrow, Parquet: ~11 µs a row), well within the interval.
FILE_ROWS = 10_000
_sigterm_installed = False


class AttemptPricer(Protocol):
    """What the recorder needs of engine.core.pricing.Pricer (any object with this method)."""

    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]: ...


class AttemptSink(Protocol):
    """Where batches go instead of spool files. `write` raises unless the whole table is stored;
    writing a table again must not store its rows twice (its COMMIT may have been lost)."""

    def write(self, table: pa.Table) -> int: ...

    def close(self) -> None: ...


class Recorder:
    last_spooled: str | None = None  # the spool file of the attempts told to `on_priced` now

    def __init__(
        self,
        spool_dir: Path,
        *,
        pricer: AttemptPricer | None = None,
        flush_interval_s: float = 1.0,
        flush_rows: int = 1000,
        max_buffered: int = 200_000,
        fsync: bool = True,
        clock: Clock | None = None,
        sink: AttemptSink | None = None,
    ) -> None:
        self.spool_dir = Path(spool_dir)
        self.sink = sink
        self.pricer = pricer
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.max_buffered = max_buffered
        self.fsync = fsync
        self.clock = clock or SystemClock()
        self._file_rows = max(flush_rows, FILE_ROWS)
        # Real time, whatever the clock: the flusher waits on a thread, and a virtual clock
        # (the simulator's) runs far ahead of it.
        self._pacing = FlushPacing(flush_interval_s, flush_rows, self._file_rows, time.monotonic())
        self._buffer: deque[Attempt] = deque()
        self._events: deque[BreakerEvent] = deque(maxlen=10_000)  # rare; bounded all the same
        self._wake = threading.Event()
        self._stop = threading.Event()
        # Held by whoever writes (flusher or flush()), never by the hook.
        self._write_lock = threading.Lock()
        # Held only to drop and count (the hook, on overflow only, and the flusher), for µs.
        self._drop_lock = threading.Lock()
        self._in_flight = self._written = self._files = self._dropped = self._failed = 0
        self._rejected = self._lost = 0  # of _dropped: not valid rows; buffered at close
        self._status = StatusFile(self.spool_dir, process_name())
        self._failing = False
        self._closed = False
        self._last_error: str | None = None
        self._last_flush_at: datetime | None = None
        self._warned_at: dict[str, float] = {}
        self._priced: list[Callable[[Attempt, Decimal | None], None]] = []
        # Convert and write once now: pyarrow imports pandas on first use, which registers a
        # thread-exit hook, and that fails when the first write is the final one at exit.
        pq.write_table(records.to_table([]), pa.BufferOutputStream())
        # A thread, not an asyncio task: turning 1,000 attempts into rows and Arrow is a few ms
        # of CPU that would stall every request on the loop, sync users have no loop at all,
        # and a thread releases the GIL while pyarrow writes and fsyncs.
        self._thread = threading.Thread(target=self._run, name="switchover-recorder", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        _install_sigterm_handler()

    def __call__(self, attempt: Attempt) -> None:
        """The hook: an append and a length check, never I/O, never a raise."""
        buffer = self._buffer
        buffer.append(attempt)
        size = len(buffer)
        if size > self.max_buffered:
            self._drop_oldest(wait=False)
        if size >= self._pacing.threshold and not self._wake.is_set():
            self._wake.set()

    def breaker_changed(self, event: BreakerEvent) -> None:
        """A breaker transition, written with the next flush (an append, never I/O)."""
        self._events.append(event)
        self._wake.set()

    def stats(self) -> RecorderStats:
        return RecorderStats(
            buffered=len(self._buffer) + self._in_flight,
            written=self._written,
            files=self._files,
            dropped=self._dropped,
            failed_flushes=self._failed,
            last_error=self._last_error,
            last_flush_at=self._last_flush_at,
            failing=self._failing,
            lost_at_exit=self._lost,
        )

    def flush(self) -> int:
        """Write everything buffered now, on this thread; the number of rows written."""
        with self._write_lock:
            return self._drain(len(self._buffer))

    def close(self) -> None:
        """Stop the flusher and write everything buffered. Idempotent; also run at exit.
        Attempts recorded after this wait for an explicit `flush()`."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self.flush()
        if lost := self._discard_unwritten():
            log.error("%d attempts could not be spooled and are lost: %s", lost, self._last_error)
        with self._write_lock:
            self._report_status(closed=True)
        if self.sink is not None:
            self.sink.close()

    def _discard_unwritten(self) -> int:
        """Count what is still buffered as lost (kept, it could be written after all)."""
        lost = 0
        with self._drop_lock:
            with contextlib.suppress(IndexError):  # a flush() raced us to it
                for _ in range(len(self._buffer)):  # what the hook appends meanwhile stays
                    self._buffer.popleft()
                    lost += 1
            self._dropped, self._lost = self._dropped + lost, self._lost + lost
        return lost

    # --- the flusher thread --------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            # After a failure, wait out the interval even when the buffer is full: the hook
            # keeps setting the wake event, and a full disk must not become a busy loop.
            if self._failing:
                self._stop.wait(self.flush_interval_s)
            else:
                self._wake.wait(max(0.0, self._pacing.due() - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            began, rows = time.monotonic(), 0
            try:
                with self._write_lock:
                    rows = self._drain(len(self._buffer))
            except Exception:  # the thread must survive any bug, or recording stops silently
                log.exception("recorder flush failed unexpectedly")
            self._pacing.wrote(began, time.monotonic(), rows)

    def _drain(self, limit: int) -> int:
        """Write up to `limit` buffered attempts in files of at most `_file_rows`; on failure
        put the batch back at the front, oldest first, for the next cycle."""
        taken = written = 0
        while taken < limit and self._buffer:
            batch = self._take(min(limit - taken, self._file_rows))
            taken += len(batch)
            self._in_flight = len(batch)
            try:
                written += self._write(batch)
            except BaseException as error:  # SystemExit from SIGTERM too: keep the batch
                self._buffer.extendleft(reversed(batch))
                if not isinstance(error, Exception):
                    raise
                self._fail(error)
                break
            finally:
                self._in_flight = 0
        # The renames themselves survive a crash: one fsync of the folder a cycle.
        if written and self.fsync and self.sink is None:
            try:
                fsync_path(self.spool_dir)
            except OSError as error:
                self._warn("write", "cannot fsync the spool folder %s: %r", self.spool_dir, error)
        self._drop_oldest()
        self._write_events()
        self._report_status()
        return written

    def _report_status(self, *, closed: bool = False) -> None:
        status = RecorderStatus(  # a few hundred bytes, when the trouble changed; off the hook
            process=self._status.name,
            host=records.HOST,
            pid=os.getpid(),
            destination="sink" if self.sink is not None else str(self.spool_dir),
            buffered=len(self._buffer) + self._in_flight,
            written=self._written,
            dropped=self._dropped,
            rejected=self._rejected,
            lost_at_exit=self._lost,
            failed_flushes=self._failed,
            failing=self._failing,
            last_error=self._last_error,
            last_flush_at=self._last_flush_at,
            closed=closed,
        )
        try:
            error = self._status.update(status, max_buffered=self.max_buffered, final=closed)
        except Exception:  # never let the report of trouble become trouble of its own
            log.exception("recorder status update failed unexpectedly")
            return
        if error and closed:  # the last word: the loss is only in this line now
            log.error("cannot write the recorder's status (%d lost): %s", self._dropped, error)
        elif error:
            self._warn("write", "cannot write the recorder's status: %s", error)

    def _write_events(self) -> None:
        events = list(self._events)
        if not events:
            return
        try:
            write_events(self.spool_dir / EVENTS_DIR, events, fsync=self.fsync)
        except Exception as error:  # kept for the next cycle, like attempts
            self._warn("events", "cannot write breaker events in %s: %r", self.spool_dir, error)
            return
        for _ in events:
            self._events.popleft()

    def _take(self, n: int) -> list[Attempt]:
        batch: list[Attempt] = []
        with contextlib.suppress(IndexError):  # the hook's overflow drop emptied it under us
            for _ in range(n):
                batch.append(self._buffer.popleft())
        return batch

    def _write(self, batch: list[Attempt]) -> int:
        priced = [(a, *self._price(a)) for a in batch]  # again if this write fails: pure
        table = self._table(priced)
        if not table.num_rows:
            return 0
        if self.sink is not None:
            self.sink.write(table)
        else:
            self.last_spooled = write_spool_file(self.spool_dir, table, durable=self.fsync).stem
        self._tell(priced)  # once the attempts are written: a retried batch is told once
        self._written += table.num_rows
        self._files += 1
        self._failing = False
        self._last_flush_at = self.clock.wall()
        return table.num_rows

    def _table(self, priced: list[tuple[Attempt, Decimal | None, str | None]]) -> pa.Table:
        # One record that cannot become a row would block the spool forever: it is dropped and
        # counted, and the rest are written.
        table, lost = records.valid_table(priced)
        if lost:
            with self._drop_lock:
                self._dropped += lost
                self._rejected += lost
            self._warn("rows", "dropped %d records that are not valid rows", lost)
        return table

    def on_priced(self, listener: Callable[[Attempt, Decimal | None], None]) -> None:
        """Call `listener(attempt, cost)` on the recorder's thread once each attempt is written,
        with its price (None: no known price, or no pricer), the one pricing of an attempt, off
        the request path. Quick and thread-safe; what it raises is logged, costs nothing."""
        self._priced.append(listener)

    def _price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]:
        if self.pricer is None:
            return None, None
        try:
            return self.pricer.price(attempt)
        except Exception as error:  # an unpriced attempt is still a fact worth keeping
            self._warn("pricing", "pricing %s failed, cost left NULL: %r", attempt.model, error)
            return None, None

    def _tell(self, priced: list[tuple[Attempt, Decimal | None, str | None]]) -> None:
        for listener in self._priced:
            try:
                for attempt, cost, _ in priced:
                    listener(attempt, cost)
            except Exception as error:
                self._warn("listener", "a priced-attempt listener failed: %r", error)

    def _fail(self, error: Exception) -> None:
        self._failed += 1
        self._failing = True
        self._last_error = redact(f"{type(error).__name__}: {error}")
        self._warn(
            "write",
            "cannot write the spool in %s (%s); %d attempts kept for retry, %d dropped so far",
            self.sink or self.spool_dir,
            self._last_error,
            len(self._buffer),
            self._dropped,
        )

    def _drop_oldest(self, *, wait: bool = True) -> None:
        # The hook never waits: whoever holds the lock is dropping down to the bound already
        # (or counting rejected rows, after which the next call or cycle catches up).
        if not self._drop_lock.acquire(blocking=wait):
            return
        try:
            with contextlib.suppress(IndexError):  # the flusher took the rest meanwhile
                while len(self._buffer) > self.max_buffered:
                    self._buffer.popleft()
                    self._dropped += 1
        finally:
            self._drop_lock.release()

    def _warn(self, kind: str, message: str, *args: object) -> None:
        now = self.clock.now()
        last = self._warned_at.get(kind)
        if last is None or now - last >= WARN_EVERY_S:
            self._warned_at[kind] = now
            log.warning(message, *args)


def _install_sigterm_handler() -> None:
    """SIGTERM's default kills the process without running atexit; make it SystemExit instead,
    unless the application chose a handler of its own (or we cannot: not the main thread)."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _sigterm_installed = True


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
