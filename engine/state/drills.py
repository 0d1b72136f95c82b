"""A fault drill's record: a target forced to fail on one route, as if its key were invalid, for
a while, to see the switch happen before an incident does it (the drill itself is run on an
engine by engine.runtime.drills; `switchover drill`).

    the record    control/drills/<id>.json, written when the drill starts and again when it
                  ends (engine.state.control), taken in by the scheduler
                  (engine.store.eval_drill_inbox), which writes the drill's report once its
                  attempts are in

A drill is exercise, not an incident: its attempts are `fault_kind = "drill"` (not an account
fault), incident detection leaves its fallbacks out, and the breaker it holds open is no
alert; a real failure during it still alerts, marked "during drill <id>". The scheduler reads
these records without the engine's providers: this module imports nothing of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from engine.core.paths import DataPaths
from engine.state import control


@dataclass(frozen=True, slots=True)
class Drill:
    drill_id: str
    route: str
    target: str
    started_at: datetime
    ends_at: datetime
    requested_by: str
    ended_at: datetime | None = None
    forced: bool = False  # started although the pre-flight refused
    preflight: str | None = None  # what the pre-flight found wrong with the other targets
    ended_reason: str | None = None  # why it ended before its planned end, when it aborted
    aborted_by_request: str | None = None  # the request that failed and ended it

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        for key in ("started_at", "ends_at", "ended_at"):
            body[key] = body[key].isoformat() if body[key] else None
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Drill:
        def when(key: str) -> datetime | None:
            return datetime.fromisoformat(body[key]) if body.get(key) else None

        def text(key: str) -> str | None:  # records written before the field existed lack it
            return str(body[key]) if body.get(key) is not None else None

        started, ends = when("started_at"), when("ends_at")
        if started is None or ends is None:
            raise ValueError("a drill needs started_at and ends_at")
        return cls(
            str(body["drill_id"]),
            str(body["route"]),
            str(body["target"]),
            started,
            ends,
            str(body.get("requested_by", "")),
            when("ended_at"),
            body.get("forced") is True,
            text("preflight"),
            text("ended_reason"),
            text("aborted_by_request"),
        )

    @classmethod
    def from_switch(cls, entry: Mapping[str, Any]) -> Drill:
        """A running drill from its switch (`Switches.entries`): what it was started with."""
        return cls(
            entry["drill_id"],
            entry["route"],
            entry["target"],
            datetime.fromisoformat(entry["since"]),
            datetime.fromisoformat(entry["until"]),
            entry.get("by", ""),
            forced=entry.get("forced") is True,
            preflight=entry.get("preflight"),
        )


def write_drill(paths: DataPaths, drill: Drill) -> None:
    """The drill's record for the scheduler (a control-plane request: engine.state.control);
    the end's record replaces the start's if the scheduler has not taken that in yet."""
    control.submit(paths.drills_inbox, drill.drill_id, drill.as_json())
