"""Fault drills: a target forced to fail on one route, as if its key were invalid, for a while,
to see the switch happen before an incident does it.

    start_drill   a drill switch (engine.switches) that every gateway process reads: the
                  chain raises DrillFault for that target before any call, falls back now,
                  and the breaker holds it open until the drill's end
    end_drill     the switch removed; the breaker's next probe restores the target
    the record    control/drills/<id>.json, taken in by the scheduler (engine.store.readiness),
                  which writes the drill's report once its attempts are in

A drill is exercise, not an incident: its attempts are `fault_kind = "drill"` (not an account
fault), incident detection skips its route's minutes, and alerts on its route and target are
held while it runs. A drill nobody ends stops at its planned end anyway.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from engine.paths import DataPaths

if TYPE_CHECKING:  # the scheduler reads drill records without the engine's providers
    from engine.switchover import Switchover

MAX_DRILL = timedelta(hours=2)


class DrillError(ValueError):
    """A drill that cannot start or end; the message says why."""


@dataclass(frozen=True, slots=True)
class Drill:
    drill_id: str
    route: str
    target: str
    started_at: datetime
    ends_at: datetime
    requested_by: str
    ended_at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        for key in ("started_at", "ends_at", "ended_at"):
            body[key] = body[key].isoformat() if body[key] else None
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Drill:
        def when(key: str) -> datetime | None:
            return datetime.fromisoformat(body[key]) if body.get(key) else None

        started, ends = when("started_at"), when("ends_at")
        if started is None or ends is None:
            raise ValueError("a drill needs started_at and ends_at")
        return cls(str(body["drill_id"]), str(body["route"]), str(body["target"]), started,
                   ends, str(body.get("requested_by", "")), when("ended_at"))  # fmt: skip


def write_drill(paths: DataPaths, drill: Drill) -> None:
    """The drill's record for the scheduler, written aside and renamed (never read half)."""
    folder = paths.drills_inbox
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{drill.drill_id}.{uuid.uuid4().hex[:6]}.tmp"
    tmp.write_text(json.dumps(drill.as_json()))
    os.replace(tmp, folder / f"{drill.drill_id}.json")


async def start_drill(
    sw: Switchover, route: str, target: str, duration: timedelta, *, by: str, now: datetime
) -> Drill:
    if sw.switches is None or sw.paths is None:
        raise DrillError("drills need the gateway's data folder (switches and the scheduler)")
    config = sw.config.routes.get(route)
    if config is None:
        raise DrillError(f"unknown route {route!r} (routes: {', '.join(sorted(sw.config.routes))})")
    names = [t.name for t in config.targets]
    if target not in names:
        raise DrillError(f"unknown target {target!r} for route {route} ({', '.join(names)})")
    if len(names) < 2:
        raise DrillError(f"route {route} has no backup: a drill would fail all its requests")
    if not timedelta(0) < duration <= MAX_DRILL:
        raise DrillError(f"a drill lasts more than 0 s and at most {MAX_DRILL}")
    if target in await sw.switches.drilled(route):
        raise DrillError(f"{target} is already under a drill on route {route}")
    drill = Drill(uuid.uuid4().hex[:12], route, target, now, now + duration, by)
    write_drill(sw.paths, drill)  # first: a drill that ran must be known to the scheduler
    await sw.switches.start_drill(
        target, route=route, until=drill.ends_at, drill_id=drill.drill_id, by=by
    )
    return drill


async def active_drills(sw: Switchover) -> list[Drill]:
    if sw.switches is None:
        return []
    return [_from_switch(e) for e in await sw.switches.entries() if e.get("kind") == "drill"]


async def end_drill(sw: Switchover, drill_id: str, *, now: datetime) -> Drill:
    """End a running drill now (the target is restored by its breaker's next probe)."""
    drill = next((d for d in await active_drills(sw) if d.drill_id == drill_id), None)
    if drill is None:
        raise DrillError(f"no running drill {drill_id!r}")
    assert sw.switches is not None and sw.paths is not None
    await sw.switches.end_drill(drill.target, route=drill.route)
    ended = replace(drill, ended_at=min(now, drill.ends_at))
    write_drill(sw.paths, ended)
    return ended


def _from_switch(entry: dict[str, Any]) -> Drill:
    return Drill(
        entry["drill_id"],
        entry["route"],
        entry["target"],
        datetime.fromisoformat(entry["since"]),
        datetime.fromisoformat(entry["until"]),
        entry.get("by", ""),
    )
