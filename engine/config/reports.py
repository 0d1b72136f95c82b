"""[reports]: when the scheduler writes last week's report, the availability target it is
measured against, and which [alerting] receivers get its headline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of


@dataclass(frozen=True, slots=True)
class ReportsConfig:
    """[reports]: when the scheduler writes last week's report, and the availability target."""

    day: str = "mon"  # mon … sun
    hour: int = 6  # UTC
    availability_target: float = 0.999
    # Receivers of [alerting] (by name) that get the report's headline once it is written.
    send_to: tuple[str, ...] = ()


_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_REPORTS_KEYS = ("day", "hour", "availability_target", "send_to")


def parse_reports(table: Any, fail: Fail, receivers: set[str]) -> ReportsConfig:
    table = table_of(table, "reports", fail)
    no_unknown(table, _REPORTS_KEYS, "reports", fail)
    day = table.get("day", "mon")
    if day not in _DAYS:
        raise fail("reports.day", f"must be one of {', '.join(_DAYS)} (got {day!r})")
    hour = table.get("hour", 6)
    if not isinstance(hour, int) or isinstance(hour, bool) or not 0 <= hour <= 23:
        raise fail("reports.hour", "must be an hour of the day, 0 to 23 (UTC)")
    target = table.get("availability_target", 0.999)
    if not isinstance(target, int | float) or isinstance(target, bool) or not 0 < target < 1:
        raise fail("reports.availability_target", "must be a share between 0 and 1, like 0.999")
    send_to = table.get("send_to", [])
    if not isinstance(send_to, list) or not all(isinstance(n, str) for n in send_to):
        raise fail("reports.send_to", 'must be a list of receiver names, like ["ops-slack"]')
    unknown = sorted(set(send_to) - receivers)
    if unknown:
        known = ", ".join(sorted(receivers)) or "none is configured"
        raise fail(
            "reports.send_to",
            f"names no [[alerting.receivers]]: {', '.join(unknown)} (receivers: {known})",
        )
    return ReportsConfig(day, hour, float(target), tuple(send_to))
