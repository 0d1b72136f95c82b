"""How fresh the data is, and why not when the scheduler says so (published/scheduler.json).

The sidebar redraws it every few seconds (app.py), so that a scheduler waiting for its
database shows within one; a page that refreshes itself (Live) draws the warnings inside its
own refresh instead, because two timed fragments firing together interrupt each other:
Streamlit stops the running one for the next, and the sidebar's never finished on Live."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pandas as pd
import streamlit as st

from dashboard import data
from engine.published.scheduler_status import banner, read_status

STALE_AFTER_S = 120  # snapshots are republished at least once a minute


def warnings(view: data.View) -> None:
    """The scheduler's trouble as a red or yellow box, else a warning when the data is over
    2 minutes old; nothing when all is well."""
    snapshots = data.manifest()
    status = read_status(data.data_paths().scheduler_status)
    said = None if status is None and not snapshots else banner(status, view.now, _at(view))
    if said is not None:
        level, text = said
        (st.error if level == "error" else st.warning)(text, icon=":material/sync_problem:")
    elif snapshots and _age_s(view, snapshots) > STALE_AFTER_S:
        st.warning("The data is over 2 minutes old: is `switchover scheduler` running?")


def sidebar() -> None:
    """How old the data is, then `warnings`."""
    view = data.view()
    snapshots = data.manifest()
    if snapshots:
        newest = max(s.written_at for s in snapshots.values())
        st.caption(f"Data as of {view.stamp(newest)} ({_age_s(view, snapshots):.0f} s ago)")
    warnings(view)


def _age_s(view: data.View, snapshots: dict) -> float:
    newest = max(s.written_at for s in snapshots.values())
    return (view.now - newest).total_seconds()


def _at(view: data.View) -> Callable[[datetime], str]:
    return lambda when: pd.Timestamp(when).tz_convert(view.tz).strftime("%H:%M %Z")
