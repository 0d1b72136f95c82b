"""Costs: where the money goes, by route, provider, model or feature; what an answered request
costs; the token mix; what fallbacks cost on top (price difference and cache loss) and what
was paid for nothing."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import budgets_panel, charts, data, widgets
from dashboard.cost_parts import premium_parts, usd_column
from dashboard.definitions import define
from dashboard.metrics import cost_by, cost_summary, token_mix
from engine.core.money import format_usd

DIMENSIONS = {"Route": "route", "Provider": "provider", "Model": "model", "Feature": "feature"}

st.title("Costs")
v = data.view()
rollups = data.rollups(v)
if not data.manifest():
    data.empty_state()
    st.stop()
budgets_panel.show(data.data_paths().budgets)
if rollups.empty:
    st.caption(f"No requests in the last {v.label}.")
    st.stop()

summary = cost_summary(rollups)
stamp = "%Y-%m-%d %H:%M"
st.caption(
    f"Every figure here is over the last {v.label}: "
    f"{pd.Timestamp(v.since).tz_convert(v.tz):{stamp}} – "
    f"{pd.Timestamp(v.now).tz_convert(v.tz):{stamp}} ({v.tz.key})."
)
cells = st.columns(4)
cells[0].metric("Cost", format_usd(summary.cost), help=define("cost"))
per_answer = "—" if summary.per_answered is None else format_usd(summary.per_answered)
cells[1].metric("Cost per answered request", per_answer, help=define("answered"))
cells[2].metric("Re-warm", format_usd(summary.rewarm), help=define("re-warm cost"))
cells[3].metric("Wasted spend", format_usd(summary.wasted), help=define("wasted spend"))
# The premium and its parts, three a row (room for "saved $12.40"), adding up as shown.
premium = premium_parts(summary.price_difference, summary.cache_loss)
split = st.columns(3)
split[0].metric("Fallback premium", premium["fallback premium"], help=define("fallback premium"))
split[1].metric(
    "of which price difference", premium["price difference"], help=define("price difference")
)
split[2].metric("of which cache loss", premium["cache loss"], help=define("cache loss"))
if summary.unpriced_models:
    st.warning(
        "No known price for " + ", ".join(summary.unpriced_models) + ": their attempts are "
        'counted as unpriced, never as $0. Add a `[prices."provider/model"]` entry to '
        "switchover.toml with where the price comes from.",
        icon=":material/money_off:",
    )

by = widgets.one_of("Split by", list(DIMENSIONS), default="Route", key="cost_split")
column = DIMENSIONS[by]
local = rollups.assign(bucket=v.local(rollups["bucket"]))
left, right = st.columns(2)
left.plotly_chart(
    charts.stacked(
        cost_by(local, column),
        "bucket",
        "cost_usd",
        column,
        f"Cost by {by.lower()}",
        "USD",
        unit="usd",
    ),
    width="stretch",
)
mix = token_mix(local)
right.plotly_chart(
    charts.stacked(mix, "bucket", "tokens", "kind", "Token mix", "tokens"), width="stretch"
)
totals = cost_by(rollups, column).groupby(column, as_index=False)["cost_usd"].sum()
totals = totals.sort_values("cost_usd", ascending=False)
st.dataframe(
    totals.assign(cost_usd=usd_column(totals["cost_usd"])),
    hide_index=True,
    width="stretch",
    column_config={"cost_usd": st.column_config.TextColumn("cost")},
)
