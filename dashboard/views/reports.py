"""Reports: the weekly reliability report of any week still published (the last five), as the
scheduler writes it every Monday: what changed, the tables and charts, and the files to send
(self-contained HTML, Markdown, the CSV of every table)."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import streamlit as st

from dashboard import data
from engine.reports import render
from engine.reports.week import build_week, last_week

WEEKS = 5  # hourly rollups are published for 35 days

st.title("Reports")
v = data.view()
if not data.manifest():
    data.empty_state()
    st.stop()
weeks = [last_week(v.now + timedelta(days=7 * (1 - i))) for i in range(WEEKS)]
week = st.selectbox(
    "Week (ISO, UTC)",
    weeks,
    index=1,
    key="report_week",
    format_func=lambda w: f"{w} (this week, so far)" if w == weeks[0] else w,
)
report = build_week(data.published(), week)
if not report.routes:
    st.info(f"No traffic was recorded in {week}.")
    st.stop()

st.subheader("What changed")
for sentence in report.summary:
    st.markdown(f"- {sentence}")
for figure in render.charts(report):
    st.plotly_chart(figure, width="stretch")
for title, frame in render.tables(report).values():
    st.markdown(f"**{title}**")
    if len(frame):
        st.dataframe(frame, hide_index=True, width="stretch")
    else:
        st.caption("None.")

cols = st.columns(3)
cols[0].download_button("HTML (self-contained)", render.html(report),
                        file_name=f"reliability-{week}.html", mime="text/html")  # fmt: skip
cols[1].download_button("Markdown", render.markdown(report),
                        file_name=f"reliability-{week}.md", mime="text/markdown")  # fmt: skip
bundle = io.BytesIO()
with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
    for stem, (_, frame) in render.tables(report, raw=True).items():
        archive.writestr(f"{stem}.csv", frame.to_csv(index=False))
cols[2].download_button(
    "CSV of every table (zip)",
    bundle.getvalue(),
    file_name=f"reliability-{week}-csv.zip",
    mime="application/zip",
)
