"""A fault drill's report, written into the store once its attempts are in: what the drill
showed, from its start to its end, and whether it passed. Runs in the scheduler, the only
writer; the drill records themselves come in through engine.store.eval_drill_inbox.

A drill's report waits until `REPORT_AFTER` past its end, so that the spool has brought in its
last attempts and the first requests after it (which show whether the target was restored).
A report that does not pass says why (`why`): the drill aborted itself after a request failed,
the failed requests it caused, what its pre-flight had found (and whether it was forced past
it), or that no backup answered.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb

from engine.core.money import format_change
from engine.state.drills import Drill

log = logging.getLogger("switchover.scheduler")

REPORT_AFTER = timedelta(seconds=20)


_DUE = """
    SELECT drill_id, route, target, started_at, ends_at, requested_by,
        coalesce(ended_at, ends_at), coalesce(forced, false), preflight, ended_reason,
        aborted_by_request
    FROM drills
    WHERE status <> 'reported' AND coalesce(ended_at, ends_at) + $after <= $now
"""
_REQUESTS = """
    WITH req AS (
        SELECT request_id, min(started_at) AS first,
            arg_max(target, served::INT * 100000 + attempt_number) AS target,
            bool_or(served AND outcome = 'success') AS answered,
            bool_or(decision = 'fail_fast') AS request_fault,
            bool_or(outcome = 'cancelled') AS abandoned
        FROM attempts
        WHERE route = $route AND started_at >= $lo - INTERVAL 5 MINUTE
          AND started_at < $hi + INTERVAL 5 MINUTE
        GROUP BY request_id
    )
    SELECT target, answered, request_fault OR abandoned AS not_ours, count(*)::BIGINT
    FROM req
    -- the request that aborted the drill is its own, even when it began at the instant the
    -- drill ended (a virtual clock's zero latency)
    WHERE first >= $lo AND (first < $hi OR request_id = $aborted_by)
    GROUP BY ALL
"""
_DRILL_FAULTS = """
    SELECT count(*) FROM attempts
    WHERE route = $route AND target = $target AND fault_kind = 'drill'
      AND started_at >= $lo AND started_at <= $hi
"""
_OPENED = """
    SELECT min(occurred_at) FROM breaker_events
    WHERE target = $target AND to_status = 'open' AND occurred_at >= $lo AND occurred_at < $hi
"""
_RESTORED = """
    SELECT min(started_at) FROM attempts
    WHERE route = $route AND target = $target AND outcome = 'success' AND served
      AND started_at >= $hi
"""
_MONEY = """
    SELECT coalesce(sum(cost_usd), 0),
        coalesce(sum(fallback_premium_usd), 0) + coalesce(sum(rewarm_usd), 0)
    FROM rollup_minute
    WHERE route = $route AND bucket >= time_bucket(INTERVAL 1 MINUTE, $lo::TIMESTAMPTZ)
      AND bucket < $hi
"""


def _query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> Any:
    """`sql` with the parameters it names (DuckDB refuses unused ones)."""
    return con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})


def report_drills(con: duckdb.DuckDBPyConnection, now: datetime) -> int:
    """Write the report of every drill whose end is `REPORT_AFTER` behind; how many."""
    due = con.execute(_DUE, {"now": now, "after": REPORT_AFTER}).fetchall()
    for row in due:
        drill = Drill(*row)  # _DUE selects the columns in the record's field order
        report = drill_report(con, drill)
        con.execute(
            "UPDATE drills SET status = 'reported', report = $report, "
            "ended_at = coalesce(ended_at, ends_at) WHERE drill_id = $id",
            {"report": json.dumps(report), "id": drill.drill_id},
        )
        log.info(
            "drill %s on %s/%s: %s", drill.drill_id, drill.route, drill.target, report["summary"]
        )
    return len(due)


def drill_report(con: duckdb.DuckDBPyConnection, drill: Drill) -> dict[str, Any]:
    """What `drill` showed, from its start to its end (ended or planned; docs/metrics.md)."""
    route, target, lo = drill.route, drill.target, drill.started_at
    hi = drill.ended_at or drill.ends_at
    params = {"route": route, "target": target, "lo": lo, "hi": hi,
              "aborted_by": drill.aborted_by_request}  # fmt: skip
    served_by: dict[str, int] = {}
    requests = failed = 0
    for served, answered, not_ours, n in _query(con, _REQUESTS, params).fetchall():
        requests += n
        if answered:
            served_by[served] = served_by.get(served, 0) + n
        elif not not_ours:
            failed += n
    (drill_faults,) = _query(con, _DRILL_FAULTS, params).fetchone()
    (opened,) = _query(con, _OPENED, params).fetchone()
    (back,) = _query(con, _RESTORED, params).fetchone()
    cost, difference = _query(con, _MONEY, params).fetchone()
    by_backups = sum(n for t, n in served_by.items() if t != target)
    restored = None if back is None else True  # no answer after it yet: not known
    aborted = drill.aborted_by_request is not None
    if aborted or (requests > 0 and (failed > 0 or by_backups == 0)):
        verdict = "failed"
    else:
        verdict = "passed" if requests else "no traffic"
    report = {
        "requests": requests,
        "served_by": served_by,
        "served_by_backups": by_backups,
        "failed": failed,
        "drill_faults": drill_faults,
        "breaker_opened_after_s": None if opened is None else (opened - lo).total_seconds(),
        "cost_usd": str(cost),
        "primary_estimate_usd": str(cost - difference),
        "cost_difference_usd": str(difference),
        "restored": restored,
        "restored_after_s": None if back is None else (back - hi).total_seconds(),
        "verdict": verdict,
        "aborted": aborted,
        "ended_reason": drill.ended_reason,
        "aborted_by_request": drill.aborted_by_request,
        "forced": drill.forced,
        "preflight": drill.preflight,
    }
    report["why"] = _why(report, drill) if verdict == "failed" else []
    figures = _summary(report, target)
    report["summary"] = f"{'; '.join(report['why'])}. {figures}" if report["why"] else figures
    return report


def _why(r: dict[str, Any], drill: Drill) -> list[str]:
    """Why a drill failed, most telling first; never empty for a failed drill."""
    why = []
    if drill.aborted_by_request is not None:
        why.append(
            f"aborted after request {drill.aborted_by_request} failed: every provider unavailable"
        )
    if r["failed"]:
        one = r["failed"] == 1
        why.append(
            f"{r['failed']} request{'' if one else 's'} failed with every provider "
            f"unavailable: the drill caused {'it' if one else 'them'}"
        )
    if drill.preflight:
        lead = (
            "started with --force although no other target was healthy"
            if drill.forced
            else "at its start"
        )
        why.append(f"{lead}: {drill.preflight}")
    own = r["served_by"].get(drill.target, 0)
    theirs = r["requests"] - r["served_by_backups"] - own - r["failed"]
    if r["served_by_backups"] == 0 and (own or theirs):
        parts = []
        if own:
            parts.append(f"{own} answered by {drill.target} itself, before the drill took effect")
        if theirs:
            parts.append(f"{theirs} the callers' own faults or abandoned")
        why.append(f"no request was answered by a backup: {', '.join(parts)}")
    return why or ["no request of the route was answered by a backup"]


def _difference(r: dict[str, Any]) -> str:
    """ "the backups saved $0.0025" (or "cost $0.0022 more"): against the primary's prices."""
    change = format_change(Decimal(r["cost_difference_usd"]))
    return "no cost difference" if change == "no difference" else f"the backups {change}"


def _summary(r: dict[str, Any], target: str) -> str:
    if r["requests"] == 0:
        return f"no request reached the route while {target} was drilled: nothing was shown"
    share = 100 * r["served_by_backups"] / r["requests"]
    opened = r["breaker_opened_after_s"]
    breaker = f"breaker open after {opened:.1f} s" if opened is not None else "breaker never opened"
    back = (
        f"restored {r['restored_after_s']:.1f} s after"
        if r["restored"]
        else "not seen serving since"
    )
    return (
        f"{r['served_by_backups']} of {r['requests']} requests ({share:.0f} %) served by the "
        f"backups, {r['failed']} failed; {breaker}; {_difference(r)}; {target} {back}"
    )
