"""Live: during an incident, which target is failing, since when, who serves each route now,
what it costs, and who was told. One clock: every figure counts to the data's time (the
scheduler's last cycle), said once at the top as "as of"; the breakers are the gateway's own,
as of the moment they were read. The headline figures and the health lines are over the last
5 min up to the data's time (rates over the exact time elapsed), each beside the same figure
over the sidebar's window, who serves a route now beside who served it over the 5 min; every
figure names its window ("last 5 min", "in this incident so far", "this week"). The timelines
cover the window, with incidents, alerts and drills marked and the bucket still being counted
drawn lighter. Refreshes itself every 5 s; reads through dashboard.data only: the published
snapshots (never the DuckDB file) and the breakers the gateway uses, falling back to the
published breaker events, labelled with their age, when neither it nor its store answers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, data, first_paint, freshness, live_reads, metrics, operator
from dashboard.definitions import define
from dashboard.live_breakers import LiveBreakers
from dashboard.live_reads import ATTEMPTS_KEPT, RECENT_FAILED, LiveAttempts
from dashboard.metrics import Span
from engine.config.slo import target_text
from engine.core.formats import format_latency
from engine.core.money import format_change, format_usd
from engine.fallback.learned_limits import FLOOR_S, MIN_STREAMS, MULTIPLE
from engine.published.learned_timeouts import WINDOW as LEARNING_WINDOW
from engine.published.learned_timeouts import learn

STATUS_COLORS = {"healthy": "green", "degraded": "orange", "down": "red", "idle": "gray"}
PERCENTILES = {"p50_ms": "p50", "p99_ms": "p99"}  # column → the line's name
MONEY = {"cost_usd": "cost", "premium_usd": "fallback premium"}
# The burn-rate windows of slo_status, as the page says them.
BURN_LABELS = {"5 min": "5m", "30 min": "30m", "1 h": "1h", "6 h": "6h", "3 d": "3d"}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _per_hour(change: str) -> str:
    """ "saved $0.12/h"; "no difference" is no rate."""
    return change if change == "no difference" else f"{change}/h"


def _as_of(v: data.View, as_of: datetime, told: LiveBreakers) -> None:
    """The one clock of the page's figures, and the moment the breakers were read."""
    breakers = (
        f"breakers as {_told_by(told)} holds them at {v.clock(told.taken_at, True)} {v.tz.key}"
        if told.source
        else "breakers from the published events (the gateway could not be read)"
    )
    st.caption(
        f"As of {v.clock(as_of, True)} {v.tz.key}: the time of the published data (the "
        f"scheduler's last cycle), which every figure below counts to; {breakers}.",
        help=define("as of"),
    )


def _told_by(told: LiveBreakers) -> str:
    if told.source == "gateway":
        return f"the gateway ({told.where})"
    kind = "Redis" if told.source == "redis" else "the data folder's file"
    return f"the breaker store the gateway uses ({kind}: {told.where})"


def _banners(v: data.View, as_of: datetime, alerts: pd.DataFrame, incidents: pd.DataFrame) -> None:
    """The alerts firing, critical ones in red and the others in yellow, one box each, then
    every ongoing incident, its figures counted since it began: red only when requests failed
    (a fallback that carried everything is a warning, and a saving never sits in a red box of
    its own)."""
    firing = alerts[alerts["state"] == "firing"]
    for critical, box in ((True, st.error), (False, st.warning)):
        mine = firing[(firing["severity"] == "critical") == critical]
        lines = [
            f"- **{a.rule}** since {v.short(a.fired_at)}{' (silenced)' if a.silenced else ''}: "
            f"{a.summary}"
            for a in mine.itertuples()
        ]
        if lines:
            kind = "critical alert" if critical else "alert"
            head = f"**{len(lines)} {kind}{'s' if len(lines) > 1 else ''} firing**"
            box("\n".join([head, *lines]), icon=":material/notifications_active:")
    for incident in incidents[incidents["ended_at"].isna()].itertuples():
        began = v.short(incident.started_at)
        (st.error if incident.failed else st.warning)(
            f"**Ongoing incident** since {began} · in this incident so far ({began}–"
            f"{v.clock(as_of, True)} {v.tz.key}): " + metrics.incident_summary(incident),
            icon=":material/emergency:",
        )


