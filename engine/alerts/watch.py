"""One pass of alerting, run by the scheduler after each cycle's rollups: take in silences,
evaluate every rule, mark what fired during a fault drill, move the alerts' states, refresh the
incidents (once a minute), and hand due notifications to the sender. Every step is on the
scheduler's connection and thread except the HTTP calls, which the outbox's sender thread
makes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from engine.alerts import lifecycle
from engine.alerts.conditions import Context, evaluate
from engine.alerts.delivery import Outbox
from engine.alerts.drill_marks import mark_drills
from engine.alerts.incident_evidence import Evidence
from engine.alerts.incidents import IncidentPolicy, refresh_incidents
from engine.alerts.silences import ingest_silences
from engine.config.alerting import AlertingConfig
from engine.core.paths import DataPaths

log = logging.getLogger("switchover.alerts")

INCIDENTS_EVERY = timedelta(seconds=60)
# A pass looks again at the incidents that begin this long before the minutes refreshed since
# the last one (and at any not yet final, however old): a window can only grow from its end.
LOOK_BACK = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class WatchReport:
    changes: list[lifecycle.Change]
    silences: int  # silence requests taken in
    incidents: int | None  # incidents after a refresh; None when not refreshed this pass
    handed_over: int  # notifications given to the sender

    @property
    def changed(self) -> bool:
        """Whether the published alert and incident snapshots are out of date."""
        return bool(self.changes or self.silences or self.incidents is not None)


class Watch:
    def __init__(
        self,
        config: AlertingConfig,
        paths: DataPaths,
        *,
        outbox: Outbox | None = None,
        incidents: IncidentPolicy | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.paths = paths
        self.outbox = outbox or Outbox(config.receivers)
        self.incident_policy = incidents or IncidentPolicy(
            settle=timedelta(seconds=config.incident_settle_s)
        )
        self.wall = wall
        self._incidents_at: datetime | None = None
        self._evidence = Evidence()  # the incidents' minutes, read again only where refreshed
        # The earliest minute refreshed since the last incident pass; everything when unknown
        # (the first pass of a process, a cycle that could not say).
        self._refreshed_from: datetime | None = None
        self._refreshed_all = True

    def run(
        self,
        con: duckdb.DuckDBPyConnection,
        now: datetime,
        *,
        late: bool = False,
        refreshed_from: datetime | None = None,
    ) -> WatchReport:
        """`late`: older attempts arrived, so the incidents are recomputed now.
        `refreshed_from`: the minute rollups this cycle refreshed begin there (None: unknown,
        so the incidents' evidence is read whole at their next refresh)."""
        self._evidence.refreshed(refreshed_from)
        if refreshed_from is None:
            self._refreshed_all = True
        elif self._refreshed_from is None or refreshed_from < self._refreshed_from:
            self._refreshed_from = refreshed_from
        silences = ingest_silences(con, self.paths)
        context = Context(
            con,
            now,
            self.paths.spool,
            self.wall,
            self.config.key_envs,
            self.config.budgets,
            self.paths.archive,
        )
        evaluated = mark_drills(con, evaluate(self.config.rules, context), now)
        changes = lifecycle.apply(con, self.config, evaluated, now)
        incidents = None
        due = self._incidents_at is None or now - self._incidents_at >= INCIDENTS_EVERY
        if due or late:
            since = None
            if not self._refreshed_all:
                since = (self._refreshed_from or now) - LOOK_BACK
            incidents = refresh_incidents(
                con, now, self.incident_policy, evidence=self._evidence, since=since
            )
            self._incidents_at = now
            self._refreshed_from, self._refreshed_all = None, False
        handed = self.outbox.dispatch(con, now)
        return WatchReport(changes, silences, incidents, handed)

    def close(
        self, con: duckdb.DuckDBPyConnection | None = None, now: datetime | None = None
    ) -> None:
        """Stop the outbox's sender; given the connection, record the deliveries it finished
        (engine.alerts.delivery.Outbox.close)."""
        self.outbox.close(con=con, now=now)
