"""Alerts during a fault drill are marked, never held.

A drill makes one target fail on one route on purpose; what it makes fail for real (requests
that find every other target down) is a real failure that someone must hear about. So an alert
about a drilled route or target fires and is sent as usual, and its summary says which drill
ran in its window, so the person reading it knows where to look first: "during drill 3f2a…"
while the drill runs or when requests of its route failed while it ran, "after drill 3f2a…"
when the drill had ended before anything failed (a failure a minute later is not the drill's).
The drill's own effects are not alerts at all: its fallbacks are left out of the fallback rate,
the breaker it holds open out of `breaker_open` (engine.alerts.conditions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import duckdb

from engine.alerts.context import Observation

# A drill is said to be behind an alert this long after its end too: the breaker it held
# open lets its probe through on the next request, and the rule's window still holds its minutes.
AFTER = timedelta(minutes=2)

_DRILLS = """
SELECT drill_id, route, target, started_at, coalesce(ended_at, ends_at) AS until
FROM drills WHERE started_at <= $now AND coalesce(ended_at, ends_at) >= $since
ORDER BY started_at, drill_id
"""
# Requests of the drill's route that no target answered, among those begun while it ran (a
# drill that ends itself does so at the end of the first such request: begun before its end).
_FAILED_WHILE = """
SELECT count(*) FROM (
    SELECT request_id FROM attempts
    WHERE route = $route AND started_at >= $started AND started_at <= $until
    GROUP BY request_id HAVING NOT bool_or(outcome = 'success')
)
"""


def mark_drills(
    con: duckdb.DuckDBPyConnection,
    evaluated: Mapping[str, Sequence[Observation]],
    now: datetime,
) -> dict[str, list[Observation]]:
    """`evaluated` with "during drill <id>" in the summary of every observation about a route
    or target that a drill held down within the observation's window."""
    longest = max((o.rule.window_s for obs in evaluated.values() for o in obs), default=0)
    drills = con.execute(
        _DRILLS, {"now": now, "since": now - timedelta(seconds=longest) - AFTER}
    ).fetchall()
    if not drills:
        return {rule: list(obs) for rule, obs in evaluated.items()}
    marked: dict[str, list[Observation]] = {}
    for rule, observations in evaluated.items():
        marked[rule] = []
        for obs in observations:
            since = now - timedelta(seconds=obs.rule.window_s) - AFTER
            notes = [
                _note(con, drill_id, route, target, started, until, now)
                for drill_id, route, target, started, until in drills
                if until >= since and (route in obs.names or target in obs.names)
            ]
            marked[rule].append(
                replace(obs, summary=obs.summary + "".join(notes)) if notes else obs
            )
    return marked


def _note(
    con: duckdb.DuckDBPyConnection,
    drill_id: str,
    route: str,
    target: str,
    started: datetime,
    until: datetime,
    now: datetime,
) -> str:
    if until > now:
        when = f"since {started:%H:%M:%S} UTC"
    elif until - started < timedelta(minutes=1):  # it ended itself at once (engine.state.drills)
        when = f"{started:%H:%M:%S}–{until:%H:%M:%S} UTC"
    else:
        when = f"{started:%H:%M}–{until:%H:%M} UTC"
    running = until > now
    failed = con.execute(_FAILED_WHILE, {"route": route, "started": started, "until": until})
    during = running or failed.fetchone()[0] > 0
    return (
        f"; {'during' if during else 'after'} drill {drill_id} "
        f"({target} held down on route {route} {when})"
    )
