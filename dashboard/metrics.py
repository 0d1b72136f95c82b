"""What the pages show, computed from the published frames: pure functions of DataFrames and
`now`, no Streamlit, so tests check every number against the fixture without a browser.

Definitions are docs/metrics.md's; each function names the figures it returns the way the
document does, and the pages use those names for the tooltips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from engine.core.fault_families import describe
from engine.core.formats import format_duration
from engine.core.money import format_change, price_difference

# The Live page's "last 5 min"; a target's fault share over it: below DEGRADED healthy, from
# DOWN down.
RECENT = timedelta(minutes=5)
DEGRADED, DOWN = 0.05, 0.5
MINUTE = timedelta(minutes=1)
PROCESS_GONE_AFTER = timedelta(minutes=10)  # as engine.alerts.conditions
NOT_CALLERS_FAULT = ("provider_faults", "ambiguous_faults", "rate_limited", "account_faults")
FAULT_KINDS = ("provider", "ambiguous", "rate_limit", "account")  # the same, on an attempt
DIRECT = "direct"  # the route of targets a caller names alone: listed after the routes


def _sum(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].fillna(0).astype(float).sum()) if len(frame) else 0.0


@dataclass(frozen=True, slots=True)
class Span:
    """[start, end): what a figure labelled "last 5 min" or "1 h" is over. `start` is a bucket
    boundary; `end` the time the data reaches, inside the bucket still being counted."""

    start: datetime
    end: datetime

    @property
    def length(self) -> timedelta:
        """The exact time elapsed: a rate over it is never diluted by the part of the current
        bucket that has not happened yet."""
        return self.end - self.start

    def of(self, frame: pd.DataFrame, column: str = "bucket") -> pd.DataFrame:
        """The rows of `frame` whose bucket starts in the span (the current one included)."""
        if frame.empty:
            return frame
        return frame[(frame[column] >= self.start) & (frame[column] < self.end)]


def span_to(as_of: datetime, length: timedelta, grain: timedelta = MINUTE) -> Span:
    """From the start of the `grain` bucket `length` before `as_of` (when the data was taken)
    to `as_of`: the last 5 min at 12:42:23 are 12:37:00–12:42:23, 5 min 23 s."""
    start = pd.Timestamp(as_of - length).floor(pd.Timedelta(grain)).to_pydatetime()
    return Span(start, as_of)


@dataclass(frozen=True, slots=True)
class Kpis:
    requests: int
    requests_per_min: float
    availability: float | None  # None: nothing that counts in the window
    fallback_rate: float | None
    latency_p99_ms: float | None
    cost_per_hour: float
    premium_per_hour: float
    unpriced_attempts: int


def kpis(rollups: pd.DataFrame, latency_p99_ms: float | None, window: timedelta) -> Kpis:
    """The Live page's headline figures for the window. `rollups`: the window's buckets;
    `latency_p99_ms`: the exact p99 of its attempts, or None where only hourly p99s exist
    (then the worst hour's is shown)."""
    requests = _sum(rollups, "requests")
    counted = requests - _sum(rollups, "request_faults") - _sum(rollups, "abandoned")
    hours = window.total_seconds() / 3600
    p99 = latency_p99_ms
    if p99 is None and len(rollups) and rollups["latency_p99_ms"].notna().any():
        p99 = float(rollups["latency_p99_ms"].max())
    premium = _sum(rollups, "fallback_premium_usd") + _sum(rollups, "rewarm_usd")
    return Kpis(
        requests=int(requests),
        requests_per_min=requests / (window.total_seconds() / 60),
        availability=_sum(rollups, "answered") / counted if counted else None,
        fallback_rate=_sum(rollups, "answered_by_fallback") / requests if requests else None,
        latency_p99_ms=p99,
        cost_per_hour=_sum(rollups, "cost_usd") / hours,
        premium_per_hour=premium / hours,
        unpriced_attempts=int(_sum(rollups, "unpriced_attempts")),
    )


# A breaker as the Live page tells it, whichever source told it: its status, why it opened,
# since when it is in that status, the seconds until its next probe may run (open only),
# whether a probe is out (half-open; None: the source cannot say), and `at`, the time the
# row is as of (the gateway's reading, or the published events' time).
BREAKER_COLUMNS = ["target", "status", "reason", "since", "remaining_s", "probing", "at"]


def breaker_states(
    events: pd.DataFrame, alive: set[tuple[str, int]], now: datetime
) -> pd.DataFrame:
    """Each target's breaker as its live processes last reported it in the published events,
    as of `now` (the events' time): status (the worst over processes), since the change into
    it, and when the next probe may run. `alive`: the (host, process id) that recorded
    attempts in the last ten minutes. The page's last resort: the events lag the gateway by
    a cycle or more, and cannot say whether a half-open breaker's probe is out."""
    if events.empty:
        return pd.DataFrame(columns=BREAKER_COLUMNS)
    ordered = events.sort_values(["occurred_at", "seq"])
    last = ordered.groupby(["target", "host", "process_id"]).tail(1)
    alive_after = now - PROCESS_GONE_AFTER
    rows = []
    for row in last.itertuples():
        if row.occurred_at < alive_after and (row.host, row.process_id) not in alive:
            continue  # that process is gone, and its breakers with it
        is_open = row.to_status == "open" and pd.notna(row.open_until)
        wait = (pd.Timestamp(row.open_until) - pd.Timestamp(now)).total_seconds()
        rows.append(
            {
                "target": row.target,
                "status": row.to_status,
                "reason": row.reason if row.to_status == "open" else None,
                "since": row.occurred_at if row.to_status != "closed" else pd.NaT,
                "remaining_s": max(0.0, wait) if is_open else None,
                "probing": None,
                "at": now,
            }
        )
    return _worst_first(pd.DataFrame(rows, columns=BREAKER_COLUMNS))


def told_breakers(told: pd.DataFrame, at: datetime) -> pd.DataFrame:
    """The breakers a live source told at `at` (dashboard.live_breakers: the gateway's
    `/v1/status` or its shared store), as BREAKER_COLUMNS."""
    if told.empty:
        return pd.DataFrame(columns=BREAKER_COLUMNS)
    ago = pd.to_timedelta(pd.to_numeric(told["opened_s_ago"]), unit="s")
    frame = pd.DataFrame(
        {
            "target": told["target"],
            "status": told["status"],
            "reason": told["reason"].where(told["status"] == "open", None),
            "since": (pd.Timestamp(at) - ago).where(told["status"] != "closed"),
            "remaining_s": told["open_remaining_s"].where(told["status"] == "open", None),
            "probing": told["probing"],
            "at": at,
        }
    )
    return _worst_first(frame)


def _worst_first(frame: pd.DataFrame) -> pd.DataFrame:
    """One row a target, its worst status (open, then half-open, then closed)."""
    if frame.empty:
        return pd.DataFrame(columns=BREAKER_COLUMNS)
    rank = frame["status"].map({"open": 2, "half_open": 1, "closed": 0})
    worst = frame.assign(rank=rank).sort_values("rank", ascending=False, kind="stable")
    worst = worst.drop_duplicates("target")  # the whole row: `first()` would mix rows' values
    return worst[BREAKER_COLUMNS].sort_values("target").reset_index(drop=True)


def target_health(
    rollups: pd.DataFrame,
    breakers: pd.DataFrame,
    failures: pd.DataFrame,
    now: datetime,
    known: Iterable[str] = (),
    drills: pd.DataFrame | None = None,
    primaries: Mapping[str, str] | None = None,
    window: str = "last 5 min",
) -> pd.DataFrame:
    """Per target (provider/model) over `rollups`, the last five minutes, the worst first:
    down when half its attempts failed for reasons not the caller's or while its breaker is
    open; degraded from 5 %, while its breaker probes, or when 5 % of the requests of the
    routes it is the primary of (`primaries`: route → primary target) went to backups (never
    down for that alone: its breaker may have closed a minute ago); idle with no attempt; else
    healthy. With its commonest failure (`failures`: failures_by_target over the same
    minutes), its breaker (`breakers`: BREAKER_COLUMNS, as of their own `at`) and any drill
    running on it (`drills`, the drills snapshot, as of `now`). `known`: targets seen in the
    page's window, idle when quiet now. The summary names the window of its figures
    (`window`: "last 5 min: 12 of 12 attempts failed (…), 63 of 366 requests of support went
    to backups"), apart from the breaker's state now."""
    columns = ["target", "status", "attempts", "fault_share", "top_error", "breaker", "summary"]
    running = _running_drills(drills, now)
    passed = _passed_over(rollups, primaries or {})
    targets = set(known) | set(rollups.get("target", [])) | set(breakers.get("target", []))
    rows = []
    for target in sorted(targets | set(running)):
        mine = rollups[rollups["target"] == target] if len(rollups) else rollups
        attempts = int(_sum(mine, "attempts"))
        faults = int(sum(_sum(mine, c) for c in NOT_CALLERS_FAULT))
        failing = faults / attempts if attempts else 0.0
        skipped = passed.get(target, (0.0, ""))[0]
        breaker = breakers[breakers["target"] == target] if len(breakers) else breakers
        state = breaker["status"].iloc[0] if len(breaker) else "closed"
        if state == "open" or failing >= DOWN:
            status = "down"
        elif state == "half_open" or max(failing, skipped) >= DEGRADED:
            status = "degraded"
        else:
            status = "healthy" if attempts else "idle"
        top = _top_failure(failures, target) if faults else None
        recent = [_failing_text(faults, attempts, top), *passed.get(target, ())[1:]]
        said = [f"{window}: " + ", ".join(recent)]
        said += [_breaker_text(breaker.iloc[0])] if state != "closed" else []
        said += running.get(target, [])
        share = faults / attempts if attempts else None
        rows.append(
            dict(
                zip(
                    columns,
                    [target, status, attempts, share, top, state, " · ".join(said)],
                    strict=True,
                )
            )
        )
    frame = pd.DataFrame(rows, columns=columns)
    worst_first = frame["status"].map(_STATUS_RANK.get).astype(int)
    return (
        frame.assign(rank=worst_first)
        .sort_values(["rank", "target"])[columns]
        .reset_index(drop=True)
    )


def _passed_over(rollups: pd.DataFrame, primaries: Mapping[str, str]) -> dict[str, tuple]:
    """primary target → (share, "63 of 366 requests of classify went to backups"): what its
    own attempts cannot show, the requests that skipped it (cooling after a 429, held back by
    its breaker) or that it failed. A drill's fallbacks aside: they were made on purpose."""
    said: dict[str, tuple] = {}
    for target in set(primaries.values()):
        routes = sorted(r for r, t in primaries.items() if t == target)
        mine = rollups[rollups["route"].isin(routes)] if len(rollups) else rollups
        requests = _sum(mine, "requests")
        drilled = _sum(mine, "drill_fallbacks") if "drill_fallbacks" in mine else 0.0
        went = _sum(mine, "answered_by_fallback") - drilled
        if requests and went > 0:
            text = f"{int(went):,} of {int(requests):,} requests of {', '.join(routes)} went to "
            said[target] = (went / requests, text + "backups")
    return said


_STATUS_RANK = {"down": 0, "degraded": 1, "healthy": 2, "idle": 3}


def _failing_text(faults: int, attempts: int, top: str | None) -> str:
    """ "12 of 12 attempts failed (100%: authentication 401)", "none of 50 failed": counts
    first, since a share alone hides one failure in 341 or 1 probe in 1."""
    if not attempts:
        return "no attempts"
    if not faults:
        return f"none of {attempts:,} attempts failed"
    share = percent(faults / attempts)
    return f"{faults:,} of {attempts:,} attempts failed ({share}{f': {top}' if top else ''})"


def percent(share: float) -> str:
    """A share in whole percents that never reads as 0 % or 100 % when it is not."""
    if 0 < share < 0.01:
        return "<1%"
    return ">99%" if 0.99 < share < 1 else f"{share:.0%}"


_REASONS = {"failure_rate": "failure rate", "probe": "probe failed"}


def _running_drills(drills: pd.DataFrame | None, now: datetime) -> dict[str, list[str]]:
    """target → "drill on support, 6 min left" for each drill still running (failures made
    on purpose: the reader must not take them for an outage)."""
    said: dict[str, list[str]] = {}
    if drills is None or drills.empty:
        return said
    for d in drills[drills["ended_at"].isna()].itertuples():
        left = f", {duration(pd.Timestamp(d.ends_at) - pd.Timestamp(now))} left"
        said.setdefault(d.target, []).append(f"drill on {d.route}" + left)
    return said


def _breaker_text(breaker: pd.Series) -> str:
    """ "breaker open (account) for 3 min, next probe in 4 min", as of the row's `at`;
    "breaker half-open, probe under way" only when the source knows a probe is out."""
    text = f"breaker {breaker['status'].replace('_', '-')}"
    if isinstance(breaker["reason"], str):
        text += f" ({_REASONS.get(breaker['reason'], breaker['reason'])})"
    if pd.notna(breaker["since"]):
        text += f" for {duration(pd.Timestamp(breaker['at']) - pd.Timestamp(breaker['since']))}"
    if breaker["status"] == "half_open":
        probing = breaker["probing"]
        if probing is None or pd.isna(probing):
            return text
        return text + (", probe under way" if probing else ", the next request probes")
    if breaker["status"] == "open" and pd.notna(breaker["remaining_s"]):
        wait = timedelta(seconds=float(breaker["remaining_s"]))
        text += f", next probe in {duration(wait)}" if wait.total_seconds() >= 1 else ", probe due"
    return text


def _top_failure(failures: pd.DataFrame, target: str) -> str | None:
    """The commonest failure not the caller's: "authentication 401", "read_timeout"."""
    if failures.empty:
        return None
    mine = failures[(failures["target"] == target) & failures["fault_kind"].isin(FAULT_KINDS)]
    if mine.empty:
        return None
    top = mine.sort_values("attempts", ascending=False, kind="stable").iloc[0]
    status = top["http_status"]
    return f"{top['error_class']} {int(status)}" if pd.notna(status) else str(top["error_class"])


def route_order(routes: Iterable[str]) -> list[str]:
    """Routes by name, with the targets named alone by callers ("direct") last."""
    return sorted(set(routes), key=lambda route: (route == DIRECT, route))


def route_status(rollups: pd.DataFrame) -> pd.DataFrame:
    """Per route over `rollups` (the last five minutes): down when most requests failed,
    degraded when backups carry a noticeable share (or any failed), else healthy."""
    rows = []
    for route in route_order(rollups["route"]) if len(rollups) else []:
        mine = rollups[rollups["route"] == route]
        requests = _sum(mine, "requests")
        counted = requests - _sum(mine, "request_faults") - _sum(mine, "abandoned")
        failed = _sum(mine, "unavailable") + _sum(mine, "broken_streams")
        fallback = _sum(mine, "answered_by_fallback")
        status = "healthy"
        if counted and failed / counted >= DOWN:
            status = "down"
        elif failed or (requests and fallback / requests >= DEGRADED):
            status = "degraded"
        rows.append(
            {
                "route": route,
                "status": status,
                "requests": int(requests),
                "fallback_rate": fallback / requests if requests else None,
                "failed": int(failed),
            }
        )
    return pd.DataFrame(rows, columns=["route", "status", "requests", "fallback_rate", "failed"])


def serving_shares(rollups: pd.DataFrame) -> pd.DataFrame:
    """Who serves each route over `rollups` (the last five minutes): each target's share of
    the route's answered requests, in whole percents that add up to 100 (largest remainder)."""
    columns = ["route", "target", "answered", "percent"]
    if rollups.empty:
        return pd.DataFrame(columns=columns)
    answered = rollups.groupby(["route", "target"], as_index=False)["answered"].sum()
    answered = answered[answered["answered"] > 0]
    parts = []
    for route in route_order(answered["route"]):
        mine = answered[answered["route"] == route].sort_values(
            ["answered", "target"], ascending=[False, True]
        )
        parts.append(mine.assign(percent=whole_percents(mine["answered"].tolist())))
    return (
        pd.concat(parts)[columns].reset_index(drop=True) if parts else pd.DataFrame(columns=columns)
    )


def whole_percents(counts: list[float]) -> list[int]:
    """`counts` as whole percents of their total that add up to exactly 100: each share
    rounded down, the points left over going to the largest remainders (earlier on a tie)."""
    total = sum(counts)
    exact = [100 * c / total for c in counts]
    whole = [int(e) for e in exact]
    by_remainder = sorted(range(len(counts)), key=lambda i: whole[i] - exact[i])
    for i in by_remainder[: 100 - sum(whole)]:
        whole[i] += 1
    return whole


def serving_text(shares: pd.DataFrame, route: str) -> str:
    """ "claude/claude-haiku-4-5 92%, claude/claude-sonnet-4-5 8%"; "no answers" without. A
    target that answered but rounds to 0 reads "<1%"."""
    mine = shares[shares["route"] == route] if len(shares) else shares
    if mine.empty:
        return "no answers"
    shown = {0: "<1"} | ({100: ">99"} if len(mine) > 1 else {})  # rounded, never all or none
    return ", ".join(f"{r.target} {shown.get(r.percent, r.percent)}%" for r in mine.itertuples())


def serving_line(now: pd.DataFrame, recent: pd.DataFrame, route: str) -> str:
    """Who serves `route` now (`now`: serving_shares of the answers of the last minute) beside
    the last 5 min (`recent`), each share naming its window: "served by · now (last min):
    claude/claude-haiku-4-5 100% · last 5 min: claude/claude-sonnet-4-5 60%,
    claude/claude-haiku-4-5 40%"; one window said once when both read the same. 35 s into an
    outage the 5 minutes are mostly the primary's: the minute says who took over."""
    current, five = serving_text(now, route), serving_text(recent, route)
    if current == five:
        return f"served by {five} · now (last min) and last 5 min"
    return f"served by · now (last min): {current} · last 5 min: {five}"


# Failed attempts grouped as people name them; the order is the legend's.
FAILURE_CLASSES = ("429", "529", "5xx", "401/403", "timeout", "other", "request (4xx)", "drill")


def failure_class(fault_kind: object, error_class: object, http_status: object) -> str:
    """One of FAILURE_CLASSES for a failed attempt: a 504 or a read timeout is "timeout",
    a caller's bad request "request (4xx)", a connect error, reset, 402 or 404 "other"."""
    status = int(http_status) if pd.notna(http_status) else None
    if fault_kind == "drill":
        return "drill"
    if fault_kind in ("request", "suspected_request"):
        return "request (4xx)"
    if status in (408, 504) or "timeout" in str(error_class):
        return "timeout"
    if status in (429, 529, 401, 403):
        return {429: "429", 529: "529", 401: "401/403", 403: "401/403"}[status]
    if error_class == "overloaded":
        return "529"
    return "5xx" if status is not None and 500 <= status < 600 else "other"


def failures_by_class(failures: pd.DataFrame) -> pd.DataFrame:
    """failures_by_bucket's rows summed per bucket and FAILURE_CLASSES entry."""
    if failures.empty:
        return pd.DataFrame(columns=["bucket", "failure", "attempts"])
    keys = failures[["fault_kind", "error_class", "http_status"]].itertuples(index=False)
    classes = [failure_class(*key) for key in keys]
    sums = (
        failures.assign(failure=classes)
        .groupby(["bucket", "failure"], as_index=False)["attempts"]
        .sum()
    )
    return sums.sort_values(["bucket", "failure"], key=_legend_order).reset_index(drop=True)


def _legend_order(column: pd.Series) -> pd.Series:
    return column.map(FAILURE_CLASSES.index) if column.name == "failure" else column


def fallback_by_route(rollups: pd.DataFrame) -> pd.DataFrame:
    """Per bucket and route: answered by fallback ÷ requests (buckets with requests only)."""
    if rollups.empty:
        return pd.DataFrame(columns=["bucket", "route", "fallback_rate"])
    sums = rollups.groupby(["bucket", "route"], as_index=False)[
        ["requests", "answered_by_fallback"]
    ].sum()
    sums = sums[sums["requests"] > 0]
    return sums.assign(fallback_rate=sums["answered_by_fallback"] / sums["requests"])[
        ["bucket", "route", "fallback_rate"]
    ]


def as_series(
    frame: pd.DataFrame, columns: dict[str, str], value: str, by: str | None = None
) -> pd.DataFrame:
    """A wide frame's `columns` (column → name) as rows of (bucket, series, `value`), one
    line each; with `by` (a route), one line per value of it and column: "support p99"."""
    keys = ["bucket", *([by] if by else [])]
    long = frame.melt(id_vars=keys, value_vars=list(columns), var_name="column", value_name=value)
    names = long["column"].map(columns)
    series = long[by].astype(str) + " " + names if by else names
    return long.assign(series=series)[["bucket", "series", value]]


def rates_by_bucket(rollups: pd.DataFrame) -> pd.DataFrame:
    """Per bucket: requests, fallback rate, cost and fallback premium (USD)."""
    columns = ["bucket", "requests", "fallback_rate", "cost_usd", "premium_usd"]
    if rollups.empty:
        return pd.DataFrame(columns=columns)
    numeric = rollups.assign(
        cost=rollups["cost_usd"].fillna(0).astype(float),
        premium=rollups["fallback_premium_usd"].fillna(0).astype(float)
        + rollups["rewarm_usd"].fillna(0).astype(float),
    )
    sums = numeric.groupby("bucket", as_index=False)[
        ["requests", "answered_by_fallback", "cost", "premium"]
    ].sum()
    sums["fallback_rate"] = sums["answered_by_fallback"] / sums["requests"].where(
        sums["requests"] > 0
    )
    return sums.rename(columns={"cost": "cost_usd", "premium": "premium_usd"})[columns]


def timeline_markers(
    incidents: pd.DataFrame, alerts: pd.DataFrame, drills: pd.DataFrame, now: datetime
) -> pd.DataFrame:
    """What the timelines mark: incidents and drills as spans, alerts from firing to resolved
    (an open end is `now`, flagged ongoing), each with a label a person reads."""
    columns = ["kind", "label", "start", "end", "ongoing"]
    rows = []
    for i in incidents.itertuples():
        rows.append(("incident", f"incident: {i.subject} ({_kind(i)})", i.started_at, i.ended_at))
    for a in alerts.itertuples():
        rows.append(("alert", f"alert: {a.rule} ({a.subject})", a.fired_at, a.resolved_at))
    for d in drills.itertuples():
        rows.append(("drill", f"drill: {d.target} on {d.route}", d.started_at, d.ended_at))
    frame = pd.DataFrame(rows, columns=columns[:4])
    ongoing = frame["end"].isna()
    frame["end"] = pd.to_datetime([now if pd.isna(e) else e for e in frame["end"]], utc=True)
    frame["start"] = pd.to_datetime(frame["start"], utc=True)
    return frame.assign(ongoing=ongoing)[columns].sort_values("start").reset_index(drop=True)


def incident_summary(incident: Any) -> str:
    """An ongoing incident (a row of the incidents snapshot) as a person reads it:
    "claude/claude-sonnet-4-5 (availability) on support: 120 requests affected, 118 answered
    by fallback, 2 failed; extra cost: saved $0.11. Top error: overloaded (529)"."""
    routes = incident.routes if isinstance(incident.routes, str) and incident.routes else None
    top = incident.top_error if isinstance(incident.top_error, str) else "none recorded"
    return (
        f"{incident.subject} ({_kind(incident)}){f' on {routes}' if routes else ''}: "
        f"{int(incident.requests_affected):,} requests affected, "
        f"{int(incident.answered_by_fallback):,} answered by fallback, "
        f"{int(incident.failed):,} failed; extra cost: {format_change(incident.extra_cost_usd)}. "
        f"Top error: {top}"
    )


def _kind(incident: Any) -> str:
    """The fault family ("availability", "rate_limit", "account"); the scope in snapshots
    from before incidents had one."""
    family = getattr(incident, "family", None)
    return family if isinstance(family, str) and family else str(incident.scope)


def duration(span: timedelta) -> str:
    """ "45 s", "4 min 23 s", "42 min", "2 h 5 min" (rounded down; never negative)."""
    seconds = max(0, int(span.total_seconds()))
    minutes, rest = divmod(seconds, 60)
    if seconds < 120:
        return f"{seconds} s"
    if minutes < 10:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True, slots=True)
