"""The hard cap: a `hard_cap = true` budget ([[budgets]], engine.config.budgets) refuses its
scope's requests once the period's spend has reached its amount, before any provider is asked.

The spend the gateway holds against the amount is three parts that never overlap:

    the store's figure      budgets.json, published by the scheduler after each ingest: the
                            period's spend over every spool file it ingested, and per process
                            the highest spool seq it ingested (its watermark)
  + the spool it has not    files above their process's watermark: another worker's read once
    ingested yet            (pyarrow, cached by name, the folder listed at most every second);
                            this process's own counted as the recorder writes them (its
                            `on_priced` listener, the file named by `last_spooled`), so one
                            the scheduler ingests and deletes before a listing is still counted
  + this process's attempts priced in the attempt hook with the recorder's own Pricer, keyed
    not written yet         by (request id, attempt number), moved to their file when written

A file leaves the count when a snapshot's watermark covers it: it is in the store's figure then.
Costs are rounded to nano-dollars as the stored row is, so the figure before and after an ingest
is the same to the nano-dollar. Only attempts of a capped scope are priced; without a hard cap
there is no guard at all.

Admission: a request starts while the spend is below the amount; one may take the spend past
it, and from then on every request of the scope is refused. Requests already answering when
the amount is reached are counted as their attempts are recorded: the overshoot is bounded by
what this process has in flight for the scope, plus what other workers spent in the last ~2 s
(their recorder's flush interval and this listing's interval).

The refusal is a 429 in the caller's dialect (OpenAI: insufficient_quota / budget_exceeded;
Anthropic: rate_limit_error) with `retry-after` (seconds until the period ends) and
`x-should-retry: false`: both official SDKs otherwise retry a 429 with backoff, in vain for a
budget that refills in days. It names the budget, the amount, the spend and the reset, never a
key. Counted in the request metrics as outcome "budget_exceeded".

It never fails a request because telemetry is broken (fail open, logged once): with no snapshot
yet (a scheduler not running) the store's part counts as nothing and a warning says so; a
garbled one leaves the last good one in use; an unreadable spool file counts as nothing. With
a PostgreSQL sink ([state] postgres_url) there are no spool files: attempts written to the
database are out of the count until a snapshot has them (up to a scheduler cycle).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

from engine.config.budgets import Budget
from engine.core.attempt import Attempt
from engine.core.clock import Clock
from engine.core.messages import Request
from engine.core.money import column_digits, format_usd
from engine.gateway.budget_files import SpoolFile, Sums, add, read_spool_file, total
from engine.gateway.errors import Failure
from engine.published.budgets import BudgetsSnapshot
from engine.runtime.build import build_pricer
from engine.runtime.switchover import Switchover
from engine.telemetry.columns import stored_cost
from engine.telemetry.recorder import AttemptPricer, Recorder
from engine.telemetry.spool import process_name

__all__ = ["BudgetGuard", "Refusal"]

log = logging.getLogger("switchover.gateway")

LIST_EVERY_S = 1.0  # the spool folder is listed (and the snapshot stat'ed) at most this often
REFRESH_WAIT_S = 0.25  # a request waits this long at most for a refresh; then the last figures
Key = tuple[str, int]  # (request id, attempt number)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A capped budget that is spent: why a request is refused."""

    budget: Budget
    spend: Decimal
    resets_at: datetime  # the end of the period

    def failure(self, face: str, now: datetime) -> Failure:
        b = self.budget
        digits = column_digits([self.spend, b.amount_usd])
        message = (
            f"budget {b.name} ({b.subject}) is spent: {format_usd(self.spend, digits)} of "
            f"{format_usd(b.amount_usd, digits)} this {b.period}; it resets at "
            f"{self.resets_at:%Y-%m-%d %H:%M} UTC"
        )
        kind, code = ("rate_limit_error", None) if face == "anthropic" else _OPENAI_KIND
        wait = max((self.resets_at - now).total_seconds(), 1.0)
        return Failure(429, kind, message, code=code, retry_after_s=wait, cause="budget_exceeded")


_OPENAI_KIND = ("insufficient_quota", "budget_exceeded")


