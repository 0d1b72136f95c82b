"""`switchover dashboard`: the entry point Streamlit runs. It draws the sidebar every page
shares (window, timezone, how fresh the data is, what the scheduler says) and runs the page
chosen in the navigation; first, when sign-in applies, nobody gets past the sign-in form
(dashboard.sign_in)."""

from __future__ import annotations

import streamlit as st

from dashboard import data, freshness, sign_in

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


# The sidebar's freshness, redrawn every few seconds; on a page that refreshes itself, that
# page draws it (dashboard.freshness says why).
sidebar_freshness = st.fragment(run_every=data.REFRESH_S)(freshness.sidebar)
REFRESHES_ITSELF = {"Live"}


def sidebar() -> None:
    with st.sidebar:
        data.choice("Window", "window", list(data.WINDOWS))
        data.choice("Timezone", "timezone", list(data.TIMEZONES))
        if page.title not in REFRESHES_ITSELF:
            sidebar_freshness()
        if data.is_demo():
            st.info("Demo data: simulated history and fake providers.", icon=":material/science:")


# The sidebar before the page: a page that stops early (st.stop) draws nothing after it.
sidebar()
page.run()
