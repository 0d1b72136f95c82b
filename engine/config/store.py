"""[store]: how long the scheduler's database keeps attempts before they move to the archives.

Checked against the alert rules: a rule that reads attempts must find its whole window still
in the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.alerting import ROLLUP_KINDS, AlertingConfig
from engine.config.checks import Fail, no_unknown, table_of

_STORE_KEYS = ("keep_attempts_days",)
# From 2: a day moves once it is wholly this old, and a file up to `keep - 1` days late still
# counts (engine.store.retention.refresh_floor), so a host offline for a day loses nothing.
_KEEP_DAYS = (2, 36_500)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """[store]: how long the scheduler keeps attempts in its database; older ones move to
    monthly Parquet archives under data/archive/ (engine.store.retention), rollups stay."""

    keep_attempts_days: int = 30


def parse_store(table: Any, fail: Fail, alerting: AlertingConfig) -> StoreConfig:
    table = table_of(table, "store", fail)
    no_unknown(table, _STORE_KEYS, "store", fail)
    days = table.get("keep_attempts_days", StoreConfig().keep_attempts_days)
    low, high = _KEEP_DAYS
    if not isinstance(days, int) or isinstance(days, bool) or not low <= days <= high:
        raise fail(
            "store.keep_attempts_days",
            f"must be a whole number of days from {low} to {high} "
            "(archived attempts are kept for good: there is no 'never')",
        )
    # The rules that read attempts (credentials, latency) look back their window; those that
    # read only the rollups (an [[slo]]'s 3-day burn rate) never miss an archived attempt.
    reading = [rule for rule in alerting.rules if rule.kind not in ROLLUP_KINDS]
    longest = max(reading, key=lambda rule: rule.window_s, default=None)
    if longest is not None and longest.window_s > days * 86_400:
        raise fail(
            "store.keep_attempts_days",
            f"{days} days is shorter than the window of alert {longest.name!r} "
            f"({longest.window_s / 86_400:g} days)",
        )
    return StoreConfig(days)