def _headline(
    v: data.View,
    recent: Span,
    window: Span,
    minutes: pd.DataFrame,
    rollups: pd.DataFrame,
    attempts: LiveAttempts,
) -> None:
    now = metrics.kpis(recent.of(minutes), attempts.p99_recent_ms, recent.length)
    worst_hour = v.grain == "hour"  # no exact p99 over a week: the worst hour's
    over = metrics.kpis(window.of(rollups), attempts.p99_window_ms, window.length)
    w = v.label
    shown = [
        ("Requests/min", f"{now.requests_per_min:,.1f}", f"{over.requests_per_min:,.1f}/min",
         "requests"),
        ("Availability", _pct(now.availability), _pct(over.availability), "availability"),
        ("Fallback rate", _pct(now.fallback_rate), _pct(over.fallback_rate), "fallback rate"),
        ("Latency p99", format_latency(now.latency_p99_ms),
         format_latency(over.latency_p99_ms) + (" (worst hour)" if worst_hour else ""),
         "latency p50 / p95 / p99"),
        ("Cost/hour", format_usd(now.cost_per_hour), f"{format_usd(over.cost_per_hour)}/h",
         "cost"),
        ("Fallback premium/hour", format_change(now.premium_per_hour),
         _per_hour(format_change(over.premium_per_hour)), "fallback premium"),
    ]  # fmt: skip
    st.markdown(
        f"**All routes, last 5 min**: {v.clock(recent.start)}–{v.clock(recent.end, True)} "
        f"{v.tz.key} ({metrics.duration(recent.length)}), {now.requests:,} requests · under each "
        f"figure, the same over {w} ({v.stamp(window.start)}–{v.clock(window.end, True)}, "
        f"{over.requests:,} requests)",
        help=define("last 5 min"),
    )
    cells = [*st.columns(3), *st.columns(3)]  # three a row: room for "saved $0.0168"
    for cell, (name, value, beside, term) in zip(cells, shown, strict=True):
        cell.metric(f"{name} · last 5 min", value, help=define(term))
        cell.caption(f"{w}: {beside}")
    if over.unpriced_attempts:
        st.warning(
            f"{over.unpriced_attempts:,} attempts in the {w} used models without a known "
            "price: they are not in the cost."
        )


def _breakers(v: data.View, as_of: datetime, told: LiveBreakers) -> tuple[pd.DataFrame, str]:
    """The breakers as the gateway holds them, and where they come from; the published events
    (as of the data's time) only when neither the gateway nor its store could be read, saying
    so and how old they are."""
    if told.source:
        where = f"now, from {_told_by(told)} at {v.clock(told.taken_at, True)} {v.tz.key}"
        if not told.shared:
            where += " (one worker's: its breakers are not shared)"
        if told.problems:
            st.caption(f"Breakers: {'; '.join(told.problems)}.")
        return metrics.told_breakers(told.breakers, told.taken_at), where
    week = (as_of - timedelta(days=7)).replace(second=0, microsecond=0)
    events = data.query("breaker_events", since=week)
    gone = (as_of - metrics.PROCESS_GONE_AFTER).replace(second=0, microsecond=0)
    alive = data.query("live_processes", since=gone)
    breakers = metrics.breaker_states(events, set(alive.itertuples(index=False, name=None)), as_of)
    age = metrics.duration(v.now - as_of)
    said = f"from the published events as of {v.clock(as_of, True)} {v.tz.key}, {age} old"
    st.warning(
        f"Breakers: {'; '.join(told.problems)}. Shown {said}: they lag the gateway by a "
        "scheduler cycle or more, and a breaker may have moved since.",
        icon=":material/sync_problem:",
    )
    return breakers, said


