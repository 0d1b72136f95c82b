"""The traffic profile: what the what-if simulator reads to build a scenario from the team's own
traffic (simulations.whatif.from_store), published as snapshots beside the rollups.

    traffic_minute    per route and minute: requests, answered by fallback, failed, cost (from
                      the minute rollups), and the answers' prompt (input + cache read + cache
                      write tokens) and answer tokens, summed
    traffic_sizes     per route and hour: answers, quantiles of their prompt and answer sizes;
                      the primary's prompt and cache reads on its warm answers (those that read
                      its cache)
    target_latency    per target and hour: quantiles of a success's latency and, streamed, of
                      its time to the first token
    incident_minutes  per incident, minute and its target, from REPLAY_MARGIN before it to as
                      long after: the target's calls, failed calls, and its faults by class

Counts and distributions only, never a prompt's text. Quantiles cannot be summed, so sizes and
latency are kept per hour in tables of their own (engine.store.traffic_tables, migration 12),
with the sizes' sums per minute (a replayed window's mean is its own, exactly: cost is linear
in it, and the mean of an hour's 50 answers can be 10 % off that of the 20 in a window); they
are refreshed for the hours that changed: the hours since the last run, and back to the
oldest attempt of a late file. Those hours may reach past the attempts the database keeps
(`[store] keep_attempts_days`, 30 by default, against 35 here), and an incident's faults too:
what reads attempts reads them where they are, the table and the archive's parts
(engine.store.retention.stored_attempts), so an archived day's profile is what it was.
`TrafficProfile.run` does that and publishes all four, off the cycle: the scheduler calls it
every minute and it works only when due (every PROFILE_EVERY, after late data, or when an
incident has ended), so a cycle never pays for it (issue 23). Published for 35 days, like the
hourly rollups.

Their shapes (columns, grain, LEVELS, REPLAY_MARGIN) are engine.published.catalogue's, and the
read side's queries engine.published.profile_queries'.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from engine.core.fault_families import FAMILIES
from engine.published import publish as publishing
from engine.published.catalogue import LEVELS, REPLAY_MARGIN, select
from engine.store.retention import STORED, stored_attempts

KEEP = timedelta(days=35)
PROFILE_EVERY = timedelta(minutes=15)
HOUR = timedelta(hours=1)

_LEVELS_SQL = "[" + ", ".join(map(repr, LEVELS)) + "]"  # a constant: quantile lists bind none
_PROMPT = "input_tokens + cache_read_tokens + cache_write_tokens"
# A served success is one answer; a stream a later target finished is counted at its start.
_REFRESH_SIZES = f"""
INSERT INTO traffic_sizes
SELECT time_bucket(INTERVAL 1 HOUR, started_at) AS hour, route, count(*) AS answers,
    quantile_cont({_PROMPT}, {_LEVELS_SQL}) AS prompt_tokens,
    quantile_cont(output_tokens, {_LEVELS_SQL}) AS output_tokens,
    coalesce(sum({_PROMPT}) FILTER (fallback_depth = 0 AND cache_read_tokens > 0), 0)::BIGINT,
    coalesce(sum(cache_read_tokens) FILTER (fallback_depth = 0 AND cache_read_tokens > 0),
        0)::BIGINT
FROM {STORED}
WHERE started_at >= $lo AND started_at < $hi AND served AND outcome = 'success'
    AND continues_attempt IS NULL
GROUP BY ALL
"""
_REFRESH_ANSWERS = f"""
INSERT INTO traffic_answers
SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, route, count(*) AS answers,
    sum({_PROMPT})::BIGINT AS prompt_tokens, sum(output_tokens)::BIGINT AS output_tokens
FROM {STORED}
WHERE started_at >= $lo AND started_at < $hi AND served AND outcome = 'success'
    AND continues_attempt IS NULL
GROUP BY ALL
"""
_REFRESH_LATENCY = f"""
INSERT INTO target_latency
SELECT time_bucket(INTERVAL 1 HOUR, started_at) AS hour, target, count(*) AS answers,
    quantile_cont(latency_ms, {_LEVELS_SQL}) AS latency_ms,
    count(ttft_ms) AS streams,
    quantile_cont(ttft_ms, {_LEVELS_SQL}) FILTER (ttft_ms IS NOT NULL) AS ttft_ms
