"""What the pages show, computed from the published frames: pure functions of DataFrames and
`now`, no Streamlit, so tests check every number against the fixture without a browser.

Definitions are docs/metrics.md's; each function names the figures it returns the way the
document does, and the pages use those names for the tooltips.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

# A provider's fault share over the last five minutes: below DEGRADED healthy, from DOWN down.
STATUS_WINDOW = timedelta(minutes=5)
DEGRADED, DOWN = 0.05, 0.5
PROCESS_GONE_AFTER = timedelta(minutes=10)  # as engine.alerts.conditions
NOT_CALLERS_FAULT = ("provider_faults", "ambiguous_faults", "rate_limited", "account_faults")


def _sum(frame: pd.DataFrame, column: str) -> float:
    return float(frame[column].fillna(0).astype(float).sum()) if len(frame) else 0.0


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


def breaker_states(
    events: pd.DataFrame, alive: set[tuple[str, int]], now: datetime
) -> pd.DataFrame:
    """Each target's breaker as its live processes last reported it: status (the worst over
    processes), since when it is not closed, and when the next probe may run. `alive`: the
    (host, process id) that recorded attempts in the last ten minutes."""
    columns = ["target", "status", "since", "probe_at", "processes", "reason"]
    if events.empty:
        return pd.DataFrame(columns=columns)
    ordered = events.sort_values(["occurred_at", "seq"])
    key = ["target", "host", "process_id"]
    last = ordered.groupby(key).tail(1).set_index(key)
    opened = ordered[ordered["from_status"] == "closed"].groupby(key)["occurred_at"].max()
    last = last.assign(since=opened.reindex(last.index))
    alive_after = now - PROCESS_GONE_AFTER
    rows = []
    for (target, host, pid), row in last.iterrows():
        if row["occurred_at"] < alive_after and (host, pid) not in alive:
            continue  # that process is gone, and its breakers with it
        rows.append(
            {
                "target": target,
                "status": row["to_status"],
                "since": row["since"] if row["to_status"] != "closed" else pd.NaT,
                "probe_at": row["open_until"] if row["to_status"] == "open" else pd.NaT,
                "reason": row["reason"],
            }
        )
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    rank = {"open": 2, "half_open": 1, "closed": 0}
    frame["rank"] = frame["status"].map(rank)
    worst = frame.sort_values("rank", ascending=False).groupby("target", as_index=False).first()
    worst["processes"] = frame.groupby("target").size().reindex(worst["target"]).to_numpy()
    return worst[columns].sort_values("target").reset_index(drop=True)


def provider_status(rollups: pd.DataFrame, breakers: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Per provider over the last five minutes: healthy, degraded or down by its fault share
    (failures not the caller's ÷ attempts), any breaker open on one of its targets making it
    at least degraded, with the breakers' probe times."""
    recent = rollups[rollups["bucket"] >= now - STATUS_WINDOW] if len(rollups) else rollups
    rows = []
    providers = set(recent["provider"]) if len(recent) else set()
    providers |= {t.split("/", 1)[0] for t in breakers.get("target", [])}
    for provider in sorted(providers):
        mine = recent[recent["provider"] == provider] if len(recent) else recent
        attempts = _sum(mine, "attempts")
        faults = sum(_sum(mine, c) for c in NOT_CALLERS_FAULT)
        share = faults / attempts if attempts else None
        targets = breakers[breakers["target"].str.startswith(provider + "/")]
        open_targets = targets[targets["status"] != "closed"]
        if (share is not None and share >= DOWN) or (share is None and len(open_targets)):
            status = "down"  # failing, or every breaker holds its traffic back
        elif (share is not None and share >= DEGRADED) or len(open_targets):
            status = "degraded"
        else:
            status = "healthy"
        rows.append(
            {
                "provider": provider,
                "status": status,
                "fault_share": share,
                "attempts": int(attempts),
                "breakers": ", ".join(
                    f"{r.target.split('/', 1)[1]} {r.status.replace('_', '-')}"
                    + (f", probe in {_until(r.probe_at, now)}" if pd.notna(r.probe_at) else "")
                    for r in open_targets.itertuples()
                ),
            }
        )
    return pd.DataFrame(rows, columns=["provider", "status", "fault_share", "attempts", "breakers"])


def route_status(rollups: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Per route over the last five minutes: down when most requests failed, degraded when
    backups carry a noticeable share (or any failed), else healthy."""
    recent = rollups[rollups["bucket"] >= now - STATUS_WINDOW] if len(rollups) else rollups
    rows = []
    for route in sorted(set(recent["route"])) if len(recent) else []:
        mine = recent[recent["route"] == route]
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


def outcomes_by_bucket(rollups: pd.DataFrame) -> pd.DataFrame:
    """Attempts per bucket, provider and outcome (ok / failed), for the stacked timeline."""
    if rollups.empty:
        return pd.DataFrame(columns=["bucket", "provider", "outcome", "attempts"])
    grouped = rollups.groupby(["bucket", "provider"], as_index=False)[
        ["attempts", "failed_attempts"]
    ].sum()
    ok = grouped.assign(outcome="ok", attempts=grouped["attempts"] - grouped["failed_attempts"])
    failed = grouped.assign(outcome="failed", attempts=grouped["failed_attempts"])
    both = pd.concat([ok, failed])[["bucket", "provider", "outcome", "attempts"]]
    return both[both["attempts"] > 0].sort_values(["bucket", "provider", "outcome"])


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


def latency_by_hour(rollups: pd.DataFrame) -> pd.DataFrame:
    """Hourly p50 / p99 where only rollups exist: the worst of the hour's groups."""
    if rollups.empty:
        return pd.DataFrame(columns=["bucket", "p50_ms", "p99_ms"])
    grouped = rollups.groupby("bucket", as_index=False).agg(
        p50_ms=("latency_p50_ms", "max"), p99_ms=("latency_p99_ms", "max")
    )
    return grouped


def _until(when: datetime, now: datetime) -> str:
    seconds = max(0, int((pd.Timestamp(when) - pd.Timestamp(now)).total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


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
        price_difference=premium - cache_loss,
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
    """Incidents with an `end` (now while ongoing) and a readable duration."""
    end = incidents["ended_at"].fillna(pd.Timestamp(now))
    minutes = ((end - incidents["started_at"]).dt.total_seconds() // 60).astype(int)
    duration = minutes.map(lambda m: f"{m // 60} h {m % 60} min" if m >= 60 else f"{m} min")
    ongoing = incidents["ended_at"].isna()
    return incidents.assign(end=end, duration=duration.where(~ongoing, duration + ", ongoing"))


def traffic_by_target(rollups: pd.DataFrame) -> pd.DataFrame:
    """Requests per bucket by the target that decided them (failed ones as "failed")."""
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