def _health(
    v: data.View,
    as_of: datetime,
    recent: Span,
    minutes: pd.DataFrame,
    rollups: pd.DataFrame,
    drills: pd.DataFrame,
    told: LiveBreakers,
    attempts: LiveAttempts,
) -> None:
    breakers, where = _breakers(v, as_of, told)
    failures = attempts.failures_recent
    last = recent.of(minutes)
    seen = set(rollups["target"]) if len(rollups) else set()
    primaries = data.query("route_primaries")
    routes_primary = dict(zip(primaries["route"], primaries["target"], strict=True))
    targets = metrics.target_health(last, breakers, failures, as_of, seen, drills, routes_primary)
    routes, shares = metrics.route_status(last), metrics.serving_shares(last)
    now = metrics.serving_shares(attempts.served_last_minute)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Targets** · last 5 min; breakers {where}", help=define("target status"))
        for t in targets.itertuples():
            st.markdown(f":{STATUS_COLORS[t.status]}[● **{t.target}** {t.status}] · {t.summary}")
        if targets.empty:
            st.caption("No target has been called in this window.")
    with right:
        st.markdown("**Routes** · who answered, now and over the last 5 min",
                    help=define("served by"))  # fmt: skip
        for r in routes.itertuples():
            st.markdown(
                f":{STATUS_COLORS[r.status]}[● **{r.route}** {r.status}] · last 5 min: "
                f"{r.requests:,} requests · fallback {_pct(r.fallback_rate)} · {r.failed:,} "
                f"failed  \n{metrics.serving_line(now, shares, r.route)}"
            )
        if routes.empty:
            st.caption("No requests in the last 5 minutes.")


def _error_budgets(v: data.View, status: pd.DataFrame) -> None:
    """Each [[slo]]: this week's error budget left (the weekly report's week and figures) and
    how fast it burns now, over each window of the burn-rate alerts."""
    if status.empty:
        return
    first = status.iloc[0]
    st.markdown(
        f"**Error budgets** · this week ({v.stamp(first.week_start)} to "
        f"{v.clock(first.as_of)} {v.tz.key}), drills aside; burn rates now",
        help=define("error budget"),
    )
    for s in status.itertuples():
        st.markdown(f"**{s.slo}** ({s.route}, target {target_text(s.target)}): {_left(s)}  \n"
                    f"burning {_burns(s)}")  # fmt: skip


def _left(s: Any) -> str:
    if pd.isna(s.budget_left):
        return "no request counted this week yet"
    failed = f"{int(s.failed):,} of {int(s.counted):,} requests failed"
    if s.budget_left < 0:
        return f"this week: budget overspent by {-s.budget_left:.0%} ({failed})"
    left = f"this week: {s.budget_left:.0%} of the budget left ({failed}"
    if pd.isna(s.failures_left):
        return left + ")"
    more = max(0, int(s.failures_left))
    return left + f"; {more:,} more may fail by the week's end at this traffic)"


def _burns(s: Any) -> str:
    said = []
    for label, name in BURN_LABELS.items():
        rate = getattr(s, f"burn_{name}")
        said.append(f"{label} {'—' if pd.isna(rate) else f'{rate:,.1f}×'}")
    return " · ".join(said)


def _learned_limits(v: data.View, as_of: datetime) -> None:
    """For each route that learns its first-token limit: each target's limit now and the
    evidence behind it, as the gateway reads it (engine.published.learned_timeouts)."""
    config = data.configuration()
    routes = [r for r in config.routes.values() if r.options.learned_first_token] if config else []
    if not routes:
        return
    since = as_of - LEARNING_WINDOW
    learned = learn(data.query("target_latency", since=since), since)
    hours = LEARNING_WINDOW.total_seconds() / 3600
    st.markdown(f"**First-token limits learned** · from the last {hours:g} h of streamed "
                f"answers ({MULTIPLE:g} × p99, at least {FLOOR_S:g} s, at most the route's "
                "limit)", help=define("learned first-token limit"))  # fmt: skip
    for route in routes:
        static = route.policy.first_token_timeout_s
        lines = []
        for target in route.targets:
            got = learned.get(target.name)
            if got is None:
                lines.append(f"{target.name}: {static:g} s, the route's (fewer than "
                             f"{MIN_STREAMS} streams to learn from)")  # fmt: skip
            else:
                lines.append(f"{target.name}: **{got.capped(static):.1f} s** (p99 "
                             f"{got.ttft_p99_s:.2f} s over {got.streams:,} streams)")  # fmt: skip
        st.markdown(f"**{route.name}**  \n" + "  \n".join(lines))


