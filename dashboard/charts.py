"""Plotly figures for the pages: one function a chart, a DataFrame in, a figure out."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

# One colour per target (or provider) on every page and in every incident: picked from the
# name, so a target keeps its colour whatever else a chart shows.
PALETTE = px.colors.qualitative.Dark24


def colour_of(name: str) -> str:
    """The colour `name` has everywhere in the dashboard (stable across runs and pages)."""
    digest = hashlib.blake2s(name.encode(), digest_size=4).digest()
    return PALETTE[int.from_bytes(digest, "big") % len(PALETTE)]


def colours(names: Iterable[str]) -> dict[str, str]:
    """`color_discrete_map` for the names a chart shows."""
    return {name: colour_of(name) for name in names}


_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "height": 300, "legend_title_text": ""}


def _layout(fig: go.Figure, title: str, yaxis: str) -> go.Figure:
    fig.update_layout(title=title, yaxis_title=yaxis, xaxis_title=None, **_LAYOUT)
    return fig


def outcomes(frame: pd.DataFrame) -> go.Figure:
    """Attempts per bucket, stacked by provider, the failed ones hatched."""
    fig = px.bar(frame, x="bucket", y="attempts", color="provider",
                 pattern_shape="outcome", pattern_shape_map={"ok": "", "failed": "x"})  # fmt: skip
    return _layout(fig, "Attempts by provider and outcome", "attempts")


def line(frame: pd.DataFrame, columns: dict[str, str], title: str, yaxis: str) -> go.Figure:
    """One line per column (label → column name) over `bucket`."""
    fig = go.Figure()
    for label, column in columns.items():
        fig.add_scatter(x=frame["bucket"], y=frame[column], name=label, mode="lines+markers")
    return _layout(fig, title, yaxis)


def stacked(frame: pd.DataFrame, x: str, y: str, color: str, title: str, yaxis: str) -> go.Figure:
    fig = px.bar(frame, x=x, y=y, color=color)
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
    fig = px.line(frame, x=x, y=y, color=color, markers=True)
    return _layout(fig, title, yaxis)


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
