"""A page's headline painted before its charts, in a browser's first visit of a session.

Streamlit's browser side loads each kind of element's code when the first one arrives; the
Plotly charts' is 4.7 MB, and evaluating it holds the browser's main thread for about half a
second on a 2-core machine. When the chart deltas arrive right behind the headline's (the
figures come from a cache), the headline's metrics waited behind that: measured in Chromium
on Live, headline visible after 0.9-2.1 s, against 0.7 s when the charts come 0.3 s later
(bench/browser.py; docs/decisions.md). So a session's first run of a page lets at least
HEADLINE_LEAD_S pass between its headline and its first chart: the reads between them count
towards it, and a rerun (a refresh, a widget changed) has the code loaded and never waits."""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

HEADLINE_LEAD_S = 0.3
PAINTED = "_first_paint_done"  # session key: this session has drawn a chart before


def mark() -> float:
    """The moment the headline was drawn (a monotonic clock)."""
    return time.monotonic()


def before_charts(
    headline_drawn: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait, in a session's first run only, until HEADLINE_LEAD_S after `headline_drawn`."""
    if st.session_state.get(PAINTED):
        return
    st.session_state[PAINTED] = True
    left = HEADLINE_LEAD_S - (clock() - headline_drawn)
    if left > 0:
        sleep(left)
