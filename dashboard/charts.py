"""Plotly figures for the pages: one function a chart, a DataFrame in, a figure out."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from engine.core.money import digits_for, format_usd

# One colour per target (or provider) on every page and in every incident: picked from the
# name, so a target keeps its colour whatever else a chart shows. Without Dark24's pure red,
# green and crimson: those say failed and healthy, and a target drawn in them reads as one.
_STATUS_LIKE = {"#FB0D0D", "#1CA71C", "#AF0038"}
PALETTE = [c for c in px.colors.qualitative.Dark24 if c not in _STATUS_LIKE]


def colour_of(name: str) -> str:
    """The colour `name` has everywhere in the dashboard (stable across runs and pages)."""
    digest = hashlib.blake2s(name.encode(), digest_size=4).digest()
    return PALETTE[int.from_bytes(digest, "big") % len(PALETTE)]


def colours(names: Iterable[str]) -> dict[str, str]:
    """`color_discrete_map` for the names a chart shows."""
    return {name: colour_of(name) for name in names}


_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "height": 300, "legend_title_text": ""}


def _marker(kind: str, x0: object, x1: object, **style: object) -> dict[str, object]:
    """A shape from `x0` to `x1` across the plot's whole height."""
    return {"type": kind, "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
            **style}  # fmt: skip


def _layout(fig: go.Figure, title: str, yaxis: str) -> go.Figure:
    fig.update_layout(title=title, yaxis_title=yaxis, xaxis_title=None, **_LAYOUT)
    return fig


def outcomes(frame: pd.DataFrame) -> go.Figure:
    """Attempts per bucket, stacked by provider, the failed ones hatched."""
    fig = px.bar(
        frame,
        x="bucket",
        y="attempts",
        color="provider",
        pattern_shape="outcome",
        pattern_shape_map={"ok": "", "failed": "x"},
    )
    return _layout(fig, "Attempts by provider and outcome", "attempts")


def line(frame: pd.DataFrame, columns: dict[str, str], title: str, yaxis: str) -> go.Figure:
    """One line per column (label → column name) over `bucket`."""
    fig = go.Figure()
    for label, column in columns.items():
        fig.add_scatter(x=frame["bucket"], y=frame[column], name=label, mode="lines+markers")
    return _layout(fig, title, yaxis)


def stacked(
    frame: pd.DataFrame, x: str, y: str, color: str, title: str, yaxis: str, unit: str = ""
) -> go.Figure:
    """Bars of `y` per `x`, stacked by `color`. `unit` "usd": the axis and each bar's hover
    in dollars as engine.core.money writes them."""
    if unit != "usd":
        return _layout(px.bar(frame, x=x, y=y, color=color), title, yaxis)
    shown = frame.assign(shown=[format_usd(v) for v in frame[y]])
    fig = px.bar(shown, x=x, y=y, color=color, custom_data=["shown"])
    fig.update_traces(hovertemplate="%{x}<br>%{fullData.name}: %{customdata[0]}<extra></extra>")
    stacks = frame.assign(size=frame[y].astype(float).abs()).groupby(x)["size"].sum()
    fig.update_yaxes(tickformat=usd_ticks(stacks))
    return _layout(fig, title, yaxis)


def bars(frame: pd.DataFrame, x: str, y: str, title: str, yaxis: str) -> go.Figure:
    fig = px.bar(frame, x=x, y=y)
    return _layout(fig, title, yaxis)


def timeline(
    frame: pd.DataFrame, start: str, end: str, row: str, color: str, title: str
) -> go.Figure:
    """Horizontal bars from `start` to `end` (incidents, breaker spells)."""
    fig = px.timeline(frame, x_start=start, x_end=end, y=row, color=color)
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, "")


def lines_by(frame: pd.DataFrame, x: str, y: str, color: str, title: str, yaxis: str) -> go.Figure:
    """One line per `color` value, each in a panel of its own on shared axes (small
    multiples), in its dashboard-wide colour: in one panel, two candidates with the same
    series would draw one line exactly over the other."""
    names = list(dict.fromkeys(frame[color]))
    fig = px.line(
        frame,
        x=x,
        y=y,
        color=color,
        facet_row=color,
        markers=True,
        category_orders={color: names},
        color_discrete_map=colours(names),
    )
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))  # name only
    _layout(fig, f"{title} ({yaxis})", "")  # one unit for every panel, in the title
    fig.update_yaxes(title=None, rangemode="tozero")
    fig.update_layout(height=80 + 120 * max(1, len(names)), showlegend=False)
    return fig


