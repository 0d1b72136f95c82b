"""engine.core.formats: latencies, moments and changes as people read them, one format for every
page, report and CLI line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from engine.core.formats import (
    MISSING,
    format_duration,
    format_latency,
    format_latency_change,
    format_moment,
    format_share_change,
)


@pytest.mark.parametrize(
    ("ms", "said"),
    [(1101.7394, "1,102 ms"), (850.2, "850 ms"), (0.0, "0 ms"), (25_310.0, "25,310 ms"),
     (None, MISSING), (float("nan"), MISSING), (pd.NA, MISSING)],
)  # fmt: skip
def test_a_latency_reads_in_whole_milliseconds_with_the_thousands_marked(ms, said):
    assert format_latency(ms) == said


@pytest.mark.parametrize(("ms", "said"), [(220.4, "+220 ms"), (-40.0, "-40 ms"),
                                          (1_500.0, "+1,500 ms"), (None, MISSING)])  # fmt: skip
def test_a_difference_of_latencies_is_signed(ms, said):
    assert format_latency_change(ms) == said


@pytest.mark.parametrize(
    ("fraction", "said"),
    [(0.59, "+59%"), (-0.12, "-12%"), (0.004, "0%"), (-0.004, "0%"), (12.5, "+1,250%"),
     (None, MISSING), (float("nan"), MISSING)],
)  # fmt: skip
def test_a_change_is_a_signed_share_and_nothing_never_reads_minus_zero(fraction, said):
    assert format_share_change(fraction) == said


def test_a_moment_reads_to_the_minute_never_as_an_iso_stamp():
    at = datetime(2026, 12, 2, 18, 53, 15, 166_276, tzinfo=UTC)
    assert format_moment(at) == "Wed 2 Dec 18:53"
    assert format_moment(at, named=True) == "Wed 2 Dec 18:53 UTC"
    assert format_moment(at.replace(tzinfo=None)) == "Wed 2 Dec 18:53", "naive is UTC"
    assert format_moment(pd.Timestamp(at)) == "Wed 2 Dec 18:53"
    sao_paulo = format_moment(at, zone=ZoneInfo("America/Sao_Paulo"), named=True)
    assert sao_paulo == "Wed 2 Dec 15:53 -03"


def test_an_incidents_length_reads_the_same_on_the_page_in_the_report_and_on_the_console():
    """The demo's Sonnet outage of 06:16:00-06:22:50 read "6 min" on the Incidents page and
    "7 min" in the weekly report (issue 33's hour run): one formatter now says all three."""
    from dashboard.metrics import incident_table
    from engine.reports.dates import duration

    started = datetime(2026, 12, 3, 6, 16, tzinfo=UTC)
    ended = started + timedelta(minutes=6, seconds=50)
    incidents = pd.DataFrame({
        "started_at": [pd.Timestamp(started)], "ended_at": [pd.Timestamp(ended)],
        "subject": ["claude/claude-sonnet-4-5"], "family": ["availability"], "routes": ["support"],
    })  # fmt: skip
    [page] = incident_table(incidents, ended)["duration"]
    assert page == duration((ended - started).total_seconds()) == format_duration(410) == "7 min"
