"""The minutes incidents are made of, read from the minute rollups and kept between passes.

Two kinds of minute are evidence of an incident (engine.alerts.incidents says how they make
windows):
  - a target's *bad* minute for a fault family: the family's faults are at least `fault_rate`
    of the target's attempts that minute (any of them, for a decisive family: a refused key);
  - a target's *held* minute: the routes whose primary it is did not get it (answered by a
    backup, failed, broken mid-stream) for at least `fault_rate` of their requests, request
    faults and abandoned requests aside, and no fault drill held it down on that route.

Both are read with the rate applied in SQL, so only evidence leaves DuckDB: the minutes with any
fault at all are most minutes of a busy store (132,000 of them over 30 days in the bench).

Reading the whole history is still a scan of every minute rollup ever kept (30 days of 24
series: 200-300 ms at 100 M attempts), once a minute. So `Evidence` keeps what it read and, on
the next pass, reads again only the minutes refreshed since (`refreshed`, told by the cycle
that refreshed them): earlier minute rollups do not change. Everything is read again when
something a minute's evidence depends on changed: the fault rate, a route's primary, the
drills, or a refresh the caller could not bound (`refreshed(None)`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import duckdb

from engine.core.fault_families import FAMILIES

Minutes = dict[datetime, dict[str, tuple[int, float]]]  # bucket → family → (faults, share)
Held = dict[datetime, tuple[int, float]]  # bucket → (requests kept from it, share)


def _bad_minutes(since: bool) -> str:
    sums = ", ".join(f"sum({f.rollup_sum})::BIGINT AS {f.name}" for f in FAMILIES)
    bad = " OR ".join(
        f"({f.name} > 0)" if f.decisive else f"({f.name} > 0 AND {f.name} >= $rate * n)"
        for f in FAMILIES
    )
    return f"""
        SELECT target, any_value(provider) AS provider, bucket, sum(attempts)::BIGINT AS n,
            {sums}
        FROM rollup_minute {"WHERE bucket >= $since" if since else ""}
        GROUP BY target, bucket HAVING {bad}
    """


# The minutes when the routes whose primary is a target did not get it; the minutes a drill
# held that target down on that route are an exercise, left out (its end included: a drill that
# ended itself at its first failed request may end the moment it started).
def _held_minutes(since: bool) -> str:
    return f"""
        SELECT p.target, r.bucket,
            sum(r.requests - r.request_faults - r.abandoned)::BIGINT AS n,
            sum(r.answered_by_fallback - coalesce(r.drill_fallbacks, 0) + r.unavailable
                + r.broken_streams)::BIGINT AS bad
        FROM rollup_minute r JOIN route_primaries p USING (route)
        WHERE {"r.bucket >= $since AND" if since else ""} NOT EXISTS (
            SELECT 1 FROM drills d WHERE d.route = r.route AND d.target = p.target
                AND d.started_at < r.bucket + INTERVAL 1 MINUTE
                AND coalesce(d.ended_at, d.ends_at) >= r.bucket)
        GROUP BY ALL
        HAVING bad > 0 AND bad >= $rate * n
    """


_BAD = {False: _bad_minutes(False), True: _bad_minutes(True)}
_HELD = {False: _held_minutes(False), True: _held_minutes(True)}
# What the held minutes depend on besides the rollups: small tables, read whole each pass.
_PRIMARIES = "SELECT route, target FROM route_primaries ORDER BY ALL"
_DRILLS = """
    SELECT route, target, started_at, coalesce(ended_at, ends_at) FROM drills ORDER BY ALL
"""


class Evidence:
    """Each target's bad and held minutes, kept up to date pass after pass."""

    def __init__(self) -> None:
        self.bad: dict[str, Minutes] = defaultdict(dict)
        self.held: dict[str, Held] = defaultdict(dict)
        self.provider_of: dict[str, str] = {}
        self._read_with: tuple[float, list[tuple], list[tuple]] | None = None
        self._stale_from: datetime | None = None  # refreshed since the last read
        self._unbounded = True  # refreshed in a way nobody said: read everything

    def refreshed(self, since: datetime | None) -> None:
        """The minute rollups from `since` on were refreshed; None: any of them may have."""
        if since is None:
            self._unbounded = True
        elif self._stale_from is None or since < self._stale_from:
            self._stale_from = since

    def read(self, con: duckdb.DuckDBPyConnection, fault_rate: float) -> None:
        """Bring the evidence up to date with the store."""
        depends = (
            fault_rate, con.execute(_PRIMARIES).fetchall(), con.execute(_DRILLS).fetchall()
        )  # fmt: skip
        if self._unbounded or depends != self._read_with:
            self.bad.clear()
            self.held.clear()
            self._add(con, fault_rate, None)
        elif self._stale_from is not None:
            since = self._stale_from.replace(second=0, microsecond=0)
            for minutes in (*self.bad.values(), *self.held.values()):
                for bucket in [b for b in minutes if b >= since]:
                    del minutes[bucket]
            self._add(con, fault_rate, since)
        self._read_with, self._stale_from, self._unbounded = depends, None, False

    def _add(self, con: duckdb.DuckDBPyConnection, rate: float, since: datetime | None) -> None:
        params: dict[str, object] = {"rate": rate}
        if since is not None:
            params["since"] = since
        for target, provider, bucket, n, *counts in con.execute(
            _BAD[since is not None], params
        ).fetchall():
            bad = {
                family.name: (count, count / n if n else 1.0)
                for family, count in zip(FAMILIES, counts, strict=True)
                if count and (family.decisive or count >= rate * n)
            }
            if bad:  # the same test as the SQL's; kept so the two cannot disagree silently
                self.bad[target][bucket] = bad
                self.provider_of[target] = provider
        for target, bucket, n, bad in con.execute(_HELD[since is not None], params).fetchall():
            self.held[target][bucket] = (bad, bad / n if n else 1.0)
