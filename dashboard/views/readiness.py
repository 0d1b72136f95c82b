"""Readiness: is every backup ready to take the traffic? Per route, the latest eval run (each
target's pass rate against the route's minimum, the cases that failed, the runs before it),
the latest fault drill and what it found, and how often each target's answers broke their
contract over the window. Evals and drills are recorded by `switchover eval` and
`switchover drill`; this page only reads their published snapshots."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, readiness_metrics
from dashboard.definitions import define
from engine.core.formats import format_latency

st.title("Readiness")
st.caption(
    "Is every backup ready to take the traffic? An eval runs your cases through each target "
    "of a route, in isolation; a drill makes one target fail on purpose and watches the "
    "backups take over."
)
v = data.view()
if not data.manifest():
    data.empty_state()
    st.stop()

runs = data.query("eval_runs")
drills = data.query("drills")
primaries = data.query("route_primaries")
names = readiness_metrics.routes(runs, drills, primaries)
if not names:
    st.info(
        "No route has traffic, an eval or a drill yet. Run "
        "`switchover eval cases.toml --route support` (docs/evals.md).",
        icon=":material/fact_check:",
    )
    st.stop()
route = st.selectbox("Route", names, key="readiness_route")
primary = readiness_metrics.primary_of(primaries, route)

st.subheader("Evals")
scores = data.query("eval_scores", route=route)
if scores.empty:
    st.info(
        f"No eval run for {route} yet. Run `switchover eval cases.toml --route {route}` "
        "(docs/evals.md): every case goes through each target of the route, and each target's "
        "pass rate is compared with the route's minimum.",
        icon=":material/fact_check:",
    )
else:
    run = readiness_metrics.latest_run(scores)
    latest = run.iloc[0]
    st.caption(
        f"Latest run {v.stamp(latest.started_at)} · `{latest.cases_file}` · "
        f"{int(run['cases'].max())} cases · minimum pass rate {latest.min_pass_rate:.0%}"
    )
    for sentence in readiness_metrics.below_minimum(run, primary):
        st.warning(sentence, icon=":material/report:")
    targets = readiness_metrics.target_table(run, primary)
    st.dataframe(
        targets.assign(
            cost_usd=targets["cost_usd"].map(readiness_metrics.cost_text),
            latency_p50_ms=targets["latency_p50_ms"].map(format_latency),
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "pass_rate": st.column_config.ProgressColumn(
                "pass rate", format="percent", help=define("pass rate")
            ),
            "passed": st.column_config.TextColumn("passed / cases"),
            "latency_p50_ms": st.column_config.TextColumn("p50 latency"),
            "cost_usd": st.column_config.TextColumn(
                "cost of the run", help=define("cost of an eval run")
            ),
            "minimum": st.column_config.TextColumn(
                "minimum pass rate", help=define("minimum pass rate")
            ),
        },
    )
    failed = readiness_metrics.failed_cases(data.query("eval_results", run_id=latest.run_id))
    with st.expander(f"Failed cases of the latest run ({len(failed)})", expanded=False):
        if failed.empty:
            st.caption("Every case passed on every target.")
        else:
            st.dataframe(
                failed.assign(latency_ms=failed["latency_ms"].map(format_latency)),
                hide_index=True,
                width="stretch",
                column_config={"latency_ms": "latency"},
            )
    past = readiness_metrics.history(scores)
    left, right = st.columns(2)
    left.plotly_chart(charts.pass_rates(run, latest.min_pass_rate), width="stretch")
    if len(past):
        right.plotly_chart(
            charts.pass_rate_history(
                past.assign(started_at=v.local(past["started_at"])), latest.min_pass_rate
            ),
            width="stretch",
        )

st.subheader("Drills")
mine = drills[drills["route"] == route]
example = primary or (scores["target"].iloc[0] if len(scores) else "provider/model")
if mine.empty:
    st.info(
        f"No drill on {route} yet. Run a drill: `switchover drill --route {route} --target "
        f"{example} --for 5m` makes that target fail as if its key were invalid, and the "
        "report shows whether the backups took the traffic.",
        icon=":material/crisis_alert:",
    )
for waiting in readiness_metrics.not_reported(mine).itertuples():
    st.info(readiness_metrics.waiting_text(waiting, v.stamp), icon=":material/timer:")
drill = readiness_metrics.latest_report(mine)
if drill is not None:
    took = readiness_metrics.duration_text((drill.ended_at - drill.started_at).total_seconds())
    st.markdown(
        f"Latest drill report: **{drill.target}** made to fail from "
        f"{v.stamp(drill.started_at)} for {took}, requested by {drill.requested_by}."
    )
    cells = [*st.columns(3), *st.columns(3)]  # three a row: room for "cost $0.0022 more"
    served = readiness_metrics.count_text(drill.served_by_backups)
    requests = readiness_metrics.count_text(drill.requests)
    opened = readiness_metrics.seconds_text(drill.breaker_opened_after_s)
    cells[0].metric("Verdict", str(drill.verdict), help=define("drill verdict"))
    cells[1].metric(
        "Served by backups", f"{served} of {requests}", help=define("served by backups")
    )
    cells[2].metric(
        "Failed requests",
        readiness_metrics.count_text(drill.failed),
        help=define("failed in the drill"),
    )
    cells[3].metric("Breaker opened after", opened, help=define("breaker opened after"))
    cells[4].metric(
        "Cost difference",
        readiness_metrics.change_text(drill.cost_difference_usd),
        help=define("cost difference"),
    )
    restored, after = readiness_metrics.restored_text(drill.restored, drill.restored_after_s)
    cells[5].metric(
        "Restored", restored, after, delta_color="off", delta_arrow="off", help=define("restored")
    )
    reasons = readiness_metrics.drill_why(drill)
    if reasons:  # a failed drill always says why, never only "failed" and its figures
        st.error(
            "**Why the drill failed**\n\n" + "\n".join(f"- {r}" for r in reasons),
            icon=":material/report:",
        )
    elif isinstance(drill.summary, str) and drill.summary:
        {"passed": st.success}.get(drill.verdict, st.info)(drill.summary)
    note = readiness_metrics.preflight_note(drill)
    if note and not reasons:  # a failed drill's reasons include it already
        st.caption(note[0].upper() + note[1:] + ".")

st.subheader("Quality errors")
quality = readiness_metrics.quality_by_target(data.rollups(v, route=route))
if quality.empty:
    st.caption(f"No requests on {route} in the last {v.label}.")
else:
    st.caption(
        f"Answers that broke {route}'s output contract or a tool's schema, in the last "
        f"{v.label}, counted on the target that gave them."
    )
    st.dataframe(
        quality,
        hide_index=True,
        width="stretch",
        column_config={
            "quality_errors": st.column_config.NumberColumn(
                "quality errors", help=define("quality errors")
            ),
            "per_answered": st.column_config.ProgressColumn(
                "quality errors per answered",
                format="percent",
                help=define("quality errors per answered"),
            ),
        },
    )