class BudgetGuard:
    def __init__(
        self,
        budgets: Iterable[Budget],
        *,
        pricer: AttemptPricer,
        clock: Clock,
        spool: Path | None = None,
        snapshot: Path | None = None,
        refresh_wait_s: float = REFRESH_WAIT_S,
    ) -> None:
        """`budgets`: the hard-capped ones; `spool` and `snapshot`: where this process's
        recorder writes and where the scheduler publishes budgets.json (None: nothing to read,
        a process that records nowhere)."""
        self.budgets = tuple(budgets)
        self.pricer = pricer
        self.clock = clock
        self.spool = spool
        self.snapshot_path = snapshot
        self.refresh_wait_s = refresh_wait_s
        self.own = process_name()
        self.recorder: Recorder | None = None  # whose writes take attempts out of `_pending`
        self._lock = threading.Lock()  # the hook (loop), the recorder's thread, the refresh
        self._pending: dict[Key, tuple[tuple[str, ...], date, Decimal]] = {}
        self._early: set[Key] = set()  # written before the hook saw them (hook order)
        self._kept: Sums = {}  # attempts of a process that records nowhere: only here
        self._files: dict[str, SpoolFile] = {}
        self._unreadable: set[str] = set()
        self._snapshot: BudgetsSnapshot | None = None
        self._snapshot_stamp: tuple[int, int] | None = None
        self._listed_at: float | None = None
        self._refreshing: asyncio.Future[None] | None = None
        self._warned: set[str] = set()

    @classmethod
    def for_gateway(cls, sw: Switchover) -> BudgetGuard | None:
        """The guard of `sw`'s hard-capped budgets, hooked onto its attempts and recorder;
        None when no budget has a hard cap (then nothing is priced or read for budgets)."""
        capped = [b for b in sw.config.budgets if b.hard_cap]
        if not capped:
            return None
        recorder = sw.recorder
        pricer = recorder.pricer if recorder is not None else None
        paths = sw.paths
        guard = cls(
            capped,
            pricer=pricer if pricer is not None else build_pricer(sw.config),
            clock=sw.clock,
            spool=paths.spool if paths is not None and _spools(recorder) else None,
            snapshot=paths.budgets if paths is not None else None,
        )
        sw.add_hook(guard.observe)
        if recorder is not None:
            guard.recorder = recorder
            recorder.on_priced(guard.written)
        return guard

    # --- the request path --------------------------------------------------------------

    async def check(self, route: str, request: Request) -> Refusal | None:
        """The first spent capped budget of the request's scope, or None (also when the
        guard cannot tell: it fails open, and logs why once)."""
        capped = [b for b in self.budgets if b.covers(route, request.feature, request.key_label)]
        if not capped:
            return None
        try:
            await self._fresh()
            now = self.clock.wall()
            for budget in capped:
                spent = self.spend(budget, now)
                if spent >= budget.amount_usd:
                    return Refusal(budget, spent, budget.bounds(now)[1])
        except Exception as error:  # telemetry trouble never refuses nor fails a request
            self._warn("check", "budget check failed, request let through: %r", error)
        return None

    def spend(self, budget: Budget, now: datetime) -> Decimal:
        """The period's spend of `budget` as this process knows it now (the three parts)."""
        start, end = budget.bounds(now)
        name, first, last = budget.name, start.date(), end.date()
        with self._lock:
            snapshot = self._snapshot
            spent = snapshot.stored_spend(name, start) if snapshot is not None else Decimal(0)
            for file in self._files.values():
                if snapshot is None or not snapshot.covers(file.process, file.seq):
                    spent += total(file.sums, name, first, last)
            for names, day, cost in self._pending.values():
                if name in names and first <= day < last:
                    spent += cost
            return spent + total(self._kept, name, first, last)

    # --- this process's attempts -------------------------------------------------------

    def observe(self, attempt: Attempt) -> None:
        """The attempt hook: price an attempt of a capped scope (nothing else is priced)."""
        names = self._names(attempt)
        if not names:
            return
        cost = stored_cost(self.pricer.price(attempt)[0]) or Decimal(0)
        day = attempt.started_at.astimezone(UTC).date()
        key = (attempt.request_id, attempt.attempt_number)
        with self._lock:
            if self.recorder is None:
                add(self._kept, names, day, cost)
            elif key in self._early:
                self._early.discard(key)
            else:
                self._pending[key] = (names, day, cost)

    def written(self, attempt: Attempt, cost: Decimal | None) -> None:
        """The recorder's `on_priced` listener (its thread): `attempt` is in the spool file
        `recorder.last_spooled` now (or in the sink), no longer pending."""
        names = self._names(attempt)
        if not names:
            return
        recorder = self.recorder if self.spool is not None else None
        name = recorder.last_spooled if recorder is not None else None
        key = (attempt.request_id, attempt.attempt_number)
        day = attempt.started_at.astimezone(UTC).date()
        with self._lock:
            if self._pending.pop(key, None) is None:
                self._early.add(key)
            if name is None:
                return  # a sink: the store has it once the scheduler pulls it
            file = self._files.setdefault(name, SpoolFile.named(name))
            add(file.sums, names, day, stored_cost(cost) or Decimal(0))

    def _names(self, attempt: Attempt) -> tuple[str, ...]:
        return tuple(
            b.name
            for b in self.budgets
            if b.covers(attempt.route, attempt.feature, attempt.key_label)
        )

    # --- what others wrote: the snapshot and the spool ---------------------------------

    async def _fresh(self) -> None:
        """Refresh (in a thread) when the last listing is over LIST_EVERY_S old; wait for it
        at most REFRESH_WAIT_S, so a slow disk delays a request a little, never for long."""
        now = self.clock.now()
        due = self._listed_at is None or now - self._listed_at >= LIST_EVERY_S
        if due and (self._refreshing is None or self._refreshing.done()):
            self._listed_at = now
            self._refreshing = asyncio.ensure_future(asyncio.to_thread(self.refresh))
            self._refreshing.add_done_callback(self._refreshed)
        if self._refreshing is not None and not self._refreshing.done():
            await asyncio.wait({self._refreshing}, timeout=self.refresh_wait_s)

    def _refreshed(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._warn("refresh", "budget refresh failed: %r", task.exception())

    def refresh(self) -> None:
        """Read a new snapshot, list the spool and read its new files, forget what no figure
        needs any more. Blocking: run off the loop."""
        self._read_snapshot()
        for name, path in self._new_files():
            sums = self._read_file(name, path)
            if sums is not None:
                file = SpoolFile.named(name)
                with self._lock:
                    self._files.setdefault(name, SpoolFile(file.process, file.seq, sums))
        self._forget(self.clock.wall())

    def _read_snapshot(self) -> None:
        if self.snapshot_path is None:
            return
        try:
            stat = self.snapshot_path.stat()
        except FileNotFoundError:
            if self._snapshot is None:
                self._warn(
                    "no-snapshot",
                    "no %s yet (is the scheduler running?): the hard caps count only the spool "
                    "and this process's attempts, not the store's",
                    self.snapshot_path,
                )
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._snapshot_stamp:
            return
        self._snapshot_stamp = stamp
        try:
            snapshot = BudgetsSnapshot.parse(json.loads(self.snapshot_path.read_bytes()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ArithmeticError) as error:
            self._warn(
                "snapshot", "cannot read %s, the last one stays: %r", self.snapshot_path, error
            )
            return
        with self._lock:
            self._snapshot = snapshot
            covered = {n for n, f in self._files.items() if snapshot.covers(f.process, f.seq)}
            self._files = {n: f for n, f in self._files.items() if n not in covered}

    def _new_files(self) -> list[tuple[str, Path]]:
        """Other processes' spool files not read yet and not in the store's figure."""
        if self.spool is None:
            return []
        try:
            entries = list(os.scandir(self.spool))
        except FileNotFoundError:
            return []  # nothing written yet
        except OSError as error:
            self._warn("spool", "cannot list the spool %s: %r", self.spool, error)
            return []
        with self._lock:
            snapshot, known = self._snapshot, set(self._files) | self._unreadable
        found = []
        for entry in entries:
            name = entry.name.removesuffix(".parquet")
            if name == entry.name or name.startswith(".") or name in known:
                continue
            file = SpoolFile.named(name)
            if file.process in ("", self.own):
                continue  # not a spool file's name; or this process's own, counted as written
            if snapshot is None or not snapshot.covers(file.process, file.seq):
                found.append((name, Path(entry.path)))
        return found

    def _read_file(self, name: str, path: Path) -> Sums | None:
        try:
            return read_spool_file(path, self.budgets)
        except FileNotFoundError:
            return None  # ingested meanwhile: the next snapshot has it
        except Exception as error:
            self._unreadable.add(name)
            self._warn("file", "cannot read spool file %s, not counted: %r", path, error)
            return None

    def _forget(self, now: datetime) -> None:
        """Drop what lies before every capped budget's current period."""
        first = min(b.bounds(now)[0] for b in self.budgets).date()
        with self._lock:
            self._files = {
                n: f
                for n, f in self._files.items()
                if not f.sums or max(d for _, d in f.sums) >= first
            }
            self._pending = {k: v for k, v in self._pending.items() if v[1] >= first}
            self._kept = {k: v for k, v in self._kept.items() if k[1] >= first}
            if len(self._early) > 100_000:  # hooks that never came (a failed hook): bounded
                self._early.clear()

    def _warn(self, kind: str, message: str, *args: object) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(message, *args)


def _spools(recorder: Recorder | None) -> bool:
    return recorder is not None and recorder.sink is None
