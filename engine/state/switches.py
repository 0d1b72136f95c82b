"""Operator switches: targets turned off by hand during an incident, and fault drills.

    disable / enable         a target skipped by a route (or every route) until enabled
    start_drill / end_drill  a target that fails on one route, as if its key were invalid,
                             until the drill ends (engine.runtime.drills; `switchover drill`)

This module holds the switch itself and what every keeper of switches answers (`Switches`).
They are kept in `data/control/targets.json` (`TargetSwitches`, engine.state.switches_file:
every process of the host), or in a Redis hash when `[state] redis_url` is set
(`RedisTargetSwitches`, engine.state.switches_redis: every host), so that an admin endpoint or
the CLI in one process reaches every gateway worker. Both have the same async methods. Reads
sit on the request path: cheap (one stat, or a Redis read cached ~1 s) and never raising; a
missing or unreadable file or an unreachable Redis means "nothing switched" (or the last
switches known). A drill past its end is ignored even when nobody ended it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

Kind = Literal["disabled", "drill"]


@dataclass(frozen=True, slots=True)
class Switch:
    """A target turned off, for one route or (`route=None`) for every route; or, for a drill,
    made to fail on one route until `until`."""

    target: str
    route: str | None
    reason: str
    by: str
    since: datetime
    kind: Kind = "disabled"
    until: datetime | None = None  # a drill's planned end
    drill_id: str | None = None
    # A drill's pre-flight (engine.runtime.drills): started over its refusal, and what it found
    # wrong with the route's other targets. Kept with the switch so that whichever process ends
    # the drill writes the whole record.
    forced: bool = False
    preflight: str | None = None

    @classmethod
    def drill(
        cls,
        target: str,
        *,
        route: str,
        until: datetime,
        drill_id: str,
        by: str,
        now: datetime,
        forced: bool = False,
        preflight: str | None = None,
    ) -> Switch:
        """The switch of drill `drill_id`: `target` fails on `route` from `now` until `until`."""
        reason = f"drill {drill_id}"
        return cls(target, route, reason, by, now, "drill", until, drill_id, forced, preflight)

    @property
    def key(self) -> tuple[str, str | None, str]:
        return self.target, self.route, self.kind

    def as_dict(self) -> dict[str, Any]:
        body = {**asdict(self), "since": self.since.isoformat()}
        body["until"] = self.until.isoformat() if self.until else None
        if self.kind != "drill":  # a disabled target's entry keeps the shape it always had
            del body["forced"], body["preflight"]
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Switch:
        target, route = data["target"], data.get("route")
        kind = data.get("kind", "disabled")  # files written before drills existed
        if not isinstance(target, str) or not target or not isinstance(route, str | None):
            raise ValueError(f"not a target switch: {data!r}")
        if kind not in ("disabled", "drill"):
            raise ValueError(f"not a kind of switch: {kind!r}")
        since = datetime.fromisoformat(data["since"])
        until = datetime.fromisoformat(data["until"]) if data.get("until") else None
        drill_id, preflight = data.get("drill_id"), data.get("preflight")
        return cls(
            target,
            route,
            str(data.get("reason", "")),
            str(data.get("by", "")),
            since,
            kind,
            until,
            drill_id if isinstance(drill_id, str) else None,
            data.get("forced") is True,
            preflight if isinstance(preflight, str) else None,
        )


class Switches(Protocol):
    async def disable(
        self, target: str, *, route: str | None = None, reason: str = "", by: str = ""
    ) -> None: ...

    async def enable(self, target: str, *, route: str | None = None) -> None: ...

    async def disabled(self, route: str) -> frozenset[str]:
        """Targets disabled for `route` or everywhere. On the request path: cheap, never raises."""

    async def entries(self) -> list[dict[str, Any]]:
        """Every switch: target, route (None: everywhere), reason, by, since (ISO time), kind,
        and for a drill its `until`, `drill_id`, `forced` and `preflight`."""

    async def start_drill(
        self,
        target: str,
        *,
        route: str,
        until: datetime,
        drill_id: str,
        by: str = "",
        forced: bool = False,
        preflight: str | None = None,
    ) -> None: ...

    async def end_drill(self, target: str, *, route: str) -> None: ...

    async def drilled(self, route: str) -> dict[str, datetime]:
        """Targets under a drill on `route` now, with the drill's end. Request path: cheap."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def disabled_for(switches: Sequence[Switch], route: str) -> frozenset[str]:
    """What every keeper's `disabled` answers, from the switches it holds."""
    return frozenset(
        s.target for s in switches if s.kind == "disabled" and (s.route is None or s.route == route)
    )


def drilled_for(switches: Sequence[Switch], route: str, now: datetime) -> dict[str, datetime]:
    """What every keeper's `drilled` answers: the drills of `route` not past their end."""
    return {
        s.target: s.until
        for s in switches
        if s.kind == "drill" and s.route == route and s.until is not None and s.until > now
    }


def updated(old: Switch | None, new: Switch) -> Switch:
    """Disabling again updates the reason and who, but keeps when it was first disabled."""
    return new if old is None else replace(new, since=old.since)


def sort_key(s: Switch) -> tuple[str, str, str]:
    """The order switches are listed and kept in: by target, route, kind."""
    return s.target, s.route or "", s.kind
