"""The Costs page's budgets: each [[budgets]]'s spend in its own period (not the page's window),
what is left, when it runs out at the recent rate, and whether the gateway is refusing its
requests. Read from `published/budgets.json` (engine.published.budgets), which the scheduler
rewrites after every ingest."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.core.money import format_usd
from engine.published.budgets import BudgetsSnapshot, read_budgets

COLUMNS = ["budget", "scope", "period", "spent", "amount", "used", "left", "forecast", "cap"]


def budget_rows(snapshot: BudgetsSnapshot) -> pd.DataFrame:
    """One row per budget, as shown: money in dollars and cents, the period with its dates,
    "over by" once spent past the amount, what the hard cap is doing."""
    rows = []
    for b in snapshot.budgets:
        last_day = b.period_end - pd.Timedelta(days=1)
        left = b.left_usd
        rows.append(
            {
                "budget": b.name,
                "scope": b.subject,
                "period": f"{b.period} {b.period_start:%b %d} – {last_day:%b %d} (UTC)",
                "spent": format_usd(b.spend_usd, 2),
                "amount": format_usd(b.amount_usd, 2),
                "used": f"{b.percent} %",
                "left": format_usd(left, 2) if left >= 0 else f"over by {format_usd(-left, 2)}",
                "forecast": b.forecast_text(),
                "cap": _cap(b.hard_cap, b.refusing),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _cap(hard_cap: bool, refusing: bool) -> str:
    if not hard_cap:
        return "alerts only"
    return "refusing requests" if refusing else "hard cap"


def show(path) -> None:
    """The section, when any budget is configured (nothing at all otherwise)."""
    snapshot = read_budgets(path)
    if snapshot is None or not snapshot.budgets:
        return
    st.subheader("Budgets")
    st.caption(
        "Each budget over its own calendar period in UTC, not the window above; spend as the "
        f"store counted it at {snapshot.computed_at:%H:%M} UTC. A hard cap also counts "
        "attempts not yet ingested, so the gateway may refuse a little sooner."
    )
    refusing = [b.name for b in snapshot.budgets if b.refusing]
    if refusing:
        st.error(f"The gateway refuses requests of: {', '.join(refusing)} (budget spent).")
    st.dataframe(budget_rows(snapshot), hide_index=True, width="stretch")
