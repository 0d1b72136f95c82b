"""`switchover dashboard`: the entry point Streamlit runs. It draws the sidebar every page
shares (window, timezone, how fresh the data is, what the scheduler says) and runs the page
chosen in the navigation; first, when sign-in applies, nobody gets past the sign-in form
(dashboard.sign_in)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pandas as pd
import streamlit as st

from dashboard import data, sign_in
from engine.published.scheduler_status import banner, read_status

st.set_page_config(page_title="Switchover", page_icon=":material/alt_route:", layout="wide")
sign_in.gate()  # stops here, with the sign-in form only, for a person not signed in

pages = [
    st.Page("views/live.py", title="Live", icon=":material/monitor_heart:", default=True),
    st.Page("views/costs.py", title="Costs", icon=":material/payments:"),
    st.Page("views/incidents.py", title="Incidents & alerts", icon=":material/warning:"),
    st.Page("views/readiness.py", title="Readiness", icon=":material/fact_check:"),
    st.Page("views/explorer.py", title="Explorer", icon=":material/search:"),
    st.Page("views/whatif.py", title="What-if", icon=":material/science:"),
    st.Page("views/reports.py", title="Reports", icon=":material/summarize:"),
]
page = st.navigation(pages)


@st.fragment(run_every=data.REFRESH_S)
def freshness() -> None:
    """How old the data is, and why when the scheduler says so (published/scheduler.json):
    redrawn every few seconds, so that a scheduler waiting for its database shows within one."""
    view = data.view()
    now = view.now
    snapshots = data.manifest()
    if snapshots:
        newest = max(s.written_at for s in snapshots.values())
        age = (now - newest).total_seconds()
        st.caption(f"Data as of {view.stamp(newest)} ({age:.0f} s ago)")
    status = read_status(data.data_paths().scheduler_status)
    said = None if status is None and not snapshots else banner(status, now, _at(view))
    if said is not None:
        level, text = said
        (st.error if level == "error" else st.warning)(text, icon=":material/sync_problem:")
    elif snapshots and age > 120:  # snapshots are republished at least once a minute
        st.warning("The data is over 2 minutes old: is `switchover scheduler` running?")


def _at(view: data.View) -> Callable[[datetime], str]:
    return lambda when: pd.Timestamp(when).tz_convert(view.tz).strftime("%H:%M %Z")


with st.sidebar:
    data.choice("Window", "window", list(data.WINDOWS))
    data.choice("Timezone", "timezone", list(data.TIMEZONES))
    freshness()
    if data.is_demo():
        st.info("Demo data: simulated history and fake providers.", icon=":material/science:")

page.run()
