"""Explorer: find one request by its id (the gateway's `x-request-id` header, or a log line)
and read its whole story, target by target: answered, failed (class and status) or skipped
(why), and the decision after each attempt, with why (dashboard.request_story); then its
attempts as recorded (a stream continued on another target as one answer in parts). Or filter
the attempts of the last 24 hours."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from dashboard import data, request_story, requests
from dashboard.cost_parts import usd_each

COLUMNS = ["started_at", "request_id", "attempt_number", "route", "target", "outcome",
           "decision", "error_class", "http_status", "fault_kind", "latency_ms", "fallback_depth",
           "served", "breaker_state", "cost_usd"]  # fmt: skip
# A continued stream's attempts also say which attempt each part picked up from.
CONTINUATION_COLUMNS = ["continues_attempt", "continued_chars"]


def _priced(attempts: pd.DataFrame) -> pd.DataFrame:
    """Each attempt's cost as money ("$0.00026"); "—" without one (no call made, no usage
    reported, or a model without a known price)."""
    return attempts.assign(cost_usd=usd_each(attempts["cost_usd"]))


st.title("Explorer")
v = data.view()
if not data.manifest():
    data.empty_state()
    st.stop()
st.caption("Attempts of the last 24 hours (older ones are in the rollups and the reports).")

request_id = st.text_input(
    "Request id", placeholder="the x-request-id header of a gateway answer", key="rid"
)
if request_id.strip():
    chain = data.query("request_attempts", request_id=request_id.strip())
    if chain.empty:
        st.warning(f"No attempt of request {request_id.strip()!r} in the last 24 hours.")
    else:
        st.markdown(requests.verdict(chain))
        st.table(request_story.story(chain), hide_index=True)
        st.caption(
            "Every target the request came to, in its order (#): what happened there, and the "
            "decision the chain took after each attempt. A skipped target made no call."
        )
        parts = requests.parts(chain)
        if parts is not None:  # a stream a later target finished: one answer, in parts
            st.dataframe(parts, hide_index=True, width="stretch", key="parts")
            st.caption(requests.parts_cost(chain))
        shown = [*COLUMNS, *requests.present(chain, CONTINUATION_COLUMNS), "error_message"]
        st.dataframe(
            v.table(_priced(chain), shown),
            hide_index=True,
            width="stretch",
            column_config={"started_at": f"started at ({v.tz.key})"},
        )

st.subheader("Filter attempts")
values = data.query("attempt_values", since=(v.now - timedelta(days=1)).replace(second=0))
cols = st.columns(4)
chosen = {
    column: cols[i].multiselect(
        column.capitalize(), sorted(values[column].dropna().unique()), key=f"f_{column}"
    )
    for i, column in enumerate(("route", "provider", "outcome", "decision"))
}
found = data.query(
    "find_attempts",
    since=v.since,
    **{f"{column}s": (wanted or None) for column, wanted in chosen.items()},
)
matching = int(found["matching"].iloc[0]) if len(found) else 0
st.caption(f"{matching:,} attempts in the last {v.label} match; the newest 500 are listed.")
st.dataframe(
    v.table(_priced(found), COLUMNS),
    hide_index=True,
    width="stretch",
    column_config={"started_at": f"started at ({v.tz.key})"},
)
