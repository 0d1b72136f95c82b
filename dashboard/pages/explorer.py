"""Explorer: find one request by its id (the gateway's `x-request-id` header, or a log line)
and see its chain of attempts; or filter the attempts of the last 24 hours."""

from __future__ import annotations

from datetime import timedelta

import streamlit as st

from dashboard import data

COLUMNS = ["started_at", "request_id", "attempt_number", "route", "target", "outcome",
           "decision", "error_class", "http_status", "fault_kind", "latency_ms", "fallback_depth",
           "served", "breaker_state", "cost_usd"]  # fmt: skip

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
        served = chain[chain["served"]]
        verdict = (
            f"answered by **{served.iloc[0]['target']}**" if len(served) and
            served.iloc[0]["outcome"] == "success" else "**not answered**"
        )  # fmt: skip
        st.markdown(f"Route **{chain.iloc[0]['route']}**: {len(chain)} attempts, {verdict}.")
        st.dataframe(
            chain.assign(started_at=v.local(chain["started_at"]))[[*COLUMNS, "error_message"]],
            hide_index=True, width="stretch",
        )  # fmt: skip

st.subheader("Filter attempts")
values = data.query("attempt_values", since=(v.now - timedelta(days=1)).replace(second=0))
cols = st.columns(4)
chosen = {
    column: cols[i].multiselect(column.capitalize(), sorted(values[column].dropna().unique()),
                                key=f"f_{column}")
    for i, column in enumerate(("route", "provider", "outcome", "decision"))
}  # fmt: skip
found = data.query(
    "find_attempts",
    since=v.since,
    **{f"{column}s": (wanted or None) for column, wanted in chosen.items()},
)
matching = int(found["matching"].iloc[0]) if len(found) else 0
st.caption(f"{matching:,} attempts in the last {v.label} match; the newest 500 are listed.")
st.dataframe(
    found.assign(started_at=v.local(found["started_at"]))[COLUMNS],
    hide_index=True,
    width="stretch",
)
