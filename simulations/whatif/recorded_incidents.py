"""The recorded incidents a what-if replays (simulations.whatif.from_store): which can be replayed,
those in a window, the routes they touched, and the faults their minutes show
(simulations.whatif.fault_schedule). Read from the published snapshots, never the database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from engine.config import Config
from engine.core.errors import ConfigError
from engine.core.fault_families import BY_NAME
from engine.published.read import PublishedData
from simulations.whatif.fault_schedule import FaultMinute, faults_of
from simulations.whatif.scenario import Fault


def replayable_incidents(published: PublishedData, since: datetime | None = None) -> pd.DataFrame:
    """The incidents `scenario_from_incident` can replay (ended, about one target, their
    minutes published), newest first: the `incidents` snapshot's columns."""
    return published.query("replayable_incidents", since=since)


def incident(published: PublishedData, incident_id: str) -> pd.Series:
    """The replayable incident `incident_id`; a ConfigError saying why when there is none."""
    replayable = replayable_incidents(published)
    found = replayable[replayable["incident_id"] == incident_id]
    if not found.empty:
        return found.iloc[0]
    known = published.query("incidents", since=datetime(1970, 1, 1, tzinfo=UTC))
    if incident_id in set(known["incident_id"]):
        raise ConfigError(
            f"incident {incident_id} cannot be replayed yet: it is ongoing, older than the 35 "
            "days the store keeps minute by minute, or its minutes are not published yet (the "
            "scheduler publishes them within a minute of its end)"
        )
    recent = ", ".join(replayable["incident_id"].head(3)) or "none yet"
    raise ConfigError(f"no incident {incident_id!r} (the latest replayable: {recent})")


def overlapping(published: PublishedData, start: datetime, end: datetime) -> pd.DataFrame:
    """The replayable incidents that overlap [start, end)."""
    incidents = replayable_incidents(published)
    return incidents[
        (incidents["started_at"] < pd.Timestamp(end))
        & (incidents["ended_at"] > pd.Timestamp(start))
    ]


def touched_routes(incidents: pd.DataFrame, chain: Config, incident_id: str) -> tuple[str, ...]:
    """The routes of `incidents` that `chain` still has: those they touched, and those whose
    primary their target is."""
    targets = set(incidents["target"])
    named = {r.strip() for routes in incidents["routes"] for r in routes.split(",")}
    routes = tuple(
        name
        for name, route in chain.routes.items()
        if name in named or route.targets[0].name in targets
    )
    if not routes:
        raise ConfigError(
            f"incident {incident_id}: none of the routes it touched ({', '.join(sorted(named))}) "
            f"is in {chain.source.split(',')[0]} any more"
        )
    return routes


def recorded_faults(
    published: PublishedData, incidents: pd.DataFrame, start: datetime, end: datetime
) -> list[Fault]:
    """The faults of `incidents` in [start, end): per target and fault family, the minutes of
    all its incidents there (neighbours overlap, each minute counts once)."""
    minutes = published.query("incident_minutes", incident_ids=list(incidents["incident_id"]))
    faults = []
    for (target, family), group in incidents.groupby(["target", "family"]):
        mine = minutes[minutes["incident_id"].isin(group["incident_id"])]
        mine = mine.drop_duplicates(["bucket", "fault_kind", "error_class"])
        kinds = BY_NAME[family].fault_kinds
        faults += faults_of(target, _fault_minutes(mine), start=start, end=end, kinds=kinds)
    return sorted(faults, key=lambda f: (f.start_s, f.target, f.kind))


def _fault_minutes(frame: pd.DataFrame) -> list[FaultMinute]:
    def text(value: object) -> str | None:
        return None if pd.isna(value) else str(value)

    return [
        FaultMinute(
            row.bucket.to_pydatetime(),
            int(row.calls),
            int(row.failed),
            text(row.fault_kind),
            text(row.error_class),
            int(row.failures),
            None if pd.isna(row.retry_after_s) else float(row.retry_after_s),
            # published by a scheduler from before issue 34 when absent: no held evidence
            int(getattr(row, "wanted", 0)),
            int(getattr(row, "held", 0)),
        )
        for row in frame.itertuples()
    ]
