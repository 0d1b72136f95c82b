"""`switchover scheduler`, the process: the jobs on their clocks, waiting for the database while
another process holds it, and stopping on SIGTERM or SIGINT after one last cycle.

Jobs run one at a time on a single worker thread: they share the pipeline's one DuckDB
connection, which is not meant for concurrent use, and a slow cycle is simply coalesced with
the next. Only the compaction of the published attempts (engine.published.partitions), which
never touches the connection, has a thread of its own. What a job does is
engine.scheduler.pipeline's (the cycle, the day rollups, the traffic profile) and
engine.scheduler.weekly_report's.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import duckdb
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.blocking import BlockingScheduler

from engine.config import ReportsConfig, StoreConfig
from engine.config.alerting import AlertingConfig, Receiver
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.published.scheduler_status import write_status
from engine.scheduler.pipeline import CYCLE_S, Pipeline
from engine.scheduler.weekly_report import weekly_report
from engine.store.db import StoreLockedError

log = logging.getLogger("switchover.scheduler")

T = TypeVar("T")

DAY_ROLLUP_EVERY_S = 900.0
PROFILE_CHECK_S = 60.0  # the traffic profile is looked at this often, and refreshed when due
# The 24 h of attempts are published as parts, one a cycle; they are merged (and the ones that
# left the window dropped) this often, on a thread of their own (engine.published.partitions).
COMPACT_EVERY_S = 30.0
# While another process holds the database: how often to try again.
DATABASE_RETRY_S = 5.0
# What `open_when_free` waits out: the lock (another scheduler, or a tool holding the file) and
# the file's I/O errors. A schema newer than this code, or a bug, is raised: retrying changes
# nothing there.
_CANNOT_OPEN = (StoreLockedError, duckdb.IOException, OSError)
_JOBS = {"max_instances": 1, "coalesce": True, "misfire_grace_time": 60}


def run_scheduler(
    paths: DataPaths,
    pricer: Pricer | None = None,
    *,
    cycle_s: float = CYCLE_S,
    alerting: AlertingConfig | None = None,
    reports: ReportsConfig | None = None,
    postgres_url: str | None = None,
    store: StoreConfig | None = None,
    retry_s: float = DATABASE_RETRY_S,
) -> None:
    """Run until SIGTERM or SIGINT; the last cycle runs before the database is closed. While
    the database cannot be opened, wait for it (`open_when_free`) instead of exiting."""
    scheduler = BlockingScheduler(
        executors={
            "default": ThreadPoolExecutor(max_workers=1),
            "compaction": ThreadPoolExecutor(max_workers=1),
        },
        timezone=UTC,
    )
    stopping = _stop_on_signals(scheduler)
    pipeline = open_when_free(
        lambda: Pipeline(paths, pricer, alerting=alerting, postgres_url=postgres_url, store=store),
        paths,
        stop=stopping,
        retry_s=retry_s,
    )
    if pipeline is None:
        _stopped(paths)
        return
    receivers = alerting.receivers if alerting is not None else ()
    _add_jobs(scheduler, pipeline, cycle_s, reports or ReportsConfig(), receivers)
    log.info("scheduler owns %s; publishing to %s", paths.database, paths.published)
    if pipeline.postgres is not None:
        log.info("pulling attempts from %s", pipeline.postgres)
    try:
        if not stopping.is_set():  # a signal while the database was being opened
            scheduler.start()  # blocks until shutdown
    finally:
        try:
            pipeline.cycle()  # what the writers flushed while we were stopping
        finally:
            pipeline.close()
            _stopped(paths)


def _stop_on_signals(scheduler: BlockingScheduler) -> threading.Event:
    """SIGTERM and SIGINT stop `scheduler` (once it runs) and set the event returned, which
    also ends a wait for the database."""
    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        log.info("stopping the scheduler (signal %d)", signum)
        stopping.set()
        if scheduler.running:
            scheduler.shutdown(wait=False)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return stopping


def _add_jobs(
    scheduler: BlockingScheduler,
    pipeline: Pipeline,
    cycle_s: float,
    reports: ReportsConfig,
    receivers: tuple[Receiver, ...],
) -> None:
    """The cycle, the day rollups and the traffic profile (the first of each at once), the
    compaction on its own thread, and the weekly report on [reports]' day and hour."""
    first = {"next_run_time": datetime.now(UTC)}
    for job, seconds, name, options in (
        (pipeline.cycle, cycle_s, "cycle", first),
        (pipeline.day_rollups, DAY_ROLLUP_EVERY_S, "days", first),
        (pipeline.compact, COMPACT_EVERY_S, "compaction", {"executor": "compaction"}),
        (pipeline.traffic_profile, PROFILE_CHECK_S, "traffic profile", first),
    ):
        scheduler.add_job(job, "interval", seconds=seconds, id=name, **options, **_JOBS)
    scheduler.add_job(
        weekly_report,
        "cron",
        args=(pipeline.paths, reports, None, receivers),
        day_of_week=reports.day,
        hour=reports.hour,
        id="weekly report",
        **_JOBS,
    )


def open_when_free(
    make: Callable[[], T],
    paths: DataPaths,
    *,
    stop: threading.Event,
    retry_s: float = DATABASE_RETRY_S,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> T | None:
    """`make()`, retried every `retry_s` while the database cannot be opened (another process
    holds its lock, or the file cannot be read); None when `stop` is set first. Each retry
    rewrites `published/scheduler.json` (waiting_for_database, with the error) for the
    dashboard; the log says it once per change of error, not once per retry."""
    since: datetime | None = None
    said: str | None = None
    while not stop.is_set():
        try:
            pipeline = make()
        except _CANNOT_OPEN as error:
            text = str(error) or type(error).__name__
        else:
            if since is not None:
                log.info("opened %s, waited since %s", paths.database, f"{since:%H:%M:%S} UTC")
            return pipeline
        if text != said:
            log.error("cannot open the database, retrying every %g s: %s", retry_s, text)
            said = text
        since = since or now()
        try:
            write_status(
                paths.scheduler_status, "waiting_for_database", paths.database, since, now(), text
            )
        except OSError as error:
            log.debug("cannot write %s: %s", paths.scheduler_status, error)
        stop.wait(retry_s)
    return None


def _stopped(paths: DataPaths) -> None:
    now = datetime.now(UTC)
    with contextlib.suppress(OSError):
        write_status(paths.scheduler_status, "stopped", paths.database, now, now)