def pass_rates(frame: pd.DataFrame, minimum: float) -> go.Figure:
    """Pass rate per target (`target`, `pass_rate`, `below_minimum`), the targets below the
    route's minimum in red, and the minimum as a dotted line."""
    shown = frame.assign(
        result=frame["below_minimum"].map({True: "below minimum", False: "meets minimum"})
    )
    colours = {"below minimum": "#d62728", "meets minimum": "#2ca02c"}
    fig = px.bar(shown, x="target", y="pass_rate", color="result", color_discrete_map=colours)
    fig.add_hline(y=minimum, line_dash="dot", annotation_text=f"minimum {minimum:.0%}")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return _layout(fig, "Pass rate by target, latest run", "pass rate")


def pass_rate_history(frame: pd.DataFrame, minimum: float) -> go.Figure:
    """Pass rate per run (`started_at`) and `target`, with the route's minimum as a line."""
    fig = px.line(frame, x="started_at", y="pass_rate", color="target", markers=True)
    fig.add_hline(y=minimum, line_dash="dot", annotation_text=f"minimum {minimum:.0%}")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return _layout(fig, "Pass rate by eval run", "pass rate")


# --- Live timelines ------------------------------------------------------------------------

# Markers: incidents and drills shaded, alerts as dotted lines where they fired and resolved;
# a bucket still being counted drawn lighter, so that it does not read as a drop.
INCIDENT, DRILL, FIRED, RESOLVED = "#d62728", "#1f77b4", "#d62728", "#2ca02c"
PARTIAL_OPACITY = 0.35
ROUTE_PALETTE = px.colors.qualitative.Safe
# A point's hover is read alone: its amount by its own magnitude ("$0.47", "-$0.0021").
_FORMATS = {"usd": format_usd, "share": lambda v: f"{v:.1%}", "": lambda v: f"{v:,.0f}"}
_TICKS = {"share": ".0%"}
# Failed attempts by class (metrics.FAILURE_CLASSES): the same colour on every timeline.
FAILURE_COLOURS = {"429": "#ff7f0e", "529": "#d62728", "5xx": "#8c564b", "401/403": "#9467bd",
                   "timeout": "#bcbd22", "other": "#7f7f7f", "request (4xx)": "#c7c7c7",
                   "drill": "#1f77b4"}  # fmt: skip
FAILED = "#d62728"  # requests no target answered, beside the targets' own colours
# Lines that are not targets: the same pair of colours on every timeline.
SERIES_COLOURS = {"p50": "#1f77b4", "p99": "#ff7f0e", "cost": "#1f77b4",
                  "fallback premium": "#ff7f0e"}  # fmt: skip


def route_colours(routes: Iterable[str]) -> dict[str, str]:
    """A colour per route, in the order of their names: routes are few and named in the
    configuration, so two routes in one colour (a hash's collision) are not worth risking."""
    ordered = sorted(set(routes))
    return {route: ROUTE_PALETTE[i % len(ROUTE_PALETTE)] for i, route in enumerate(ordered)}


@dataclass(frozen=True, slots=True)
class Timeline:
    """What every Live timeline shares: the x range [start, end), where the complete buckets
    end (`counting_from`), the time zone the axis is read in, and the markers
    (metrics.timeline_markers)."""

    start: datetime
    end: datetime
    counting_from: datetime
    tz: ZoneInfo
    markers: pd.DataFrame

    def local(self, when: object) -> pd.Timestamp:
        return pd.Timestamp(when).tz_convert(self.tz)


def timeline_bars(
    frame: pd.DataFrame,
    y: str,
    color: str,
    colour_map: dict[str, str],
    title: str,
    yaxis: str,
    t: Timeline,
    order: Iterable[str] | None = None,
) -> go.Figure:
    """Stacked bars of `y` per bucket (UTC) and `color`, the buckets still counting lighter."""
    fig = go.Figure()
    names = list(order) if order is not None else sorted(set(frame[color]))
    for name in [n for n in names if n in set(frame[color])]:
        mine = frame[frame[color] == name]
        x = pd.to_datetime(mine["bucket"], utc=True).dt.tz_convert(t.tz)
        opacity = [PARTIAL_OPACITY if at >= t.local(t.counting_from) else 1.0 for at in x]
        fig.add_bar(
            x=x,
            y=mine[y],
            name=str(name),
            marker={"color": colour_map.get(name, colour_of(str(name))), "opacity": opacity},
            hovertemplate=f"%{{x}}<br>{name}: %{{y:,}}<extra></extra>",
        )
    fig.update_layout(barmode="stack")
    return _timeline_layout(fig, title, yaxis, t)


