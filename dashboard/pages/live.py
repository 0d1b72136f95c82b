"""Live: during an incident, which provider is failing, since when, whether the fallback
carries the traffic, what it costs, and who was told. Refreshes itself every 5 s."""

from __future__ import annotations

from datetime import timedelta

import streamlit as st

from dashboard import charts, data, figures
from dashboard.definitions import define

STATUS_COLORS = {"healthy": "green", "degraded": "orange", "down": "red"}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _alerts_and_incidents(v: data.View) -> None:
    firing = data.query("alerts", since=v.since, state="firing")
    for alert in firing.itertuples():
        quiet = " (silenced)" if alert.silenced else ""
        text = f"**{alert.rule}** since {v.stamp(alert.fired_at)}{quiet}: {alert.summary}"
        (st.error if alert.severity == "critical" else st.warning)(
            text, icon=":material/notifications_active:"
        )
    incidents = data.query("incidents", since=v.since)
    for incident in incidents[incidents["ended_at"].isna()].itertuples():
        st.error(
            f"**Ongoing incident: {incident.subject}** ({incident.scope}) since "
            f"{v.stamp(incident.started_at)}: {incident.requests_affected} requests affected, "
            f"{incident.answered_by_fallback} answered by fallback, {incident.failed} failed; "
            f"extra cost {data.usd(incident.extra_cost_usd)}. Top error: {incident.top_error}",
            icon=":material/emergency:",
        )


def _status_strip(v: data.View) -> None:
    recent = data.query("minute_rollups", since=(v.now - timedelta(minutes=10)).replace(second=0))
    events = data.query("breaker_events", since=(v.now - timedelta(days=7)).replace(second=0))
    alive = data.query(
        "live_processes", since=(v.now - figures.PROCESS_GONE_AFTER).replace(second=0)
    )
    breakers = figures.breaker_states(events, set(alive.itertuples(index=False, name=None)), v.now)
    providers = figures.provider_status(recent, breakers, v.now)
    routes = figures.route_status(recent, v.now)
    left, right = st.columns(2)
    with left:
        st.markdown("**Providers** (last 5 min)")
        for p in providers.itertuples():
            share = "" if p.fault_share is None else f" · {p.fault_share:.0%} failing"
            breaker = f" · breaker {p.breakers}" if p.breakers else ""
            st.markdown(
                f":{STATUS_COLORS[p.status]}[● **{p.provider}** {p.status}]{share}{breaker}"
            )
    with right:
        st.markdown("**Routes** (last 5 min)")
        for r in routes.itertuples():
            st.markdown(
                f":{STATUS_COLORS[r.status]}[● **{r.route}** {r.status}] · "
                f"{r.requests} requests · fallback {_pct(r.fallback_rate)} · {r.failed} failed"
            )


def _kpis(v: data.View) -> None:
    rollups = data.rollups(v)
    p99 = None
    if v.grain == "minute":
        latency = data.query("attempt_latency", since=v.since)
        p99 = float(latency["p99_ms"].iloc[0]) if len(latency) else None
    k = figures.kpis(rollups, p99, v.window)
    cells = st.columns(6)
    cells[0].metric("Requests/min", f"{k.requests_per_min:,.1f}", help=define("requests"))
    cells[1].metric("Availability", _pct(k.availability), help=define("availability"))
    cells[2].metric("Fallback rate", _pct(k.fallback_rate), help=define("fallback rate"))
    p99_text = "—" if k.latency_p99_ms is None else f"{k.latency_p99_ms / 1000:,.2f} s"
    cells[3].metric("Latency p99", p99_text, help=define("latency p50 / p95 / p99"))
    cells[4].metric("Cost/hour", data.usd(k.cost_per_hour, 4), help=define("cost"))
    cells[5].metric(
        "Fallback premium/hour", data.usd(k.premium_per_hour, 4), help=define("fallback premium")
    )
    if k.unpriced_attempts:
        st.warning(
            f"{k.unpriced_attempts} attempts used models without a known price: not in the cost."
        )
    if rollups.empty:
        st.caption(f"No requests in the last {v.label}.")
        return
    local = rollups.assign(bucket=v.local(rollups["bucket"]))
    left, right = st.columns(2)
    left.plotly_chart(charts.outcomes(figures.outcomes_by_bucket(local)), width="stretch")
    rates = figures.rates_by_bucket(local)
    right.plotly_chart(charts.line(rates, {"fallback rate": "fallback_rate"}, "Fallback rate",
                                   "share of requests"), width="stretch")  # fmt: skip
    if v.grain == "minute":
        latency = data.query("attempt_latency_by_minute", since=v.since)
    else:
        latency = figures.latency_by_hour(rollups)
    latency = latency.assign(bucket=v.local(latency["bucket"]))
    left.plotly_chart(charts.line(latency, {"p50": "p50_ms", "p99": "p99_ms"}, "Latency",
                                  "ms"), width="stretch")  # fmt: skip
    right.plotly_chart(charts.line(rates, {"cost": "cost_usd", "fallback premium": "premium_usd"},
                                   "Cost", "USD"), width="stretch")  # fmt: skip


def _recent_failures(v: data.View) -> None:
    failed = data.query("recent_attempts", since=v.since, outcome="error", limit=50)
    st.markdown("**Recent failed attempts**, with the decision taken")
    if failed.empty:
        st.caption("None in this window.")
        return
    shown = failed.assign(started_at=v.local(failed["started_at"]))[
        ["started_at", "route", "target", "error_class", "http_status", "fault_kind", "decision",
         "error_message", "request_id"]
    ]  # fmt: skip
    st.dataframe(shown, hide_index=True, width="stretch")


@st.fragment(run_every=data.REFRESH_S)
def live() -> None:
    v = data.view()
    if not data.manifest():
        data.empty_state()
        return
    _alerts_and_incidents(v)
    _status_strip(v)
    _kpis(v)
    _recent_failures(v)


st.title("Live")
live()
