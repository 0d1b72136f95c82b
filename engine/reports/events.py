"""What happened in a report's week, from the published event snapshots: the incidents that
overlap it and the alerts fired about each, every alert fired in it, the failure classes per
provider (always holding each incident's top error) and the breaker openings.

Pure functions of DataFrames: they never read the snapshots themselves (engine.reports.week
does) and never format a value for people (engine.reports.tables does).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pandas as pd

TOP_FAILURES = 5  # failure classes listed per provider, besides the incidents' top errors
FAILURE_KEYS = ["provider", "error_class", "fault_kind", "http_status"]
# An alert is about an incident when it fired from a little before the incident's first bad
# minute to its settle time after the end: the rules look back over minutes, and an incident
# is dated from the start of its first bad minute.
ALERT_SLACK = timedelta(minutes=2)
# "overloaded (529) ×81", "read_timeout ×2": the class, its HTTP status if any, the count.
_TOP_ERROR = re.compile(r"^(?P<error_class>.+?)(?: \((?P<http_status>\d+)\))? ×(?P<count>\d+)$")


def overlapping(incidents: pd.DataFrame, start: datetime) -> pd.DataFrame:
    """The incidents with a minute in the week, oldest first. An incident covers [started_at,
    ended_at): one that ended as the week began (its last bad minute Sunday 23:59) has no
    minute in it and belongs to the week before only."""
    kept = incidents[incidents["ended_at"].isna() | (incidents["ended_at"] > start)]
    return kept.sort_values(["started_at", "incident_id"]).reset_index(drop=True)


def fired(alerts: pd.DataFrame, start: datetime, end: datetime) -> pd.DataFrame:
    """Every alert fired in [start, end), oldest first."""
    kept = alerts[(alerts["fired_at"] >= start) & (alerts["fired_at"] < end)]
    return kept.sort_values(["fired_at", "alert_id"]).reset_index(drop=True)


def top_error(text: object) -> tuple[str, int | None, int] | None:
    """An incident's top error as (error class, HTTP status or None, attempts); None when it
    has none."""
    found = _TOP_ERROR.match(text) if isinstance(text, str) else None
    if found is None:
        return None
    status = found["http_status"]
    return found["error_class"], None if status is None else int(status), int(found["count"])


def about(incident: object, alert: object, until: datetime) -> bool:
    """Whether `alert` is about `incident`: fired while it lasted (ALERT_SLACK either side),
    on its target, its provider or one of the routes it affected."""
    ended = getattr(incident, "ended_at", None)
    hi = (until if ended is None or pd.isna(ended) else ended) + ALERT_SLACK
    lo = incident.started_at - ALERT_SLACK  # type: ignore[attr-defined]
    if not lo <= alert.fired_at <= hi:  # type: ignore[attr-defined]
        return False
    routes = [r for r in str(incident.routes or "").split(", ") if r]  # type: ignore[attr-defined]
    names = {*routes, *(str(getattr(incident, k, "") or "") for k in ("target", "subject"))}
    subject = str(alert.subject)  # type: ignore[attr-defined]
    # a credential alert names the target and its key variable: "claude/x (ANTHROPIC_API_KEY)"
    return subject in names or any(name and subject.startswith(f"{name} ") for name in names)


def with_alerts(incidents: pd.DataFrame, alerts: pd.DataFrame, until: datetime) -> pd.DataFrame:
    """`incidents` with a column `alerts`: the ids of the alerts fired about each, comma
    separated ("" for none). `until` ends an ongoing incident (the data's time)."""
    found = [
        ", ".join(a.alert_id for a in alerts.itertuples() if about(i, a, until))
        for i in incidents.itertuples()
    ]
    return incidents.assign(alerts=pd.Series(found, index=incidents.index, dtype=object))


def top_failures(failures: pd.DataFrame, incidents: pd.DataFrame) -> pd.DataFrame:
    """The week's failed attempts per provider and class: the TOP_FAILURES commonest of each
    provider, and every class that is an incident's top error (so none is ever missing
    beside the incident that names it); commonest first."""
    columns = [*FAILURE_KEYS, "attempts"]
    if failures.empty:
        return pd.DataFrame(columns=columns)
    grouped = failures.groupby(FAILURE_KEYS, dropna=False, as_index=False)["attempts"].sum()
    grouped["attempts"] = grouped["attempts"].astype(int)
    grouped = grouped.sort_values(["provider", "attempts", "error_class"],
                                  ascending=[True, False, True])  # fmt: skip
    rank = grouped.groupby("provider").cumcount()
    named = {
        (i.provider, found[0], found[1])
        for i in incidents.itertuples()
        if (found := top_error(i.top_error)) is not None
    }
    status = grouped["http_status"].map(lambda s: None if pd.isna(s) else int(s))
    pinned = pd.Series(
        [
            (p, c, s) in named
            for p, c, s in zip(grouped["provider"], grouped["error_class"], status, strict=True)
        ],
        index=grouped.index,
    )
    return grouped[(rank < TOP_FAILURES) | pinned].reset_index(drop=True)[columns]


def openings(events: pd.DataFrame) -> pd.DataFrame:
    """Per target, how often its breaker went from closed to open; most first."""
    if events.empty:
        return pd.DataFrame(columns=["target", "openings"])
    opened = events[(events["from_status"] == "closed") & (events["to_status"] == "open")]
    counts = opened.groupby("target").size().rename("openings").reset_index()
    return counts.sort_values(["openings", "target"], ascending=[False, True]).reset_index(
        drop=True
    )
