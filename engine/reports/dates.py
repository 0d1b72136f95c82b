"""Dates and durations as the weekly report writes them: a week reads as its seven days
("Mon 23 – Sun 29 Nov 2026"), never as two Mondays; a moment as its weekday, day and time in
UTC ("Wed 25 Nov 13:01"); a duration in the largest units that keep it exact enough ("30 s",
"5 min", "3 h 10 min", "2 d 4 h"), so that a 30-second drill never reads "0 min".

Pure functions of their arguments: no clock, no time zone but UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from engine.core.formats import format_duration as duration
from engine.core.formats import format_moment

__all__ = ["day_span", "duration", "moment", "week_days"]


def day_span(first: date, last: date) -> str:
    """Two days, inclusive, naming each month and year once: "Mon 23 – Sun 29 Nov 2026",
    "Mon 30 Nov – Sun 6 Dec 2026", "Mon 28 Dec 2026 – Sun 3 Jan 2027"; one day alone when they
    are the same."""
    end = f"{last:%a} {last.day} {last:%b %Y}"
    if first == last:
        return end
    if (first.year, first.month) == (last.year, last.month):
        start = f"{first:%a} {first.day}"
    elif first.year == last.year:
        start = f"{first:%a} {first.day} {first:%b}"
    else:
        start = f"{first:%a} {first.day} {first:%b %Y}"
    return f"{start} – {end}"


def week_days(start: datetime, end: datetime) -> str:
    """The days of [start, end): a week from Monday 00:00 to the next reads Monday to Sunday."""
    last = end - timedelta(microseconds=1)
    return day_span(_utc(start).date(), _utc(last).date())


def moment(at: datetime) -> str:
    """ "Wed 25 Nov 13:01": the weekday, day, month and minute, in UTC (the report's zone), as
    every moment a person reads is written (engine.core.formats)."""
    return format_moment(at)


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
