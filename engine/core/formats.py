"""Latency, moments and changes as people read them, in one format for every page, report and
CLI line (money has its own, engine.core.money): a latency in whole milliseconds with the
thousands marked ("1,102 ms", never "1101.7394"), a moment as its weekday, day, month and minute
("Wed 2 Dec 18:53", with " UTC" where nothing else names the zone; never an ISO stamp with
microseconds), and a change as a signed share ("+59%", "-12%"; one that rounds to nothing
"0%").

Pure functions of their arguments: no clock, no pandas (a missing value is None or NaN).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo

__all__ = ["MISSING", "format_duration", "format_latency", "format_latency_change",
           "format_moment", "format_share_change"]  # fmt: skip

MISSING = "—"  # what a person reads where a figure is missing: never None, nan or <NA>


def _missing(value: float | None) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(value)
    except TypeError:  # pandas.NA, without importing pandas into the core
        return str(value) == "<NA>"


def format_latency(ms: float | None, missing: str = MISSING) -> str:
    """ "850 ms", "1,102 ms", "25,310 ms": one unit, so that latencies side by side compare at
    a glance; `missing` without one."""
    return missing if _missing(ms) else f"{ms:,.0f} ms"


def format_latency_change(ms: float | None, missing: str = MISSING) -> str:
    """ "+220 ms", "-40 ms": a difference of latencies, always signed; `missing` without one."""
    return missing if _missing(ms) else f"{ms:+,.0f} ms"


def format_share_change(fraction: float | None, missing: str = MISSING) -> str:
    """A change as a fraction of what it is compared with, in whole percents and signed: 0.59
    is "+59%", -0.12 "-12%", and a change that rounds to nothing "0%" (never "-0%");
    `missing` where there is nothing to compare with."""
    if _missing(fraction):
        return missing
    percents = round(fraction * 100)  # type: ignore[operator]
    return "0%" if percents == 0 else f"{percents:+,d}%"


def format_moment(at: datetime, *, zone: tzinfo = UTC, named: bool = False) -> str:
    """ "Wed 2 Dec 18:53": the weekday, day, month and minute in `zone` (a naive time is UTC),
    and with `named` the zone's name after it ("Wed 2 Dec 18:53 UTC"), for a line that says
    it nowhere else."""
    local = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(zone)
    said = f"{local:%a} {local.day} {local:%b %H:%M}"
    return f"{said} {local:%Z}" if named else said


def format_duration(seconds: float) -> str:
    """A span of time for people: tenths of a second under ten seconds ("0.4 s"), seconds under
    a minute ("30 s"), minutes under an hour ("5 min"), then hours and minutes ("3 h 10 min")
    and, from a day, days and hours ("2 d 4 h"). Every incident's length, on every page, report
    and console line, is said this way, so that one incident never reads 6 min in one place and
    7 in another."""
    if seconds < 0:
        raise ValueError(f"a duration is not negative: {seconds}")
    if round(seconds, 1) < 10:
        tenths = round(seconds, 1)
        return f"{tenths:.0f} s" if tenths == int(tenths) else f"{tenths:.1f} s"
    if round(seconds) < 60:
        return f"{round(seconds)} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
