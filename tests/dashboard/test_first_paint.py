"""A session's first run of a page leaves its headline a lead over its first chart, so that
the browser paints the headline before it loads the chart library; later runs never wait."""

from __future__ import annotations

import pytest
import streamlit as st

from dashboard import first_paint


@pytest.fixture
def new_session():
    st.session_state.clear()
    yield
    st.session_state.clear()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_first_run_waits_out_what_is_left_of_the_lead(new_session):
    clock = Clock(100.1)
    first_paint.before_charts(100.0, clock, clock.sleep)
    assert clock.slept == [pytest.approx(first_paint.HEADLINE_LEAD_S - 0.1)]


def test_reads_longer_than_the_lead_cost_no_wait(new_session):
    clock = Clock(100.0 + first_paint.HEADLINE_LEAD_S + 0.05)
    first_paint.before_charts(100.0, clock, clock.sleep)
    assert clock.slept == []


def test_a_session_waits_once_and_never_on_a_refresh_or_another_page(new_session):
    clock = Clock(100.0)
    for headline in (100.0, 200.0, 300.0):  # first run, a refresh, another page
        clock.now = headline
        first_paint.before_charts(headline, clock, clock.sleep)
    assert len(clock.slept) == 1
