"""`switchover dashboard`: the entry point Streamlit runs. It draws the sidebar every page
shares (window, timezone, how fresh the data is) and runs the page chosen in the navigation."""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from dashboard import data

st.set_page_config(page_title="Switchover", page_icon=":material/alt_route:", layout="wide")

pages = [
    st.Page("pages/live.py", title="Live", icon=":material/monitor_heart:", default=True),
    st.Page("pages/costs.py", title="Costs", icon=":material/payments:"),
    st.Page("pages/incidents.py", title="Incidents & alerts", icon=":material/warning:"),
    st.Page("pages/readiness.py", title="Readiness", icon=":material/fact_check:"),
    st.Page("pages/explorer.py", title="Explorer", icon=":material/search:"),
    st.Page("pages/whatif.py", title="What-if", icon=":material/science:"),
    st.Page("pages/reports.py", title="Reports", icon=":material/summarize:"),
]
page = st.navigation(pages)

with st.sidebar:
    data.choice("Window", "window", list(data.WINDOWS))
    data.choice("Timezone", "timezone", list(data.TIMEZONES))
    snapshots = data.manifest()
    if snapshots:
        newest = max(s.written_at for s in snapshots.values())
        age = (datetime.now(UTC) - newest).total_seconds()
        st.caption(f"Data as of {data.view().stamp(newest)} ({age:.0f} s ago)")
        if age > 120:  # snapshots are republished at least once a minute
            st.warning("The data is over 2 minutes old: is `switchover scheduler` running?")
    if data.is_demo():
        st.info("Demo data: simulated history and fake providers.", icon=":material/science:")

page.run()