def _timelines(
    v: data.View,
    window: Span,
    rollups: pd.DataFrame,
    markers: pd.DataFrame,
    attempts: LiveAttempts,
) -> None:
    counting = pd.Timestamp(window.end).floor(pd.Timedelta(v.bucket)).to_pydatetime()
    drawn = _timeline_figures(str(data.data_paths().published), window.end, v.label, v.tz.key,
                              _v=v, _window=window, _rollups=rollups, _markers=markers,
                              _attempts=attempts)  # fmt: skip
    for pair in (drawn[i : i + 2] for i in range(0, len(drawn), 2)):
        for cell, chart in zip(st.columns(2), pair, strict=False):
            if isinstance(chart, str):  # nothing to draw: say so, never an empty chart
                cell.caption(chart)
            else:
                cell.plotly_chart(chart, width="stretch")
    st.caption(
        f"Each bar or point is one {v.grain}, in {v.tz.key}. Shaded: incidents (red) and drills "
        f"(blue); dotted lines: alerts fired (red) and resolved (green). From "
        f"{v.clock(counting)} on, lighter: still being counted, not a drop. A premium below "
        "zero is a saving: the backups cost less than the primary would have."
        + (" Attempt timelines cover the last 24 h." if window.length > ATTEMPTS_KEPT else ""),
        help=define("still counting") + " " + define("failure classes"),
    )
    _markers(v, markers)


# Building the six figures is most of a refresh's work; they follow from the published folder,
# the data's time (its cycle), the window and the zone alone (the other arguments are derived
# from those, so they are not hashed): every refresh and every viewer of one cycle shares one.
@st.cache_resource(max_entries=32, show_spinner=False)
def _timeline_figures(
    published: str, as_of: datetime, label: str, tz: str, *, _v: data.View, _window: Span,
    _rollups: pd.DataFrame, _markers: pd.DataFrame, _attempts: LiveAttempts,
) -> list[Any]:  # fmt: skip
    v, window, rollups = _v, _window, _rollups
    counting = pd.Timestamp(window.end).floor(pd.Timedelta(v.bucket)).to_pydatetime()
    t = charts.Timeline(window.start, counting + v.bucket, counting, v.tz, _markers)
    failures = metrics.failures_by_class(_attempts.failures)
    latency, streams = _attempts.latency, _attempts.streams
    ttft = metrics.as_series(streams, PERCENTILES, "ms", by="route")
    money = metrics.as_series(metrics.rates_by_bucket(rollups), MONEY, "usd")
    targets = {**charts.colours(sorted(set(rollups["target"]))), "failed": charts.FAILED}
    by_route = charts.route_colours({*rollups.get("route", []), *streams["route"]})
    routes = {s: by_route[s.rsplit(" ", 1)[0]] for s in ttft["series"]}
    return [
        charts.timeline_bars(metrics.traffic_by_target(rollups) if len(rollups) else rollups,
                             "requests", "served by", targets,
                             "Requests by the target that answered", "requests", t,
                             order=list(targets)),
        charts.timeline_lines(metrics.fallback_by_route(rollups), "fallback_rate", "route",
                              "Fallback rate by route", "share of requests", t,
                              colour_map=by_route, unit="share"),
        "No failed attempts in this window." if failures.empty else charts.timeline_bars(
            failures, "attempts", "failure", charts.FAILURE_COLOURS, "Failed attempts by class",
            "attempts", t, order=metrics.FAILURE_CLASSES),
        charts.timeline_lines(metrics.as_series(latency, PERCENTILES, "ms"), "ms", "series",
                              "Latency of attempts", "ms", t, dotted=["p99"]),
        "No streamed answers in this window." if ttft.empty else charts.timeline_lines(
            ttft, "ms", "series", "Time to first token, streamed routes", "ms", t,
            colour_map=routes, dotted=[s for s in routes if s.endswith("p99")]),
        charts.timeline_lines(money, "usd", "series", "Cost and fallback premium",
                              f"USD per {v.grain}", t, unit="usd"),
    ]  # fmt: skip


