"""Where Switchover keeps its runtime files, under one data folder (default `data/`, or
`SWITCHOVER_DATA_DIR`). Writers only ever touch `spool/` (and `control/`, requests to the
scheduler; `state/`, the breakers they share); the scheduler alone opens the database (and
moves old attempts to `archive/`); readers only read `published/`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "SWITCHOVER_DATA_DIR"


@dataclass(frozen=True, slots=True)
class DataPaths:
    root: Path

    @classmethod
    def default(cls) -> DataPaths:
        return cls(Path(os.environ.get(DATA_DIR_ENV, "data")))

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def recorder_status(self) -> Path:
        """One status file per recording process (engine.telemetry.status), read by the
        scheduler: beside the spool, not in it, so that a spool that cannot be written does
        not take the record of its own losses down with it."""
        return recorder_status_dir(self.spool)

    @property
    def recorder_status_fallback(self) -> Path:
        """Where a recorder's status goes when `recorder_status` cannot be written (a read-only
        data folder with the spool on a volume of its own)."""
        return recorder_status_fallback_dir(self.spool)

    @property
    def scheduler_status(self) -> Path:
        """What the scheduler is doing (running, waiting for the database), for the
        dashboard: engine.published.scheduler_status."""
        return self.published / "scheduler.json"

    @property
    def budgets(self) -> Path:
        """Each [[budgets]]'s spend in its period and the spool files it covers, written by the
        scheduler after every ingest (engine.store.budgets) for the gateway's hard cap and the
        dashboard (engine.published.budgets reads it)."""
        return self.published / "budgets.json"

    @property
    def database(self) -> Path:
        return self.root / "switchover.duckdb"

    @property
    def published(self) -> Path:
        return self.root / "published"

    @property
    def archive(self) -> Path:
        """Attempts older than `[store] keep_attempts_days`, moved out of the database by the
        scheduler (engine.store.retention): a folder a month, a Parquet part a day."""
        return self.root / "archive"

    @property
    def control(self) -> Path:
        """Requests to the scheduler from other processes (silences): files it takes in."""
        return self.root / "control"

    @property
    def target_switches(self) -> Path:
        """Targets an operator disabled (engine.fallback.order), read by every gateway process."""
        return self.control / "targets.json"

    @property
    def evals_inbox(self) -> Path:
        """Eval runs (`switchover eval`) waiting for the scheduler to take them in."""
        return self.control / "evals"

    @property
    def drills_inbox(self) -> Path:
        """Drill records (engine.state.drills) waiting for the scheduler to take them in."""
        return self.control / "drills"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def breaker_states(self) -> Path:
        """The breakers every process of this host that records here shares, when no Redis is
        configured (engine.state.breaker_sqlite): written by them all, never by the scheduler."""
        return self.root / "state" / "breakers.sqlite"

    @property
    def demo_config(self) -> Path:
        """The configuration `switchover up --demo` runs on: the demo routes on that run's fake
        providers (simulations.demo.up), for the commands run beside it (`switchover ask`,
        `switchover targets`)."""
        return self.root / "demo-runtime.toml"

    @property
    def logs(self) -> Path:
        """The output of the processes `switchover up` starts, one file per process, so that
        its console says only what changed (engine.cli.supervisor)."""
        return self.root / "logs"


def recorder_status_dir(spool: Path) -> Path:
    """The status folder of the recorders writing to `spool` (a recorder knows only its spool)."""
    return Path(spool).parent / "recorder-status"


def recorder_status_fallback_dir(spool: Path) -> Path:
    return Path(spool) / ".status"  # dot-prefixed: ingest and telemetry_lag skip it
