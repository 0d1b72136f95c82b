"""The scheduler's pipeline, on the one connection to `data/switchover.duckdb`: the jobs the
scheduler process runs (engine.scheduler.process) and what each does.

Every few seconds one cycle runs: ingest the spool files (exactly once), pull the attempts that
gateways on several hosts wrote to PostgreSQL when `postgres_url` is set (exactly once as well,
engine.store.postgres_pull), ingest breaker events, refresh the minute and hour rollups that the new
attempts touch, evaluate the alert rules and send what fired or resolved (engine.alerts;
incidents once a minute), and publish read-only Parquet snapshots for the dashboard and
reports (engine.scheduler.snapshots). Every quarter of an hour the day rollups catch up; every
minute the traffic profile the what-if scenarios are built from is looked at and, when due,
refreshed and published (engine.store.traffic_profile: never in a cycle). The jobs share the
one connection, which is not meant for concurrent use: each holds `_busy` while it runs on it.

Nothing else may open the database file; everything else reads `data/published/`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb

from engine.alerts.watch import Watch
from engine.config import StoreConfig
from engine.config.alerting import AlertingConfig
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.published import partitions
from engine.published.budgets import write_budgets
from engine.published.scheduler_status import write_status
from engine.scheduler import snapshots
from engine.scheduler.snapshots import RECENT_ATTEMPTS_HOURS
from engine.store import retention
from engine.store.breaker_events import ingest_events
from engine.store.budgets import budgets_snapshot
from engine.store.db import open_store
from engine.store.drill_reports import report_drills
from engine.store.eval_drill_inbox import take_in
from engine.store.failure_classes import refresh_failures
from engine.store.ingest import LEDGER_KEEP, IngestResult, ingest_spool, prune_ledger
from engine.store.rollups import bucket_start, chunks, forget_baselines, refresh
from engine.store.telemetry import take_in as take_in_telemetry
from engine.store.traffic_profile import TrafficProfile
from engine.telemetry.breaker_events import EVENTS_DIR

if TYPE_CHECKING:
    from engine.store.postgres_pull import PostgresSource

log = logging.getLogger("switchover.scheduler")

CYCLE_S = 5.0
# Minutes are re-read this far back every cycle even without late files: a request's later
# attempts (retries, a long stream) can arrive in the next spool file.
MINUTE_LOOKBACK = timedelta(minutes=2)
# With nothing new ingested the snapshots are still republished this often: the windows slide,
# and the dashboard shows their age.
IDLE_REPUBLISH = timedelta(seconds=60)


# (connection, from, to): see Pipeline's `after_minutes`.
MinutesHook = Callable[[duckdb.DuckDBPyConnection, datetime, datetime], None]


@dataclass(frozen=True, slots=True)
class CycleReport:
    files: int
    rows: int
    refreshed_from: datetime | None
    seconds: float


class Pipeline:
    """Ingest → rollups → publish, on one connection to the database."""

    def __init__(
        self,
        paths: DataPaths,
        pricer: Pricer | None = None,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        alerting: AlertingConfig | None = None,
        watch: Watch | None = None,
        postgres_url: str | None = None,
        store: StoreConfig | None = None,
        after_minutes: MinutesHook | None = None,
        publish: bool = True,
    ) -> None:
        """`alerting`: the rules and receivers (the built-in rules, no receivers, when None);
        `watch` replaces the whole alerting pass (tests inject its clock and sender);
        `postgres_url`: the attempt sink of gateways on several hosts, pulled every cycle;
        `store`: [store], how long attempts stay before they move to the archive;
        `after_minutes`: called with the range each time its minute rollups were refreshed,
        before the hours and the alerts read them (the simulator adds the minutes of the
        requests it answered in bulk there: simulations.whatif.fastforward_rows);
        `publish`: write the dashboard's snapshots (a simulation's own store has no
        dashboard: its results are read from the store)."""
        self.after_minutes = after_minutes
        self.publishing = publish
        self.paths = paths
        self.store = store or StoreConfig()
        self.pricer = pricer or Pricer()
        self.now = now
        self.con = open_store(paths.database)  # StoreLockedError: see `open_when_free`
        try:
            self.watch = watch or Watch(alerting or AlertingConfig(), paths)
            self.postgres: PostgresSource | None = None
            if postgres_url:
                from engine.store.postgres_pull import PostgresSource

                self.postgres = PostgresSource(postgres_url)
            paths.published.mkdir(parents=True, exist_ok=True)
        except BaseException:  # a retry in this process must find the file free
            self.con.close()
            raise
        self._postgres_down = False
        with contextlib.suppress(OSError):  # a file in its place: the spool check reports it
            paths.spool.mkdir(parents=True, exist_ok=True)
        self._spool_error: str | None = None
        self.started_at = now()
        # The day rollups are stale from here on (None: from the last day they hold).
        self._days_stale_from: datetime | None = None
        self.profile = TrafficProfile(paths.archive)  # its 35 days reach into the archive
        self._published_at: datetime | None = None
        # One job at a time on the connection: the last cycle at shutdown runs on the main
        # thread while the worker may still be finishing one.
        self._busy = threading.Lock()

    def close(self) -> None:
        with self._busy:
            try:
                self.watch.close(self.con, self.now())
                if self.postgres is not None:
                    self.postgres.close()
            finally:
                self.con.close()

    def cycle(self) -> CycleReport:
        with self._busy:
            return self._cycle()

    def _cycle(self) -> CycleReport:
        started = self.now()
        files, rows, oldest, events = self._ingest_spool()
        while self.postgres is not None:  # the same, from PostgreSQL, 50,000 rows at a time
            pulled = self._pull()
            rows += pulled.rows
            if pulled.oldest is not None and (oldest is None or pulled.oldest < oldest):
                oldest = pulled.oldest
            if not pulled.more:
                break
        self._budgets(started)  # right after ingest: the hard cap reads what it covers
        # Drills first: the rollups tell a drill's fallbacks from a provider's trouble.
        readiness_changed = self._readiness(started)
        since = started - MINUTE_LOOKBACK
        late = oldest is not None and oldest < since
        floor = retention.refresh_floor(self.con)  # what was made of moved days is final
        if late:
            since = oldest  # a late file (a writer that was offline): recompute back to it
            if floor is not None and since < floor:
                log.warning(
                    "attempts from %s arrived after their day moved to the "
                    "archive: kept, and counted in no rollup",
                    oldest,
                )
                since = floor
            forget_baselines(self.con, since)  # the cache-hit baselines after it changed too
            self.profile.note_late(oldest)  # recomputed by its own job, not in this cycle
        for lo, hi in chunks(since, started):
            refresh(self.con, "minute", lo, hi, self._prices, now=started)
            if self.after_minutes is not None:
                self.after_minutes(self.con, lo, hi)
            refresh(self.con, "hour", lo, hi, self._prices, now=started)
            refresh_failures(self.con, lo, hi)
        if oldest is not None and oldest < started - timedelta(hours=1):  # late data:
            self._days_stale_from = min(self._days_stale_from or oldest, oldest)  # days too
        self._telemetry(started)  # before the alerts: telemetry_lag and _loss read its tables
        alerts_changed = self._watch(started, since, late) or readiness_changed
        stale = self._published_at is None or started - self._published_at >= IDLE_REPUBLISH
        if self.publishing and (rows or events or alerts_changed or stale):
            self.publish(started)
            self._published_at = started
        self._heartbeat(started)
        report = CycleReport(files, rows, since, (self.now() - started).total_seconds())
        if rows:
            log.debug("cycle: %d rows from %d files in %.3f s", rows, files, report.seconds)
        return report

    def _ingest_spool(self) -> tuple[int, int, datetime | None, int]:
        """Spool files and breaker events into the store: (files, rows, oldest attempt, event
        files). A spool that cannot be listed (not a folder, no permission) is logged once
        until it can, never raised: the alerts must still run to say so."""
        files = rows = events = 0
        oldest: datetime | None = None
        try:
            while True:  # drain: a backlog (the scheduler was down) is ingested in one cycle
                ingested = ingest_spool(self.con, self.paths.spool)
                files, rows = files + ingested.files, rows + ingested.rows
                if ingested.oldest is not None and (oldest is None or ingested.oldest < oldest):
                    oldest = ingested.oldest
                if not ingested.more:
                    break
            events = ingest_events(self.con, self.paths.spool / EVENTS_DIR)
        except OSError as error:
            text = f"{type(error).__name__}: {error}"
            if text != self._spool_error:
                log.error(
                    "cannot read the spool %s, retrying every cycle: %s", self.paths.spool, text
                )
            self._spool_error = text
            return files, rows, oldest, events
        if self._spool_error is not None:
            log.info("reading the spool %s again", self.paths.spool)
        self._spool_error = None
        return files, rows, oldest, events

    def _budgets(self, now: datetime) -> None:
        """`published/budgets.json` (engine.store.budgets). Its failure is logged, never raised;
        the gateway goes on from the last one and its own spool files."""
        budgets = self.watch.config.budgets
        if not budgets:
            return
        try:
            snapshot = budgets_snapshot(self.con, self.paths.archive, budgets, now)
            write_budgets(self.paths.budgets, snapshot)
        except Exception:
            log.exception("publishing the budgets failed; tried again next cycle")

    def _telemetry(self, now: datetime) -> None:
        """The spool check and the recorders' status files (engine.store.telemetry)."""
        try:
            take_in_telemetry(self.con, self.paths, now)
        except Exception:
            log.exception("taking in the recorders' status failed; tried again next cycle")

    def _heartbeat(self, now: datetime) -> None:
        """`published/scheduler.json`: running, as of this cycle (the dashboard's sidebar)."""
        with contextlib.suppress(OSError):  # publishing fails on that folder too, and says so
            write_status(
                self.paths.scheduler_status, "running", self.paths.database, self.started_at, now
            )

    def _pull(self) -> IngestResult:
        """One batch from PostgreSQL. Its being down is logged (once until it is back), never
        raised: the spool, rollups and alerts go on, and the rows wait in PostgreSQL."""
        from engine.store.postgres_pull import PostgresUnavailable

        assert self.postgres is not None
        try:
            pulled = self.postgres.pull(self.con, now=self.now())
        except PostgresUnavailable as error:
            if not self._postgres_down:
                log.warning("cannot pull attempts from PostgreSQL, retrying every cycle: %s", error)
            self._postgres_down = True
            return IngestResult()
        if self._postgres_down:
            log.info("pulling attempts from %s again", self.postgres)
        self._postgres_down = False
        return pulled

    def _readiness(self, now: datetime) -> bool:
        """Eval runs and drills from the control folder, and the reports of drills that ended;
        whether anything changed. Never raised: ingest and alerts must go on."""
        try:
            return bool(take_in(self.con, self.paths) + report_drills(self.con, now))
        except Exception:
            log.exception("taking in evals and drills failed; tried again next cycle")
            return False

    def _watch(self, now: datetime, refreshed_from: datetime, late: bool) -> bool:
        """The alerting pass; whether its snapshots changed. Its failure is logged, never
        raised: ingest and publishing must go on (telemetry lag is itself an alert)."""
        try:
            report = self.watch.run(self.con, now, late=late, refreshed_from=refreshed_from)
            return report.changed
        except Exception:
            log.exception("the alerting pass failed; it runs again next cycle")
            return False

    def day_rollups(self) -> None:
        """Days are sums of minutes: refresh them after the minutes, from where the last run
        stopped (in a new process, from the last day they hold; everything, the first time),
        move what is older than [store] keep_attempts_days to the archive, and trim the ingest
        ledger."""
        with self._busy:
            self._day_rollups()

    def _day_rollups(self) -> None:
        now = self.now()
        since = self._days_stale_from or self._last_day_rolled() or self._oldest_attempt() or now
        floor = retention.refresh_floor(self.con)
        if floor is not None:
            since = max(since, floor)
        # A day's percentiles come from all its attempts: one day a refresh, each day once.
        day = bucket_start(min(since, now), "day")
        while day <= now:
            refresh(
                self.con,
                "day",
                day,
                min(now, day + timedelta(days=1, microseconds=-1)),
                self._prices,
            )
            day += timedelta(days=1)
        self._days_stale_from = now - timedelta(hours=1)
        self._archive(now)
        with contextlib.suppress(OSError):  # a spool that cannot be listed: the cycle says so
            prune_ledger(self.con, self.paths.spool, now=now)
        self._prune_postgres(now)

    def _last_day_rolled(self) -> datetime | None:
        """The start of the last day the day rollups hold: where a new process goes on from
        (it holds that day as far as the last run saw it)."""
        (last,) = self.con.execute("SELECT max(bucket) FROM rollup_day").fetchone()
        return last

    def _archive(self, now: datetime) -> None:
        """Attempts older than [store] keep_attempts_days to data/archive/, a day a run, once
        the days' rollups are done (engine.store.retention). Its failure is logged, never
        raised: the rows stay in the table, and the next run moves them."""
        try:
            retention.archive_old_attempts(
                self.con, self.paths.archive, self.store.keep_attempts_days, now
            )
        except Exception:
            log.exception("archiving old attempts failed; tried again in a quarter of an hour")

    def compact(self) -> partitions.Compaction:
        """Merge the 24 h snapshot's parts (engine.published.partitions). Reads and writes only
        Parquet, so it runs beside the cycles, not between them; its failure is logged, never
        raised (the parts stay as they are, and readers read them)."""
        try:
            return partitions.compact(self.paths.published, self.now(), RECENT_ATTEMPTS_HOURS)
        except Exception:
            log.exception("compacting the published attempts failed; tried again later")
            return partitions.Compaction()

    def traffic_profile(self) -> bool:
        """The what-if scenarios' profile of the traffic (engine.store.traffic_profile),
        refreshed and published when due; whether it was. Its failure is logged, never raised:
        ingest and alerts must go on, and the next check tries again."""
        with self._busy:
            try:
                return self.profile.run(self.con, self.paths.published, self.now())
            except Exception:
                log.exception("publishing the traffic profile failed; tried again next minute")
                return False

    def _prune_postgres(self, now: datetime) -> None:
        """PostgreSQL keeps pulled rows as long as the spool's ledger keeps file names: a batch
        retried that late still meets its rows' unique key there."""
        if self.postgres is None:
            return
        from engine.store.postgres_pull import PostgresUnavailable

        try:
            self.postgres.prune(self.con, before=now - LEDGER_KEEP)
        except PostgresUnavailable as error:
            log.warning("cannot prune pulled attempts in PostgreSQL: %s", error)

    def publish(self, now: datetime) -> None:
        """The cycle's snapshots, as of `now` (engine.scheduler.snapshots), with the error
        budgets of the [[slo]] objectives whose burn-rate rules the alerting pass runs."""
        slos = dict.fromkeys(r.slo for r in self.watch.config.rules if r.slo is not None)
        snapshots.publish(self.con, self.paths.published, now, tuple(slos))

    def _prices(self, provider: str, provider_kind: str, model: str) -> Any:
        return self.pricer.unit_prices(provider_kind, model, self.now(), provider=provider)

    def _oldest_attempt(self) -> datetime | None:
        (oldest,) = self.con.execute("SELECT min(started_at) FROM attempts").fetchone()
        return oldest
