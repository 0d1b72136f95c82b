"""Breaker states in one SQLite file, shared by every process of this host that records to the
same data folder: the workers of `switchover serve --workers N`, a library process beside them.

The default for a process with a data folder and no `[state] redis_url` (engine.runtime.switchover):
across the workers an outage costs `breaker_failures` failed calls in all, not per worker, and
a half-open breaker lets exactly one probe through.

One row per target in the table `breakers`, whose columns are `BreakerState`'s fields. A call
that may change a state is one `BEGIN IMMEDIATE` transaction: read the row, apply the very
`admit` / `transition` of engine.state.breaker, write the result, commit. SQLite's write lock makes
that atomic across processes, so there is one breaker policy in the code base and of any number
of processes admitting on a half-open key exactly one takes the probe lease. An admit that
changes nothing (closed, or rejected) is answered by a plain read: in WAL mode a reader does
not wait for a writer. The row last read or written is not decoded again (a request reads its
target's row twice, and mostly finds what it wrote last).

Durability is not wanted: WAL with `synchronous=OFF` (no fsync; a power cut may lose the last
changes, and a breaker that starts closed is what any restart means). A transaction costs tens
of µs of CPU, less than a hop to a thread would, so calls run on the caller's event loop. They
never wait there for another process's write lock: the busy timeout is 0, and a call that
finds it taken yields to the loop and tries again (`BUSY_DELAYS_S`, about half a second in
all) instead of sleeping in SQLite's busy handler. (SQLite still sleeps briefly inside a read
that races a writer for the WAL index: at most ~2 ms each under two processes' back-to-back
writes, measured with `strace -T`.) Measured: docs/benchmarks.md, "Breaker stores".

Time: the callers' monotonic clock, stored as is. Every process on one host reads the same
monotonic clock (CLOCK_MONOTONIC counts from boot), so no offset is needed and a wall-clock step
moves nothing. The file records which boot its times belong to (`boot_epoch()`: wall time less
monotonic time); a store that opens a file of another boot, or after the wall clock moved by
more than `BOOT_TOLERANCE_S` against the monotonic one, empties it: every breaker starts closed,
as after any restart. Not for a data folder shared between hosts (nor for SQLite on NFS).

A file that cannot be used (no such folder, read-only, corrupt): the call is answered by an
in-process `MemoryBreakerStore` instead, one warning is logged per outage, `fallbacks` counts
the calls so answered and `shared` is False, as the Redis store does; the file is tried again
`retry_s` later. The write lock held past the busy delays answers that one call from memory.
No request ever fails because of the store. Never sleeps but to yield; reads the clocks only
to know the boot, when it opens the file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from engine.state.breaker import (
    Admission,
    BreakerPolicy,
    BreakerState,
    Event,
    OnChange,
    Status,
    _notable,
    admit,
    transition,
)
from engine.state.breaker_fallback import MemoryFallback

log = logging.getLogger("switchover.breaker")

T = TypeVar("T")
Step = Callable[[BreakerState], tuple[T, BreakerState]]

RETRY_S = 5.0  # while the file is unusable, try it again this often
BOOT_TOLERANCE_S = 1.0  # more drift than NTP's slewing gives in a day; less than any reboot
# Waits, in seconds, between tries while another process holds the write lock (held for tens
# of µs): yield at once a few times, then back off; about 0.5 s in all, then memory answers.
BUSY_DELAYS_S = (0.0,) * 4 + tuple(min(0.02, 0.0001 * 2**i) for i in range(36))
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)

FIELDS = tuple(f.name for f in dataclasses.fields(BreakerState))
_COLUMNS = ", ".join(FIELDS)
_RECENT = FIELDS.index("recent")  # the one field that is not a scalar: stored as JSON text
_SELECT = f"SELECT {_COLUMNS} FROM breakers WHERE key = ?"
_SELECT_ALL = f"SELECT key, {_COLUMNS} FROM breakers ORDER BY key"
_UPSERT = f"INSERT OR REPLACE INTO breakers (key, {_COLUMNS}) VALUES (?{', ?' * len(FIELDS)})"
_SCHEMA = f"CREATE TABLE breakers (key TEXT PRIMARY KEY, {_COLUMNS}) WITHOUT ROWID"


def boot_epoch() -> float:
    """The wall-clock time at which this host's monotonic clock read zero."""
    return time.time() - time.monotonic()


