"""Reports: the weekly reliability report of any week still published (the last five), as the
scheduler writes it every Monday: the headline for a manager, what changed, the charts and
tables, and the files to send (self-contained HTML, Markdown, the CSV of every table).

The weeks and the report are those of the data's time, not the clock's: the page and
`switchover report` make the same report (the same HTML bytes but for its "Generated" line)
from the same snapshots. The charts keep the report's own look (theme=None): Streamlit's theme
would restyle them here only."""

from __future__ import annotations

import io
import os
import zipfile
from datetime import timedelta
from pathlib import Path

import streamlit as st

from dashboard import data, first_paint
from engine.reports import render
from engine.reports.content import AVAILABILITY_TARGET
from engine.reports.headline import headline
from engine.reports.week import build_week, data_time, last_week

WEEKS = 5  # hourly rollups are published for 35 days
CONFIG_ENV = "SWITCHOVER_CONFIG"  # the configuration `switchover report` reads too


def _target() -> float:
    """The availability target of [reports] in switchover.toml, as `switchover report` reads
    it; the default without a readable one."""
    path = Path(os.environ.get(CONFIG_ENV, "switchover.toml"))
    if not path.exists():
        return AVAILABILITY_TARGET
    from engine.config import ConfigError, load_config

    try:
        return load_config(path).reports.availability_target
    except ConfigError:
        return AVAILABILITY_TARGET


st.title("Reports")
v = data.view()
if not data.manifest():
    data.empty_state()
    st.stop()
published = data.published()
now = data_time(published) or v.now
weeks = [last_week(now + timedelta(days=7 * (1 - i))) for i in range(WEEKS)]
week = st.selectbox(
    "Week (ISO, UTC)",
    weeks,
    index=1,
    key="report_week",
    format_func=lambda w: f"{w} (week to date)" if w == weeks[0] else w,
)
report = build_week(published, week, _target())
if not report.routes:
    st.info(f"No traffic was recorded in {week}.")
    st.stop()

st.caption(render.period(report))
said = report.headline or headline(report)
with st.container(key="report_headline"):
    st.subheader("In short")
    for sentence in said.sentences():
        st.markdown(sentence)
headline_drawn = first_paint.mark()
st.markdown("**What to look at**")
for item in said.look_at or [render.NOTHING_TO_LOOK_AT]:
    st.markdown(f"- {item}")
st.subheader("What changed")
for sentence in report.summary:
    st.markdown(f"- {sentence}")
charts = render.charts(report)
first_paint.before_charts(headline_drawn)
for figure in charts:
    st.plotly_chart(figure, width="stretch", theme=None)
for stem, (title, frame) in render.tables(report).items():
    st.markdown(f"**{title}**")
    if len(frame):
        st.dataframe(frame, hide_index=True, width="stretch")
    else:
        st.caption(render.empty_text(report, stem))

cols = st.columns(3)
cols[0].download_button(
    "HTML (self-contained)",
    render.html(report),
    file_name=f"reliability-{week}.html",
    mime="text/html",
)
cols[1].download_button(
    "Markdown", render.markdown(report), file_name=f"reliability-{week}.md", mime="text/markdown"
)
bundle = io.BytesIO()
with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
    for stem, (_, frame) in render.csv_tables(report).items():
        archive.writestr(f"{stem}.csv", frame.to_csv(index=False))
cols[2].download_button(
    "CSV of every table (zip)",
    bundle.getvalue(),
    file_name=f"reliability-{week}-csv.zip",
    mime="application/zip",
)
