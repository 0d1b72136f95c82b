"""The weekly report's charts: spend per day and availability per day, per route.

Each figure carries its whole look (an explicit template, the product's colours, margins that
keep the axis labels in the picture) instead of plotly's process-wide default: Streamlit sets
that default to its own theme, whose colours are placeholders its front end fills in
("#000001"…), so a figure made inside the dashboard and saved as HTML drew black bars. With
fixed div ids too, the HTML a report makes is the same bytes in every process.

Never imports the dashboard: its palette is copied here (tests/reports/test_charts.py keeps the
two equal).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING

import plotly.graph_objects as go
import plotly.io as pio

if TYPE_CHECKING:
    from engine.reports.content import WeekReport

# The dashboard's palette (dashboard/charts.py): plotly's Dark24 without its pure red, green
# and crimson, which say failed and healthy.
PALETTE = (
    "#2E91E5", "#E15F99", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1",
    "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63",
)  # fmt: skip
TARGET_LINE = "#7F7F7F"
# plotly's own white template (the same in every process), in the product's colours.
TEMPLATE = go.layout.Template(
    pio.templates["plotly_white"],
    layout={
        "colorway": list(PALETTE),
        "font": {
            "family": "system-ui, -apple-system, Segoe UI, sans-serif",
            "size": 13,
            "color": "#222222",
        },
    },
)
MARGIN = {"l": 80, "r": 30, "t": 60, "b": 70}
HEIGHT = 340
CONFIG = {"displayModeBar": False, "responsive": True}
BAR_MS = 0.7 * 86_400_000  # a bar is 70 % of its day
DIV_IDS = ("report-spend-per-day", "report-availability-per-day")


def colour_of(name: str) -> str:
    """The colour `name` has in the dashboard (picked from the name, stable across runs)."""
    digest = hashlib.blake2s(name.encode(), digest_size=4).digest()
    return PALETTE[int.from_bytes(digest, "big") % len(PALETTE)]


def colours(names: Iterable[str]) -> dict[str, str]:
    """A colour per name, each its dashboard colour unless a name before it took that one:
    then the next free one of the palette, so that no two routes of a chart look alike."""
    taken: dict[str, str] = {}
    for name in sorted(set(names)):
        start = PALETTE.index(colour_of(name))
        for step in range(len(PALETTE)):
            colour = PALETTE[(start + step) % len(PALETTE)]
            if colour not in taken.values():
                taken[name] = colour
                break
        else:  # more names than colours: they share
            taken[name] = colour_of(name)
    return taken


def charts(report: WeekReport) -> list[go.Figure]:
    """Spend per day (stacked by route) and availability per day (a line per route, the
    target dotted); none for a week without traffic."""
    daily = report.daily
    if daily.empty:
        return []
    colour = colours(daily["route"])
    spend = _figure(report, "Spend per day (USD)")
    for route, rows in daily.groupby("route"):
        # A width in milliseconds: plotly derives one from the gaps between bars, and a week
        # with one day of data has none (its bar was a millisecond wide: invisible).
        spend.add_bar(
            x=rows["day"],
            y=rows["cost_usd"],
            name=route,
            marker_color=colour[route],
            width=BAR_MS,
            hovertemplate="%{x|%a %d %b}: $%{y:,.2f}<extra>" + route + "</extra>",
        )
    spend.update_layout(barmode="stack", yaxis={"tickprefix": "$", "rangemode": "tozero"})
    availability = _figure(report, "Availability per day (drills included)")
    counted = daily[daily["counted"] > 0]
    for route, rows in counted.groupby("route"):
        availability.add_scatter(
            x=rows["day"],
            y=rows["answered"] / rows["counted"],
            name=route,
            mode="lines+markers",
            line={"color": colour[route], "width": 3},
            marker={"color": colour[route], "size": 9},
            hovertemplate="%{x|%a %d %b}: %{y:.2%}<extra>" + route + "</extra>",
        )
    availability.add_hline(
        y=report.target,
        line_dash="dot",
        line_color=TARGET_LINE,
        annotation_text=f"target {report.target:.1%}",
        annotation_position="bottom right",
    )
    availability.update_layout(yaxis={"tickformat": ".2%"})  # 99.9x % apart
    return [spend, availability]


def _figure(report: WeekReport, title: str) -> go.Figure:
    """An empty figure in the report's look, its x axis the week's seven days."""
    half = timedelta(hours=12)
    return go.Figure(
        layout={
            "template": TEMPLATE,
            "title": {"text": title, "x": 0, "xanchor": "left"},
            "height": HEIGHT,
            "margin": MARGIN,
            "showlegend": True,
            "legend": {"title": {"text": "route"}, "orientation": "h", "y": -0.22},
            "xaxis": {
                "range": [report.start - half, report.end - half],
                "dtick": 86_400_000,
                "tickformat": "%a %d %b",
                "automargin": True,
                "showgrid": False,
            },
            "yaxis": {"automargin": True},
        }
    )


def html(figures: list[go.Figure]) -> list[str]:
    """Each figure as an HTML fragment: plotly.js inlined once, with the first (the file must
    open offline), and fixed div ids, so that the same report is the same bytes anywhere."""
    return [
        figure.to_html(full_html=False, include_plotlyjs=n == 0, div_id=DIV_IDS[n], config=CONFIG)
        for n, figure in enumerate(figures)
    ]