def timeline_lines(
    frame: pd.DataFrame,
    y: str,
    series: str,
    title: str,
    yaxis: str,
    t: Timeline,
    colour_map: dict[str, str] | None = None,
    dotted: Iterable[str] = (),
    unit: str = "",
) -> go.Figure:
    """One line of `y` per value of `series` over the buckets (UTC); each series' segment
    into the buckets still counting is lighter. `unit`: "usd" ("-$0.0021"), "share"
    ("54.8%"), else a plain number."""
    fig = go.Figure()
    colours = {**SERIES_COLOURS, **(colour_map or {})}
    for name, group in frame.sort_values("bucket").groupby(series):
        x = pd.to_datetime(group["bucket"], utc=True).dt.tz_convert(t.tz).reset_index(drop=True)
        values = group[y].astype(float).reset_index(drop=True)
        said = values.map(_FORMATS.get(unit, _FORMATS[""]))
        done = x < t.local(t.counting_from)
        # the lighter segment runs from the last complete point into the buckets counting
        tail = ~done | (done & ~done.shift(-1, fill_value=True))
        style = {
            "name": str(name), "mode": "lines+markers", "legendgroup": str(name),
            "line": {"color": colours.get(name, colour_of(str(name))),
                     "dash": "dot" if name in dotted else "solid"},
            "hovertemplate": f"%{{x}}<br>{name}: %{{customdata}}<extra></extra>",
        }  # fmt: skip
        fig.add_scatter(x=x[done], y=values[done], customdata=said[done], **style)
        if (~done).any():
            fig.add_scatter(
                x=x[tail],
                y=values[tail],
                customdata=said[tail],
                showlegend=False,
                opacity=PARTIAL_OPACITY,
                **style,
            )
    if unit in _TICKS:
        fig.update_yaxes(tickformat=_TICKS[unit])
    elif unit == "usd":
        fig.update_yaxes(tickformat=usd_ticks(frame[y]))
    return _timeline_layout(fig, title, yaxis, t)


def usd_ticks(values: pd.Series) -> str:
    """A dollar axis's tick format (d3's, which puts the sign before the "$" as engine.core.money
    does), with the decimals engine.core.money gives a tenth of the largest amount: the ticks of
    an axis up to $0.47 read "$0.10", and those up to $0.02 "$0.0050", not "$0.01" twice."""
    largest = values.astype(float).abs().max() if len(values) else 0.0
    return f"$,.{digits_for(0 if pd.isna(largest) else largest / 10)}f"


def _timeline_layout(fig: go.Figure, title: str, yaxis: str, t: Timeline) -> go.Figure:
    # One layout update with every marker: add_vline / add_vrect validate the whole layout
    # each call, ~50 ms a marker (2 s a chart with an hour of the demo's alerts).
    shapes = []
    for m in t.markers.itertuples():
        start, end = t.local(m.start), t.local(m.end)
        if m.kind == "alert":
            ends = [(start, FIRED)] + ([] if m.ongoing else [(end, RESOLVED)])
            shapes += [
                _marker(
                    "line", at, at, line={"color": colour, "width": 1, "dash": "dot"}, opacity=0.6
                )
                for at, colour in ends
            ]
        else:
            colour = INCIDENT if m.kind == "incident" else DRILL
            shapes.append(
                _marker(
                    "rect",
                    start,
                    end,
                    fillcolor=colour,
                    opacity=0.1,
                    line={"width": 0},
                    layer="below",
                )
            )
    fig.update_layout(shapes=shapes)
    note = f"lighter from {t.local(t.counting_from):%H:%M}: still counting"
    fig.add_annotation(
        x=t.local(t.end),
        y=1,
        xref="x",
        yref="paper",
        text=note,
        showarrow=False,
        xanchor="right",
        yanchor="bottom",
        font={"size": 10, "color": "#7f7f7f"},
    )
    fig.update_xaxes(range=[t.local(t.start), t.local(t.end)])
    # A legend even for one series: "529" alone must still say what the bars count.
    return _layout(fig, title, yaxis).update_layout(
        xaxis_title=f"time ({t.tz.key})", showlegend=True
    )
