"""What the Readiness page (and the Drills section of Incidents & alerts) show, computed from
the published frames: which eval run is a route's latest and which of its targets fall below
the route's minimum pass rate, what the drills found, and how often each target's answers
broke their contract. Pure functions of DataFrames, no Streamlit, as dashboard.metrics.

The pass rates themselves come computed from the `eval_scores` query (engine/published/queries.py),
the one definition the weekly report shares; definitions are docs/metrics.md's (Readiness).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pandas as pd

from engine.core.formats import format_duration
from engine.core.money import format_change, format_usd

BELOW, MET = "⚠ below minimum", "ok"
TARGET_COLUMNS = ["target", "role", "pass_rate", "passed", "latency_p50_ms", "cost_usd", "minimum"]


def routes(*frames: pd.DataFrame) -> list[str]:
    """Every route named in any of `frames` (eval runs, drills, route primaries), sorted."""
    return sorted({route for frame in frames for route in frame.get("route", [])})


def primary_of(primaries: pd.DataFrame, route: str) -> str | None:
    """The route's first target as last seen in its traffic; None before it has any."""
    rows = primaries[primaries["route"] == route] if len(primaries) else primaries
    return str(rows["target"].iloc[0]) if len(rows) else None


def latest_run(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the newest run in `scores` (one row a target), sorted by target."""
    if scores.empty:
        return scores
    newest = scores.sort_values(["started_at", "run_id"]).iloc[-1]["run_id"]
    return scores[scores["run_id"] == newest].sort_values("target").reset_index(drop=True)


def target_table(run: pd.DataFrame, primary: str | None) -> pd.DataFrame:
    """One row a target of one run: its role on the route, pass rate, passed/cases, p50 latency,
    what its cases cost, and whether it is below the route's minimum. The primary first."""
    if run.empty:
        return pd.DataFrame(columns=TARGET_COLUMNS)
    table = run.assign(
        role=[_role(t, primary) for t in run["target"]],
        passed=[f"{p}/{c}" for p, c in zip(run["passed"], run["cases"], strict=True)],
        minimum=run["below_minimum"].map({True: BELOW, False: MET}),
        order=[t != primary for t in run["target"]],
    )
    return table.sort_values(["order", "target"])[TARGET_COLUMNS].reset_index(drop=True)


def below_minimum(run: pd.DataFrame, primary: str | None) -> list[str]:
    """Sentences naming each target of the run below the route's minimum pass rate."""
    lines = []
    for row in run[run["below_minimum"]].sort_values("target").itertuples():
        role = _role(row.target, primary)
        stake = (
            "its own traffic is answered below the bar set for the route"
            if role == "primary"
            else "it would answer below the bar if it had to take the traffic"
        )
        lines.append(
            f"**{row.target}** ({role or 'target'}) passed {row.pass_rate:.0%} of the cases "
            f"({row.passed}/{row.cases}), below the route's minimum of {row.min_pass_rate:.0%}: "
            f"{stake}."
        )
    return lines


def history(scores: pd.DataFrame) -> pd.DataFrame:
    """Pass rate per run and target, oldest first; empty unless there was more than one run."""
    columns = ["started_at", "run_id", "target", "pass_rate"]
    if scores.empty or scores["run_id"].nunique() < 2:
        return pd.DataFrame(columns=columns)
    return scores.sort_values(["started_at", "target"])[columns].reset_index(drop=True)


def failed_cases(results: pd.DataFrame) -> pd.DataFrame:
    """The failed cases of a run: the case, the target, and why (its validator's reason, or
    the error of the call)."""
    columns = ["case", "target", "reason", "latency_ms"]
    failed = results[~results["passed"]] if len(results) else results
    if failed.empty:
        return pd.DataFrame(columns=columns)
    why = failed["reason"].where(failed["reason"].notna(), failed["error"]).fillna("")
    shown = failed.assign(case=failed["case_name"], reason=why)
    return shown.sort_values(["case", "target"])[columns].reset_index(drop=True)


def latest_report(drills: pd.DataFrame) -> pd.Series | None:
    """The newest drill that has its report; None before any has."""
    done = drills[drills["status"] == "reported"] if len(drills) else drills
    if done.empty:
        return None
    return done.sort_values(["started_at", "drill_id"]).iloc[-1]


def drill_why(drill: pd.Series) -> list[str]:
    """Why a reported drill failed: the scheduler's reasons (it aborted itself after a request
    failed, the failures it caused, what its pre-flight found), or the summary of a report
    written before reasons existed; empty unless the verdict is "failed"."""
    if drill.get("verdict") != "failed":
        return []
    report = _report(drill)
    reasons = [str(r) for r in report.get("why") or [] if r]
    summary = drill.get("summary")
    if not reasons and isinstance(summary, str) and summary:
        reasons = [summary]
    return reasons or ["the report gives no reason"]


def preflight_note(drill: pd.Series) -> str | None:
    """What the drill's pre-flight found wrong with the route's other targets when it started
    ("backup claude/x: breaker open (account)"), with "forced" when it was started over it."""
    report = _report(drill)
    found = report.get("preflight")
    if not isinstance(found, str) or not found:
        return None
    return (
        "started with --force although no other target was healthy: "
        if report.get("forced")
        else "at its start the pre-flight found: "
    ) + found


def _report(drill: pd.Series) -> dict:
    raw = drill.get("report")
    try:
        report = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def not_reported(drills: pd.DataFrame) -> pd.DataFrame:
    """Drills still running, or ended and waiting for their report, oldest first."""
    if drills.empty:
        return drills
    waiting = drills[drills["status"] != "reported"]
    return waiting.sort_values(["started_at", "drill_id"]).reset_index(drop=True)


def waiting_text(drill: Any, stamp: Callable[[datetime], str]) -> str:
    """The sentence for a drill row (a frame's itertuples) that has no report yet: running
    until its planned end, or ended, and why when it aborted itself."""
    ended = getattr(drill, "ended_at", None)
    running = ended is None or pd.isna(ended)
    parts = [f"until {stamp(drill.ends_at)}"] if running else [f"at {stamp(ended)}"]
    why = getattr(drill, "ended_reason", None)  # a snapshot from before migration 9 has none
    if not running and isinstance(why, str) and why:
        parts.append(why)
    parts.append(f"requested by {drill.requested_by}")
    return (
        f"A drill on **{drill.target}** {'is running' if running else 'has ended'} "
        f"({', '.join(parts)}): its report comes once its attempts are in."
    )


def drill_table(drills: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Drills with a readable duration (so far, while running) for the Incidents page."""
    columns = ["started_at", "route", "target", "duration", "status", "verdict", "summary"]
    if drills.empty:
        return pd.DataFrame(columns=columns)
    end = drills["ended_at"].fillna(pd.Timestamp(now))
    seconds = (end - drills["started_at"]).dt.total_seconds()
    duration = [
        duration_text(s) + ("" if pd.notna(e) else ", running")
        for s, e in zip(seconds, drills["ended_at"], strict=True)
    ]
    return drills.assign(
        duration=duration,
        verdict=drills["verdict"].fillna("—"),
        summary=drills["summary"].fillna(""),
    )[columns].reset_index(drop=True)


def duration_text(seconds: float) -> str:
    """A drill's length, as every length is said (engine.core.formats)."""
    return format_duration(max(0.0, seconds))


def count_text(value: object) -> str:
    """ "1,234", or "—" when the report has no such figure."""
    return "—" if value is None or pd.isna(value) else f"{int(value):,}"


def cost_text(value: object) -> str:
    """What a target's eval cases cost, by its magnitude ("$0.0018"); "unpriced" when its
    model has no known price (never $0)."""
    return "unpriced" if value is None or pd.isna(value) else format_usd(value)  # type: ignore[arg-type]


def change_text(value: object) -> str:
    """A drill's cost difference as a saving or a cost ("saved $0.0025", "cost $0.0022
    more"), or "—" when the report has none."""
    return "—" if value is None or pd.isna(value) else format_change(value)  # type: ignore[arg-type]


def seconds_text(value: object) -> str:
    """ "0.4 s", or "—" when the figure is missing (the breaker never opened)."""
    return "—" if value is None or pd.isna(value) else f"{float(value):.1f} s"


def restored_text(restored: object, after_s: object) -> tuple[str, str | None]:
    """Whether the drilled target served again once the drill ended ("yes", or "not seen" while
    the report has no answer from it after the end), and how soon ("after 1.2 s", or None)."""
    if restored is None or pd.isna(restored):
        return "not seen", None
    if not restored:
        return "no", None
    return "yes", None if after_s is None or pd.isna(after_s) else f"after {float(after_s):.1f} s"


def quality_by_target(rollups: pd.DataFrame) -> pd.DataFrame:
    """Per provider and target over the rollups: answered requests, quality errors, and quality
    errors ÷ answered (None without an answer)."""
    columns = ["provider", "target", "answered", "quality_errors", "per_answered"]
    if rollups.empty:
        return pd.DataFrame(columns=columns)
    sums = (
        rollups.assign(
            answered=rollups["answered"].fillna(0),
            quality_errors=rollups["quality_errors"].fillna(0),
        )
        .groupby(["provider", "target"], as_index=False)[["answered", "quality_errors"]]
        .sum()
    )
    sums["per_answered"] = sums["quality_errors"] / sums["answered"].where(sums["answered"] > 0)
    return sums.sort_values(["quality_errors", "target"], ascending=[False, True])[
        columns
    ].reset_index(drop=True)


def _role(target: str, primary: str | None) -> str:
    if primary is None:
        return ""
    return "primary" if target == primary else "backup"