class SQLiteBreakerStore(MemoryFallback):
    """Breaker states in the SQLite file at `path`: see the module docstring. `on_change` is
    called by the one process whose write made the change."""

    def __init__(
        self,
        path: Path,
        policy: BreakerPolicy | None = None,
        policies_by_key: Mapping[str, BreakerPolicy] | None = None,
        on_change: OnChange | None = None,
        *,
        retry_s: float = RETRY_S,
        boot: Callable[[], float] = boot_epoch,
    ) -> None:
        super().__init__(policy, policies_by_key, on_change, retry_s)
        self.path = Path(path)
        self._boot = boot
        self._con: sqlite3.Connection | None = None  # opened by the first call
        self._rows: dict[str, tuple[tuple[object, ...], BreakerState]] = {}  # key → last seen
        self._down = False  # the file unusable: memory answers (engine.state.breaker_fallback)

    @property
    def shared(self) -> bool:
        """False while the file is unusable and this process's memory answers."""
        return not self._down

    async def admit(self, key: str, now: float) -> tuple[Admission, Status]:
        policy = self.policy_for(key)

        def step(state: BreakerState) -> tuple[Admission, BreakerState]:
            return admit(state, now, policy)

        if self._use_memory(now):
            return await self._memory.admit(key, now)
        try:
            admission, after = await self._retrying(lambda: self._apply(key, step, True))
        except _Busy as exc:
            self._contended(exc)
            return await self._memory.admit(key, now)
        except (sqlite3.Error, OSError) as exc:
            self._lost(exc, now)
            return await self._memory.admit(key, now)
        self._restored()
        return admission, after.status

    async def record(self, key: str, event: Event, now: float) -> None:
        policy = self.policy_for(key)

        def step(state: BreakerState) -> tuple[None, BreakerState]:
            return None, transition(state, event, now, policy)

        if self._use_memory(now):
            return await self._memory.record(key, event, now)
        try:
            await self._retrying(lambda: self._apply(key, step, False))
        except _Busy as exc:
            self._contended(exc)
            return await self._memory.record(key, event, now)
        except (sqlite3.Error, OSError) as exc:
            self._lost(exc, now)
            return await self._memory.record(key, event, now)
        self._restored()

    async def snapshot(self, key: str) -> BreakerState:
        if self._down:
            self.fallbacks += 1
            return await self._memory.snapshot(key)
        try:
            row = await self._retrying(
                lambda: self._connection().execute(_SELECT, (key,)).fetchone()
            )
        except _Busy as exc:
            self._contended(exc)
            return await self._memory.snapshot(key)
        except (sqlite3.Error, OSError) as exc:
            self._lost(exc, None)
            return await self._memory.snapshot(key)
        return self._state(key, row)

    async def snapshot_all(self) -> dict[str, BreakerState]:
        if self._down:
            self.fallbacks += 1
            return await self._memory.snapshot_all()
        try:
            rows = await self._retrying(lambda: self._connection().execute(_SELECT_ALL).fetchall())
        except _Busy as exc:
            self._contended(exc)
            return await self._memory.snapshot_all()
        except (sqlite3.Error, OSError) as exc:
            self._lost(exc, None)
            return await self._memory.snapshot_all()
        return {row[0]: self._state(row[0], row[1:]) for row in rows}

    async def aclose(self) -> None:
        self._close()

    # --- one transaction -----------------------------------------------------------------

    def _apply(self, key: str, step: Step[T], read_first: bool) -> tuple[T, BreakerState]:
        """Run `step` on the stored state and store its result atomically; nothing awaits in
        between, so on one event loop no other call interleaves either."""
        con = self._connection()
        if read_first:  # most admits change nothing: one read answers them
            row = con.execute(_SELECT, (key,)).fetchone()
            before = self._state(key, row)
            result, after = step(before)
            if row is not None and after == before:
                return result, after
        con.execute("BEGIN IMMEDIATE")
        try:
            row = con.execute(_SELECT, (key,)).fetchone()
            before = self._state(key, row)
            result, after = step(before)
            if row is None or after != before:
                written = _encode(after)
                con.execute(_UPSERT, (key, *written))
                self._rows[key] = (written, after)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        if self._on_change is not None and _notable(before, after):
            self._on_change(key, before, after)
        return result, after

    def _state(self, key: str, row: tuple[object, ...] | None) -> BreakerState:
        """The state a row holds. The row last read or written for the key is not decoded
        again: a request reads its target's row twice, and mostly finds what it wrote last."""
        if row is None:
            return BreakerState()
        seen = self._rows.get(key)
        if seen is not None and seen[0] == row:
            return seen[1]
        state = _decode(row)
        self._rows[key] = (row, state)
        return state

    async def _retrying(self, call: Callable[[], T]) -> T:
        """`call()`, tried again after a yield to the loop while another process holds the
        lock; _Busy when it is still held after every delay."""
        for delay in BUSY_DELAYS_S:
            try:
                return call()
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _BUSY_CODES:
                    raise
            await asyncio.sleep(delay)
        raise _Busy(f"{self.path} stayed locked by another process for {sum(BUSY_DELAYS_S):.1f} s")

    # --- the file ------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._con is not None:
            return self._con
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # timeout=0: SQLite's busy handler would sleep on the event loop; _retrying yields.
        con = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=OFF")
            self._prepare(con)
        except BaseException:
            con.close()
            raise
        self._con = con
        return con

    def _prepare(self, con: sqlite3.Connection) -> None:
        """The table as BreakerState's fields are now, holding times of this boot only."""
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value)")
            columns = [row[1] for row in con.execute("PRAGMA table_info(breakers)")]
            if columns != ["key", *FIELDS]:  # none yet, or another version's: start afresh
                con.execute("DROP TABLE IF EXISTS breakers")
                con.execute(_SCHEMA)
            row = con.execute("SELECT value FROM meta WHERE name = 'boot_epoch'").fetchone()
            boot = self._boot()
            if row is None or abs(float(row[0]) - boot) > BOOT_TOLERANCE_S:
                con.execute("DELETE FROM breakers")  # times of another boot mean nothing now
                con.execute("INSERT OR REPLACE INTO meta VALUES ('boot_epoch', ?)", (boot,))
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise

    def _close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    # --- falling back to memory ----------------------------------------------------------

    def _backend_down(self) -> bool:
        return self._down

    def _lost(self, exc: Exception, now: float | None) -> None:
        self.fallbacks += 1
        self._close()  # reopened on the next try: a fixed file or folder is then picked up
        self._retry_at = None if now is None else now + self._retry_s
        if not self._down:
            self._down = True
            log.warning(
                "breaker store: %s unusable (%s: %s); breakers fall back to this process's "
                "memory, and the file is retried every %g s",
                self.path,
                type(exc).__name__,
                exc,
                self._retry_s,
            )

    def _restored(self) -> None:
        if self._down:
            self._down = False
            self._memory = self._new_memory()  # what this process learnt alone is dropped
            log.warning("breaker store: %s usable again; breakers are shared", self.path)

    def _contended(self, exc: _Busy) -> None:
        self.fallbacks += 1
        log.warning("breaker store: %s; this call used the process's memory", exc)