class CostSummary:
    cost: float
    per_answered: float | None
    premium: float
    price_difference: float
    cache_loss: float
    rewarm: float
    wasted: float
    unpriced_models: list[str]


def cost_summary(rollups: pd.DataFrame) -> CostSummary:
    answered = _sum(rollups, "answered")
    premium, cache_loss = _sum(rollups, "fallback_premium_usd"), _sum(rollups, "cache_loss_usd")
    unpriced = rollups[rollups["unpriced_attempts"].fillna(0) > 0] if len(rollups) else rollups
    return CostSummary(
        cost=_sum(rollups, "cost_usd"),
        per_answered=_sum(rollups, "cost_usd") / answered if answered else None,
        premium=premium,
        price_difference=price_difference(premium, cache_loss),
        cache_loss=cache_loss,
        rewarm=_sum(rollups, "rewarm_usd"),
        wasted=_sum(rollups, "wasted_usd"),
        unpriced_models=sorted(set(unpriced["target"])) if len(unpriced) else [],
    )


def cost_by(rollups: pd.DataFrame, column: str) -> pd.DataFrame:
    """Cost per bucket and value of `column` (route, provider, model or feature)."""
    frame = rollups.assign(cost_usd=rollups["cost_usd"].fillna(0).astype(float))
    if column == "feature":
        frame = frame.assign(feature=frame["feature"].replace("", "(none)"))
    return frame.groupby(["bucket", column], as_index=False)["cost_usd"].sum()