FROM {STORED}
WHERE started_at >= $lo AND started_at < $hi AND outcome = 'success'
GROUP BY ALL
"""

_TRAFFIC_MINUTE = """
WITH requests AS (
SELECT bucket, route, coalesce(sum(requests), 0)::BIGINT AS requests,
    coalesce(sum(answered), 0)::BIGINT AS answered,
    coalesce(sum(answered_by_fallback), 0)::BIGINT AS answered_by_fallback,
    coalesce(sum(unavailable + broken_streams), 0)::BIGINT AS failed,
    coalesce(sum(request_faults), 0)::BIGINT AS request_faults,
    coalesce(sum(cost_usd), 0)::DECIMAL(18,9) AS cost_usd,
    coalesce(sum(fallback_premium_usd), 0)::DECIMAL(18,9) AS fallback_premium_usd,
    coalesce(sum(cache_loss_usd), 0)::DECIMAL(18,9) AS cache_loss_usd,
    coalesce(sum(rewarm_usd), 0)::DECIMAL(18,9) AS rewarm_usd,
    coalesce(sum(wasted_usd), 0)::DECIMAL(18,9) AS wasted_usd
FROM rollup_minute WHERE bucket >= $since
GROUP BY ALL
)
SELECT bucket, route, coalesce(r.requests, 0) AS requests, coalesce(r.answered, 0) AS answered,
    coalesce(r.answered_by_fallback, 0) AS answered_by_fallback, coalesce(r.failed, 0) AS failed,
    coalesce(r.request_faults, 0) AS request_faults,
    coalesce(r.cost_usd, 0)::DECIMAL(18,9) AS cost_usd,
    coalesce(r.fallback_premium_usd, 0)::DECIMAL(18,9) AS fallback_premium_usd,
    coalesce(r.cache_loss_usd, 0)::DECIMAL(18,9) AS cache_loss_usd,
    coalesce(r.rewarm_usd, 0)::DECIMAL(18,9) AS rewarm_usd,
    coalesce(r.wasted_usd, 0)::DECIMAL(18,9) AS wasted_usd,
    coalesce(a.answers, 0) AS answers, coalesce(a.prompt_tokens, 0) AS prompt_tokens,
    coalesce(a.output_tokens, 0) AS output_tokens
FROM requests r
FULL JOIN (SELECT * FROM traffic_answers WHERE bucket >= $since) a USING (bucket, route)
"""
# The spans whose attempts _INCIDENT_MINUTES reads (a minute wider: the windows are whole
# minutes), so that only the archive's parts of days with an incident are opened.
_INCIDENT_SPANS = """
SELECT started_at - $margin - INTERVAL 1 MINUTE, ended_at + $margin + INTERVAL 1 MINUTE
FROM incidents WHERE target IS NOT NULL AND ended_at IS NOT NULL AND ended_at >= $since
"""
_FAULT_KINDS = "(" + ", ".join(f"'{k}'" for f in FAMILIES for k in f.fault_kinds) + ")"
# Each incident expanded into its minutes, joined on the minute (equality joins, as in
# engine.alerts.incident_impact). One row a minute and fault class; a minute without faults
# has one row with no class.
_INCIDENT_MINUTES = f"""
WITH windows AS (
    SELECT incident_id, target, time_bucket(INTERVAL 1 MINUTE, started_at) - $margin AS lo,
        time_bucket(INTERVAL 1 MINUTE, ended_at) + INTERVAL 1 MINUTE + $margin AS hi
    FROM incidents
    WHERE target IS NOT NULL AND ended_at IS NOT NULL AND ended_at >= $since
),
minutes AS (
    SELECT incident_id, target,
        unnest(generate_series(lo, hi - INTERVAL 1 MINUTE, INTERVAL 1 MINUTE)) AS bucket
    FROM windows
),
calls AS (
    SELECT bucket, target, sum(attempts)::BIGINT AS calls, sum(failed_attempts)::BIGINT AS failed
    FROM rollup_minute
    WHERE bucket >= (SELECT min(lo) FROM windows) AND bucket < (SELECT max(hi) FROM windows)
    GROUP BY ALL
),
held AS (  -- the requests of the routes whose primary it is, and those it did not serve
    SELECT r.bucket, p.target,
        sum(r.requests - r.request_faults - r.abandoned)::BIGINT AS wanted,
        sum(r.answered_by_fallback - coalesce(r.drill_fallbacks, 0) + r.unavailable
            + r.broken_streams)::BIGINT AS held
    FROM rollup_minute r JOIN route_primaries p USING (route)
    WHERE r.bucket >= (SELECT min(lo) FROM windows) AND r.bucket < (SELECT max(hi) FROM windows)
    GROUP BY ALL
),
faults AS (
    SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, target, fault_kind,
        coalesce(error_class, 'unknown') AS error_class, count(*)::BIGINT AS failures,
        median(retry_after_s) AS retry_after_s
    FROM {STORED}
    WHERE outcome = 'error' AND fault_kind IN {_FAULT_KINDS}
        AND started_at >= (SELECT min(lo) FROM windows)
        AND started_at < (SELECT max(hi) FROM windows)
    GROUP BY ALL
)
SELECT m.incident_id, m.bucket, m.target, coalesce(c.calls, 0)::BIGINT AS calls,
    coalesce(c.failed, 0)::BIGINT AS failed, f.fault_kind, f.error_class,
    coalesce(f.failures, 0)::BIGINT AS failures, f.retry_after_s,
    coalesce(h.wanted, 0)::BIGINT AS wanted, coalesce(h.held, 0)::BIGINT AS held