class _Busy(sqlite3.OperationalError):
    """The write lock stayed taken: answered from memory, without marking the file unusable."""


def check_usable(path: Path) -> str | None:
    """None when a breaker store can be kept at `path`, else why not (one line)."""
    store = SQLiteBreakerStore(path)
    try:
        for delay in BUSY_DELAYS_S:
            try:
                store._connection()
                return None
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _BUSY_CODES:
                    raise
            time.sleep(delay)  # at start, before any event loop: another worker is preparing
        return f"{path} stayed locked by another process"
    except (sqlite3.Error, OSError) as exc:
        return f"{path} unusable ({type(exc).__name__}: {exc})"
    finally:
        store._close()


def read_states(
    path: Path, boot: Callable[[], float] = boot_epoch
) -> dict[str, BreakerState] | None:
    """The states in the file at `path`, read as a bystander does (the dashboard, beside the
    gateway on this host): opened read-only, never created, prepared or emptied, so reading
    never moves a breaker (SQLite may add the `-wal` and `-shm` files beside it, as any reader
    of a WAL file does). Their times are this host's monotonic clock. None when there is no
    such file or table, or when its times belong to another boot (a store opening it would
    empty it: every breaker closed)."""
    if not Path(path).is_file():
        return None
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return None
    try:
        row = con.execute("SELECT value FROM meta WHERE name = 'boot_epoch'").fetchone()
        if row is None or abs(float(row[0]) - boot()) > BOOT_TOLERANCE_S:
            return None
        columns = [r[1] for r in con.execute("PRAGMA table_info(breakers)")]
        if columns != ["key", *FIELDS]:
            return None
        return {r[0]: _decode(r[1:]) for r in con.execute(_SELECT_ALL).fetchall()}
    except (sqlite3.Error, ValueError, TypeError):
        return None
    finally:
        con.close()


# --- the stored form -------------------------------------------------------------------------


def _encode(state: BreakerState) -> tuple[object, ...]:
    values = [getattr(state, name) for name in FIELDS]
    values[_RECENT] = json.dumps(state.recent)
    return tuple(values)


def _decode(row: tuple[object, ...] | None) -> BreakerState:
    if row is None:
        return BreakerState()
    try:
        data = dict(zip(FIELDS, row, strict=True))
        recent = json.loads(data["recent"])  # type: ignore[arg-type]
        data["recent"] = tuple((float(s), int(f), int(t)) for s, f, t in recent)
        return BreakerState(**data)  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        # Written by hand, or damaged: a closed breaker (rewritten on the next change) is
        # better than failing every request to the target.
        log.warning("breaker store: unreadable state %.80r (%s); taken as closed", row, exc)
        return BreakerState()
