"""Fault drills run on an engine: a target forced to fail on one route, as if its key were
invalid, for a while, to see the switch happen before an incident does it.

    start_drill   after a pre-flight: refused, with the reason, when no other target of the
                  route is healthy now (engine.state.target_health), unless forced; then a drill
                  switch (engine.state.switches) that every gateway process reads: the chain
                  raises DrillFault for that target before any call, falls back now, and the
                  breaker holds it open until the drill's end
    SelfAbort     the event hook that ends the drill at the first request of its route that
                  fails with every provider unavailable (the drilled target among the causes)
    end_drill     the switch removed; the breaker's next probe restores the target

Each start and end writes the drill's record for the scheduler (engine.state.drills), which
writes the drill's report once its attempts are in.

A drill must not become an outage: the pre-flight keeps it from starting without a healthy
backup, and the self-abort stops it at the first request it made fail. A drill nobody ends
stops at its planned end anyway.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from engine.config import Config
from engine.core.clock import Clock
from engine.core.paths import DataPaths
from engine.fallback.chain import ChainEvent
from engine.state.drills import Drill, write_drill
from engine.state.switches import Switches
from engine.state.target_health import TargetHealth

log = logging.getLogger("switchover.drills")

MAX_DRILL = timedelta(hours=2)


class DrillError(ValueError):
    """A drill that cannot start or end; the message says why."""


class DrillRefused(DrillError):
    """The pre-flight found no other target of the route healthy: the drill would fail real
    requests. `problems` names each other target and what is wrong with it."""

    def __init__(self, route: str, problems: list[str]) -> None:
        super().__init__(
            f"pre-flight: no other target of route {route} is healthy now, so the drill would "
            f"fail real requests: {'; '.join(problems)}. Start it anyway with --force "
            '(admin API: "force": true); it still ends itself at the first request that fails.'
        )
        self.problems = problems


class Host(Protocol):
    """What a drill needs of the engine it runs on (a `Switchover`): its routes, where its
    switches and records are kept, what it knows of its targets' health, and its clock."""

    config: Config
    paths: DataPaths | None
    switches: Switches | None
    health: TargetHealth
    clock: Clock


async def start_drill(
    sw: Host,
    route: str,
    target: str,
    duration: timedelta,
    *,
    by: str,
    now: datetime,
    force: bool = False,
) -> Drill:
    """Start a drill of `target` on `route`, or raise DrillError saying why not (DrillRefused:
    the pre-flight found no healthy other target, and `force` was not given)."""
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
    problems, healthy = await preflight(sw, route, target)
    if not healthy and not force:
        raise DrillRefused(route, problems)
    drill = Drill(
        uuid.uuid4().hex[:12],
        route,
        target,
        now,
        now + duration,
        by,
        forced=not healthy,
        preflight="; ".join(problems) or None,
    )
    write_drill(sw.paths, drill)  # first: a drill that ran must be known to the scheduler
    await sw.switches.start_drill(
        target,
        route=route,
        until=drill.ends_at,
        drill_id=drill.drill_id,
        by=by,
        forced=drill.forced,
        preflight=drill.preflight,
    )
    return drill


async def preflight(sw: Host, route: str, target: str) -> tuple[list[str], bool]:
    """Each other target of `route` that is not healthy now, as "backup claude/x: breaker open
    (account), ..."; and whether at least one other target is healthy."""
    names = [t.name for t in sw.config.routes[route].targets]
    problems, healthy = [], False
    for name in names:
        if name == target:
            continue
        found = await sw.health.problems(route, name)
        if found:
            role = "primary" if name == names[0] else "backup"
            problems.append(f"{role} {name}: {', '.join(found)}")
        else:
            healthy = True
    return problems, healthy


async def active_drills(sw: Host) -> list[Drill]:
    if sw.switches is None:
        return []
    return [Drill.from_switch(e) for e in await sw.switches.entries() if e.get("kind") == "drill"]


async def end_drill(
    sw: Host,
    drill_id: str,
    *,
    now: datetime,
    reason: str | None = None,
    aborted_by_request: str | None = None,
) -> Drill:
    """End a running drill now (the target is restored by its breaker's next probe). `reason`
    and `aborted_by_request` when it ends itself (SelfAbort)."""
    drill = next((d for d in await active_drills(sw) if d.drill_id == drill_id), None)
    if drill is None:
        raise DrillError(f"no running drill {drill_id!r}")
    assert sw.switches is not None and sw.paths is not None
    await sw.switches.end_drill(drill.target, route=drill.route)
    ended = replace(
        drill,
        ended_at=min(now, drill.ends_at),
        ended_reason=reason,
        aborted_by_request=aborted_by_request,
    )
    write_drill(sw.paths, ended)
    return ended


class SelfAbort:
    """The event hook that ends a drill at the first request of its route that fails with every
    provider unavailable while the drilled target was one of the causes (skipped or refused):
    from then on the drill is no longer an exercise but an outage it made. The end is the
    operator's end path, so the breaker the drill held lets the target's probe through on the
    next request. Awaited by the chain before the failing request's error goes out."""

    def __init__(self, sw: Host) -> None:
        self.sw = sw

    async def __call__(self, event: ChainEvent) -> None:
        if event.kind != "all_unavailable" or self.sw.switches is None:
            return
        drilled = await self.sw.switches.drilled(event.route)  # cheap: one stat, or cached
        hit = drilled.keys() & set(event.causes)
        if not hit:
            return
        for drill in await active_drills(self.sw):
            if drill.route != event.route or drill.target not in hit:
                continue
            reason = f"aborted: request {event.request_id} failed with every provider unavailable"
            try:
                await end_drill(
                    self.sw,
                    drill.drill_id,
                    now=self.sw.clock.wall(),
                    reason=reason,
                    aborted_by_request=event.request_id,
                )
            except DrillError:  # another request, or another worker, ended it first
                continue
            log.warning(
                "drill %s of %s on route %s %s", drill.drill_id, drill.target, drill.route, reason
            )