def _markers(v: data.View, markers: pd.DataFrame) -> None:
    if markers.empty:
        return
    counts = markers["kind"].value_counts()
    said = ", ".join(f"{counts[k]} {k}{'s' if counts[k] > 1 else ''}" for k in counts.index)
    with st.expander(f"Marked on the timelines: {said}"):
        shown = pd.DataFrame(
            {
                "what": markers["label"],
                "from": markers["start"].map(v.stamp),
                "to": markers["end"].map(v.stamp).where(~markers["ongoing"], "ongoing"),
            }
        )
        st.dataframe(shown, hide_index=True, width="stretch")


def _recent_failures(v: data.View, failed: pd.DataFrame) -> None:
    st.markdown(f"**Recent failed attempts** · {v.label}, the latest {RECENT_FAILED}, with the "
                "decision taken")  # fmt: skip
    if failed.empty:
        st.caption("None in this window.")
        return
    columns = ["route", "target", "error_class", "http_status", "fault_kind", "decision",
               "error_message", "request_id"]  # fmt: skip
    said = failed[columns].astype(object).where(failed[columns].notna(), "—")
    said["http_status"] = said["http_status"].map(lambda s: s if s == "—" else str(int(s)))
    shown = said.assign(started_at=v.local(failed["started_at"]))[["started_at", *columns]]
    when = st.column_config.DatetimeColumn(f"started at ({v.tz.key})", format="MMM D, HH:mm:ss")
    st.dataframe(shown, hide_index=True, width="stretch", column_config={"started_at": when})


@st.fragment(run_every=data.REFRESH_S)
def live() -> None:
    v = data.view()
    freshness.warnings(v)  # here, not in the sidebar: dashboard.freshness says why
    if not data.manifest():
        data.empty_state()
        return
    as_of = data.as_of(v)
    recent = metrics.span_to(as_of, metrics.RECENT)
    window = metrics.span_to(as_of, v.window, v.bucket)
    rollups = data.query(f"{v.grain}_rollups", since=window.start)
    minutes = rollups if v.grain == "minute" else data.query("minute_rollups", since=recent.start)
    # The headline is what a person opens Live for: drawn first, below the page's clock and
    # banners, which fill their place above it once their own reads are in.
    top = st.container()
    attempts = live_reads.read(v, recent, window)
    _headline(v, recent, window, minutes, rollups, attempts)
    headline_sent = first_paint.mark()
    alerts = data.query("alerts", since=window.start)
    incidents = data.query("incidents", since=window.start)
    drills = data.query("drills", since=window.start)
    told = data.breakers_now()
    with top:
        _as_of(v, as_of, told)
        _banners(v, as_of, alerts, incidents)
    _health(v, as_of, recent, minutes, rollups, drills, told, attempts)
    _error_budgets(v, data.query("slo_status"))
    _learned_limits(v, as_of)
    first_paint.before_charts(headline_sent)
    markers = metrics.timeline_markers(incidents, alerts, drills, as_of)
    _timelines(v, window, rollups, markers, attempts)
    _recent_failures(v, attempts.failed)


st.title("Live")
live()
operator.target_switches()  # outside the 5 s refresh: a form being filled in stays as it is