FROM minutes m
LEFT JOIN calls c ON c.bucket = m.bucket AND c.target = m.target
LEFT JOIN held h ON h.bucket = m.bucket AND h.target = m.target
LEFT JOIN faults f ON f.bucket = m.bucket AND f.target = m.target
"""


class TrafficProfile:
    """When the profile is due, and what it must recompute; one per scheduler process.
    `archive_dir`: where the store's archived attempts are (DataPaths.archive); None for a
    store that never archives (a store with archives then fails to refresh, never reads less)."""

    def __init__(self, archive_dir: Path | None = None) -> None:
        self.archive_dir = archive_dir
        self.published_at: datetime | None = None
        self._redo_from: datetime | None = None  # late attempts: their hours are stale
        self._last_ended: datetime | None = None  # the last incident end it published

    def note_late(self, oldest: datetime) -> None:
        """Attempts this old arrived late: the hours from theirs are recomputed at the next
        run, which is due at once (the demo's history is replayable a minute after seeding)."""
        if self._redo_from is None or oldest < self._redo_from:
            self._redo_from = oldest

    def run(self, con: duckdb.DuckDBPyConnection, published_dir: Any, now: datetime) -> bool:
        """Refresh and publish the profile when due; whether it was."""
        (ended,) = con.execute("SELECT max(ended_at) FROM incidents").fetchone()
        due = (
            self.published_at is None
            or self._redo_from is not None
            or now - self.published_at >= PROFILE_EVERY
            or (ended is not None and (self._last_ended is None or ended > self._last_ended))
        )
        if not due:
            return False
        refresh(con, self._stale_from(con, now), now, self.archive_dir)
        publish(con, published_dir, now, self.archive_dir)
        self.published_at, self._redo_from, self._last_ended = now, None, ended
        return True

    def _stale_from(self, con: duckdb.DuckDBPyConnection, now: datetime) -> datetime:
        """The first hour to recompute: the one the last run was in (it was partial), or that
        of the oldest late attempt; in a new process, the last hour kept (or 35 days back)."""
        if self.published_at is not None:
            since = self.published_at
        else:
            (last,) = con.execute("SELECT max(hour) FROM traffic_sizes").fetchone()
            since = last or now - KEEP
        if self._redo_from is not None:
            since = min(since, self._redo_from)
        return max(since, now - KEEP)


def refresh(
    con: duckdb.DuckDBPyConnection,
    since: datetime,
    now: datetime,
    archive_dir: Path | None = None,
) -> None:
    """Recompute the sizes and latency of every hour from the one holding `since` to now (and
    the sums of their minutes), in one transaction, from the attempts wherever they are kept."""
    span = {"lo": _hour(since), "hi": _hour(now) + HOUR}
    con.execute("BEGIN TRANSACTION")
    try:
        with stored_attempts(con, archive_dir, [(span["lo"], span["hi"])]):
            for table, key, sql in (
                ("traffic_sizes", "hour", _REFRESH_SIZES),
                ("traffic_answers", "bucket", _REFRESH_ANSWERS),
                ("target_latency", "hour", _REFRESH_LATENCY),
            ):
                con.execute(f"DELETE FROM {table} WHERE {key} >= $lo AND {key} < $hi", span)
                con.execute(sql, span)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def publish(
    con: duckdb.DuckDBPyConnection,
    published_dir: Any,
    now: datetime,
    archive_dir: Path | None = None,
) -> None:
    since = {"since": now - KEEP}
    margin = {**since, "margin": REPLAY_MARGIN}
    spans = con.execute(_INCIDENT_SPANS, margin).fetchall()
    with stored_attempts(con, archive_dir, spans):
        for name, sql, params in (
            ("traffic_minute", _TRAFFIC_MINUTE, since),
            ("traffic_sizes", "SELECT * FROM traffic_sizes WHERE hour >= $since", since),
            ("target_latency", "SELECT * FROM target_latency WHERE hour >= $since", since),
            ("incident_minutes", _INCIDENT_MINUTES, margin),
        ):
            publishing.publish(con, published_dir, name, select(name, sql), params, now=now)


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)