TOKEN_KINDS = {
    "input (uncached)": "input_tokens",
    "cache read": "cache_read_tokens",
    "cache write": "cache_write_tokens",
    "output": "output_tokens",
}


def token_mix(rollups: pd.DataFrame) -> pd.DataFrame:
    sums = rollups.groupby("bucket", as_index=False)[list(TOKEN_KINDS.values())].sum()
    long = sums.melt(id_vars="bucket", var_name="column", value_name="tokens")
    names = {column: kind for kind, column in TOKEN_KINDS.items()}
    return long.assign(kind=long["column"].map(names))[["bucket", "kind", "tokens"]]


def incident_table(incidents: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Incidents with an `end` (now while ongoing), a readable duration, `what` failed and how
    ("claude/claude-haiku-4-5 rate limited (429)"), and `route_list`: the routes it affected."""
    end = incidents["ended_at"].fillna(pd.Timestamp(now))
    seconds = (end - incidents["started_at"]).dt.total_seconds().clip(lower=0)
    # As the report and the console say it; text even with no incident (an empty float
    # column, to which adding ", ongoing" raises).
    duration = seconds.map(format_duration).astype(object)
    ongoing = incidents["ended_at"].isna()
    families = incidents["family"] if "family" in incidents else pd.Series(None, incidents.index)
    what = [describe(s, f) for s, f in zip(incidents["subject"], families, strict=True)]
    routes = [
        [r for r in str(v).split(", ") if r] if isinstance(v, str) else []
        for v in incidents["routes"]
    ]
    return incidents.assign(
        end=end,
        duration=duration.where(~ongoing, duration + ", ongoing"),
        what=pd.Series(what, index=incidents.index, dtype=object),
        route_list=pd.Series(routes, index=incidents.index, dtype=object),
    )


def traffic_by_target(rollups: pd.DataFrame, routes: Iterable[str] | None = None) -> pd.DataFrame:
    """Requests per bucket by the target that decided them (failed ones as "failed"); of
    `routes` only, when given (an incident's: the targets that served them are then the ones
    involved)."""
    if routes is not None:
        rollups = rollups[rollups["route"].isin(list(routes))]
    served = rollups.assign(
        ok=rollups["answered"].fillna(0),
        failed=rollups["unavailable"].fillna(0) + rollups["broken_streams"].fillna(0),
    )
    ok = served.groupby(["bucket", "target"], as_index=False)["ok"].sum()
    ok = ok.rename(columns={"target": "served by", "ok": "requests"})
    failed = served.groupby("bucket", as_index=False)["failed"].sum()
    failed = failed.assign(**{"served by": "failed"}).rename(columns={"failed": "requests"})
    both = pd.concat([ok, failed])
    return both[both["requests"] > 0]
