"""Incidents & alerts: every incident (a target failing in one way) with its timeline, impact
and cost; one incident in detail (what failed, where its routes' traffic went, its targets'
breakers, what it cost), only its routes and targets, each target in its dashboard-wide colour;
the fault drills of the period (failures made on purpose, listed apart from the incidents);
the alert history, what was delivered to whom, and silences."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, data, first_paint, operator, widgets
from dashboard.cost_parts import extra_cost_parts, usd_column, usd_column_and_total
from dashboard.definitions import define
from dashboard.metrics import incident_table, traffic_by_target
from dashboard.readiness_metrics import drill_table
from engine.core.money import format_usd

RANGES = {"24 h": timedelta(days=1), "7 d": timedelta(days=7), "35 d": timedelta(days=35)}
AROUND = timedelta(minutes=10)  # the detail charts show this much before and after


def in_target_colours(fig: go.Figure) -> go.Figure:
    """Each trace in its target's colour, the one it has on every page (charts.colour_of);
    requests nothing answered in the colour the Live page gives them."""
    for trace in fig.data:
        colour = charts.FAILED if trace.name == "failed" else charts.colour_of(trace.name)
        trace.marker.color = colour
    return fig


def period_headline(
    v: data.View, since: datetime, table: pd.DataFrame, extra_total: str, alerts: pd.DataFrame
) -> None:
    """The period at a glance, drawn first: how many incidents and how many still going, what
    they did to requests and cost (each the total of the table's column below), and how many
    alerts fired."""
    shown = [
        ("Incidents", f"{len(table):,}", "incidents in the period"),
        ("Ongoing now", f"{int(table['ended_at'].isna().sum()):,}", "ongoing incidents"),
        ("Alerts fired", f"{len(alerts):,}", "alerts fired in the period"),
        ("Requests affected (all incidents)", f"{int(table['requests_affected'].sum()):,}",
         "requests affected by all incidents"),
        ("Failed (all incidents)", f"{int(table['failed'].sum()):,}", "failed in all incidents"),
        ("Extra cost (all incidents)", extra_total, "extra cost of all incidents"),
    ]  # fmt: skip
    with st.container(key="incidents_headline"):
        st.markdown(f"**The period at a glance**: {v.stamp(since)} to now ({v.tz.key})")
        cells = [*st.columns(3), *st.columns(3)]  # room for "saved $0.0168"
        for cell, (name, value, term) in zip(cells, shown, strict=True):
            cell.metric(name, value, help=define(term))


st.title("Incidents & alerts")
v = data.view()
if not data.manifest():
    data.empty_state()
    st.stop()
span = widgets.one_of("Since", list(RANGES), default="7 d", key="incident_range")
since = (v.now - RANGES[span]).replace(second=0, microsecond=0)

incidents = data.query("incidents", since=since)
alerts = data.query("alerts", since=since)
table = incident_table(incidents, v.now)
extra_costs, extra_total = usd_column_and_total(table["extra_cost_usd"], change=True)
period_headline(v, since, table, extra_total, alerts)
headline_drawn = first_paint.mark()
st.subheader("Incidents")
if incidents.empty:
    st.success("No incident in this period: no target failed beyond its threshold.")
else:
    first_paint.before_charts(headline_drawn)
    timeline = charts.timeline(
        table.assign(start=v.local(table["started_at"]), end=v.local(table["end"])),
        "start",
        "end",
        "what",
        "subject",
        "Incidents",
    )
    st.plotly_chart(in_target_colours(timeline), width="stretch")
    shown = table.assign(
        extra_cost=extra_costs,
        wasted=usd_column(table["wasted_usd"]),
    )
    st.dataframe(
        v.table(
            shown,
            [
                "started_at",
                "duration",
                "what",
                "routes",
                "peak_fault_rate",
                "requests_affected",
                "answered_by_fallback",
                "failed",
                "extra_cost",
                "wasted",
                "top_error",
            ],
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "started_at": st.column_config.TextColumn(f"started at ({v.tz.key})"),
            "peak_fault_rate": st.column_config.ProgressColumn("peak fault rate", format="percent"),
            "extra_cost": st.column_config.TextColumn("extra cost", help=define("extra cost")),
            "wasted": st.column_config.TextColumn("wasted", help=define("wasted")),
            "requests_affected": st.column_config.NumberColumn(help=define("requests affected")),
        },
    )

    labels = {
        row.incident_id: f"{row.what} · {v.stamp(row.started_at)} · {row.duration}"
        for row in table.itertuples()
    }
    chosen = st.selectbox("One incident", list(labels), format_func=labels.get, key="incident")
    incident = table[table["incident_id"] == chosen].iloc[0]
    cells = [*st.columns(3), *st.columns(3), *st.columns(3)]  # room for "cost $0.0168 more"
    cells[0].metric(
        "Requests affected", f"{incident.requests_affected:,}", help=define("requests affected")
    )
    cells[1].metric(
        "Answered by fallback",
        f"{incident.answered_by_fallback:,}",
        help=define("answered by fallback"),
    )
    cells[2].metric("Failed", f"{incident.failed:,}", help=define("unavailable"))
    # Extra cost = fallback premium + re-warm, premium = price difference + cache loss: at
    # one precision, each identity holding as shown.
    money = extra_cost_parts(
        incident.price_difference_usd, incident.cache_loss_usd, incident.rewarm_usd
    )
    cells[3].metric("Fallback premium", money["fallback premium"], help=define("fallback premium"))
    cells[4].metric(
        "of which price difference", money["price difference"], help=define("price difference")
    )
    cells[5].metric("of which cache loss", money["cache loss"], help=define("cache loss"))
    cells[6].metric("Re-warm", money["re-warm"], help=define("re-warm"))
    cells[7].metric("Extra cost", money["extra cost"], help=define("extra cost"))
    cells[8].metric("Wasted", format_usd(incident.wasted_usd), help=define("wasted"))
    routes = incident.route_list
    st.caption(
        f"**{incident.what}** · routes affected: {', '.join(routes) or 'none'} · "
        f"top error: {incident.top_error or 'none recorded'}"
    )
    # What-if replays it: its window, the fault schedule its attempts show, its traffic.
    if chosen in set(data.query("replayable_incidents", since=since)["incident_id"]):
        if st.button(
            "Replay with another backup",
            icon=":material/science:",
            key="incident_replay",
            help="What-if on this incident's window, fault "
            "schedule and traffic, with the backups you choose",
        ):
            st.switch_page("views/whatif.py", query_params={"incident": chosen})
    else:
        st.caption(
            "It can be replayed with another backup once it has ended and the scheduler "
            "has published its minutes."
        )
    drilled = incident.get("during_drills")
    if isinstance(drilled, str) and drilled:
        st.info(
            f"During drill {drilled}: a fault drill held a target of these routes down "
            "meanwhile. The drill's own fallbacks are not counted here; the requests that "
            "failed are, and the drill caused them."
        )
    lo, hi = incident["started_at"] - AROUND, incident["end"] + AROUND
    grain = "minute" if lo >= v.now - data.MINUTE_DATA else "hour"
    around = data.query(f"{grain}_rollups", since=lo, until=hi)
    # Only what the incident touched: its routes, and the targets that failed or served them.
    traffic = traffic_by_target(around, routes)
    involved = {incident.subject, *traffic["served by"]} - {"failed"}
    if not traffic.empty:
        shown = traffic.assign(bucket=v.local(traffic["bucket"]))
        fig = charts.stacked(
            shown, "bucket", "requests", "served by", "Where the traffic went", "requests"
        )
        st.plotly_chart(in_target_colours(fig), width="stretch")
    events = data.query("breaker_events", since=lo, until=hi)
    events = events[events["target"].isin(involved)]
    if not events.empty:
        st.markdown("**Breakers** of these targets in and around the incident")
        st.dataframe(
            v.table(
                events,
                [
                    "occurred_at",
                    "target",
                    "from_status",
                    "to_status",
                    "reason",
                    "host",
                    "process_id",
                ],
            ),
            hide_index=True,
            width="stretch",
            column_config={"occurred_at": f"occurred at ({v.tz.key})"},
        )

st.subheader("Drills")
st.caption(
    "A drill is not an incident: its target was made to fail on purpose "
    "(`switchover drill`) to check that the backups take the traffic, and incident "
    "detection leaves its fallbacks out. Its report is on the Readiness page."
)
drills = data.query("drills", since=since)
if drills.empty:
    st.caption("No drill in this period.")
else:
    shown = drill_table(drills, v.now)
    st.dataframe(
        v.table(shown, list(shown.columns)),
        hide_index=True,
        width="stretch",
        column_config={
            "started_at": f"started at ({v.tz.key})",
            "verdict": st.column_config.TextColumn(help=define("drill verdict")),
        },
    )

st.subheader("Alerts")
if alerts.empty:
    st.success("No alert fired in this period.")
else:
    st.dataframe(
        v.table(
            alerts,
            [
                "state",
                "severity",
                "rule",
                "subject",
                "fired_at",
                "resolved_at",
                "summary",
                "notified",
                "silenced",
            ],
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "fired_at": f"fired at ({v.tz.key})",
            "resolved_at": f"resolved at ({v.tz.key})",
        },
    )

deliveries = data.query("alert_notifications", since=since)
st.markdown("**Deliveries**")
if deliveries.empty:
    st.caption("Nothing sent: no receiver is configured, or nothing fired.")
else:
    failing = deliveries[deliveries["status"].isin(["failed", "retrying"])]
    if len(failing):
        st.error(f"{len(failing)} notifications not delivered: see their last error below.")
    st.dataframe(
        v.table(
            deliveries,
            [
                "created_at",
                "event",
                "receiver",
                "status",
                "attempts",
                "last_http_status",
                "last_error",
                "alert_id",
            ],
        ),
        hide_index=True,
        width="stretch",
        column_config={"created_at": f"created at ({v.tz.key})"},
    )

st.subheader("Silences")
active = data.query("alert_silences", since=v.now)
if len(active):
    st.dataframe(
        v.table(active, ["rule", "subject", "starts_at", "ends_at", "reason", "created_by"]),
        hide_index=True,
        width="stretch",
        column_config={"created_by": "by"},
    )
operator.silence_form()  # for a person signed in only (dashboard.sign_in)
