"""When the recorder's flusher writes, and so how large its spool files are: a pure policy.

Files grow with traffic: a quiet recorder writes what arrived each `flush_interval_s`, or at
`flush_rows` rows; a busy one waits for the interval instead of writing every `flush_rows`, so
its files hold about an interval of traffic (up to the recorder's `FILE_ROWS`): fewer, larger
files, which cost the scheduler's ingest less a row. Times are passed in, never read here.
"""

from __future__ import annotations


class FlushPacing:
    """When the flusher writes, and so how large the spool files are. Pure: times are passed in
    (monotonic seconds), so it is the same policy on a real or a virtual clock.

    A write takes every attempt waiting. It is due `interval_s` after the previous write began,
    less twice the time that write took (at most half the interval): the attempts waiting were
    recorded after it began, so each is written within `interval_s` of its recording as long as
    a write takes at most twice as long as the one before it. The rows that wake the flusher
    before then (`threshold`) are twice those of the last write, between `min_rows` and
    `max_rows`: at low traffic `min_rows`; at steady high traffic the deadline comes first and a
    file holds an interval of attempts; in a burst the files double from one write to the next
    (so that each write takes at most about twice the one before) up to `max_rows`.
    """

    def __init__(self, interval_s: float, min_rows: int, max_rows: int, now: float) -> None:
        self.interval_s, self.min_rows, self.max_rows = interval_s, min_rows, max_rows
        self.threshold = min_rows
        self._began = now
        self._margin = interval_s / 10  # until a write is measured, assume a tenth

    def due(self) -> float:
        """When the next write must begin."""
        return self._began + self.interval_s - self._margin

    def wrote(self, began: float, ended: float, rows: int) -> None:
        """A write began at `began` with the `rows` attempts then waiting, and ended at `ended`."""
        if rows:
            self._margin = min(2 * (ended - began), self.interval_s / 2)
        self.threshold = min(max(2 * rows, self.min_rows), self.max_rows)
        self._began = began
