"""Dates and durations as the report writes them: a week as its seven days, never as two
Mondays; under a minute in seconds, never "0 min"."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engine.reports.dates import day_span, duration, moment, week_days


@pytest.mark.parametrize(
    ("first", "last", "said"),
    [
        (date(2026, 11, 23), date(2026, 11, 29), "Mon 23 – Sun 29 Nov 2026"),
        (date(2026, 11, 30), date(2026, 12, 6), "Mon 30 Nov – Sun 6 Dec 2026"),
        (date(2026, 12, 28), date(2027, 1, 3), "Mon 28 Dec 2026 – Sun 3 Jan 2027"),
        (date(2026, 12, 1), date(2026, 12, 1), "Tue 1 Dec 2026"),
    ],
)
def test_a_span_of_days_names_each_month_and_year_once(first, last, said):
    assert day_span(first, last) == said


def test_a_week_reads_monday_to_sunday_not_to_the_next_monday():
    start, end = datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)
    assert week_days(start, end) == "Mon 23 – Sun 29 Nov 2026"


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s"), (0.4, "0.4 s"), (6.67, "6.7 s"), (30, "30 s"), (59.4, "59 s"), (59.6, "1 min"),
     (300, "5 min"), (3599, "1 h"), (11_400, "3 h 10 min"), (187_200, "2 d 4 h"),
     (172_800, "2 d")],
)  # fmt: skip
def test_a_duration_is_said_in_the_largest_units_that_keep_it_readable(seconds, said):
    assert duration(seconds) == said


def test_a_moment_is_its_weekday_day_month_and_minute_in_utc():
    assert moment(datetime(2026, 11, 25, 13, 1, 42, tzinfo=UTC)) == "Wed 25 Nov 13:01"
