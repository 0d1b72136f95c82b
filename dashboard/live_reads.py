"""What Live reads of the attempts on each refresh: the exact p99 of the last 5 min and of the
window, the last 5 min's failures by target, who answered in the last minute, the window's
timelines of latency, failures and time to first token, and its latest failed attempts.

Eight queries over the same parts of the 24 h of attempts. Read one by one, each opened
and scanned every part (about 30 ms each at the demo's volume, mostly the parts' footers);
for a window of up to ONE_SCAN_UP_TO they come from one read of the window
(`PublishedData.query_attempts`), the rows kept in memory only for the refresh. Longer
windows would hold too many rows at production volume (20 M attempts a day are 830,000 rows
an hour, 5 M in six) and are read one query at a time, each only the columns it needs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from dashboard import data
from dashboard.metrics import MINUTE, Span

ATTEMPTS_KEPT = timedelta(hours=24)  # recent_attempts is published for a day
ONE_SCAN_UP_TO = timedelta(hours=1)
RECENT_FAILED = 50
Request = tuple[str, dict[str, Any]]  # a named query and its parameters


class LiveAttempts:
    """The reads, each a DataFrame of its named query. Read one at a time (a long window),
    each is read when first used, so that the headline's two p99s go before the rest."""

    def __init__(self, requests: dict[str, Request], frames: dict[str, pd.DataFrame]) -> None:
        self._requests, self._frames = requests, frames

    def _frame(self, key: str) -> pd.DataFrame:
        if key not in self._frames:
            name, params = self._requests[key]
            self._frames[key] = data.query(name, **params)
        return self._frames[key]

    @property
    def p99_recent_ms(self) -> float | None:
        return _p99(self._frame("recent latency"))

    @property
    def p99_window_ms(self) -> float | None:
        """None for a window of hours: there is no exact p99 over a week."""
        return _p99(self._frame("window latency")) if "window latency" in self._requests else None

    @property
    def failures_recent(self) -> pd.DataFrame:  # by target, over the last 5 min
        return self._frame("recent failures")

    @property
    def served_last_minute(self) -> pd.DataFrame:  # the minute before the data's time
        return self._frame("served")

    @property
    def latency(self) -> pd.DataFrame:  # the timelines: over the window, its last 24 h
        return self._frame("latency")

    @property
    def failures(self) -> pd.DataFrame:
        return self._frame("failures")

    @property
    def streams(self) -> pd.DataFrame:
        return self._frame("streams")

    @property
    def failed(self) -> pd.DataFrame:  # the window's latest RECENT_FAILED failed attempts
        return self._frame("failed")


def read(v: data.View, recent: Span, window: Span) -> LiveAttempts:
    """Live's reads of the attempts as of `recent.end` (the data's time)."""
    as_of = recent.end
    timelines = {"since": attempts_since(window), "width": v.bucket}
    requests: dict[str, Request] = {
        "recent latency": ("latency_between", {"since": recent.start, "until": recent.end}),
        "recent failures": ("failures_by_target", {"since": recent.start, "until": recent.end}),
        "served": ("served_between", {"since": as_of - MINUTE, "until": as_of}),
        "latency": ("latency_by_bucket", timelines),
        "failures": ("failures_by_bucket", timelines),
        "streams": ("ttft_by_bucket", timelines),
        "failed": ("failed_attempts", {"since": window.start, "limit": RECENT_FAILED}),
    }
    if v.grain == "minute":
        requests["window latency"] = (
            "latency_between",
            {"since": window.start, "until": window.end},
        )
    if window.length > ONE_SCAN_UP_TO:
        return LiveAttempts(requests, {})
    since = min(params["since"] for _, params in requests.values())
    frames = data.query_attempts(since, None, list(requests.values()))
    return LiveAttempts(requests, dict(zip(requests, frames, strict=True)))


def attempts_since(window: Span) -> datetime:
    """Where the attempt timelines begin: the window's start, or 24 h back for a longer one."""
    return max(window.start, window.end - ATTEMPTS_KEPT)


def _p99(latency: pd.DataFrame) -> float | None:
    return float(latency["p99_ms"].iloc[0]) if len(latency) else None
