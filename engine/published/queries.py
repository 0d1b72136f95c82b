"""The named, parameterised queries over the published snapshots, for the dashboard, the reports
and the CLI (run by engine.published.read.PublishedData).

Every query is a constant with `$name` parameters bound by DuckDB, never a value formatted into
SQL. To add one: add it here with the snapshots it `reads` (a snapshot new to the readers also
needs its shape in engine.published.catalogue; tests/store/test_read.py checks both).
"""

from __future__ import annotations

from datetime import timedelta

from engine.published.catalogue import RECENT_ATTEMPTS, ROLLUPS
from engine.published.profile_queries import PROFILE_QUERIES
from engine.published.query import REQUIRED, Query

# time_bucket, not date_trunc: on TIMESTAMPTZ date_trunc goes through ICU's calendar, ~3× slower
# (1 M rows by minute: ~180 ms against ~60 ms).
QUERIES: dict[str, Query] = {
    "recent_attempts": Query(
        """
        SELECT * FROM recent_attempts
        WHERE started_at >= $since
          AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
          AND ($provider IS NULL OR provider = $provider)
          AND ($outcome IS NULL OR outcome = $outcome)
        ORDER BY started_at DESC, request_id, attempt_number
        LIMIT $limit
        """,
        (RECENT_ATTEMPTS,),
        {
            "since": REQUIRED,
            "until": None,
            "route": None,
            "provider": None,
            "outcome": None,
            "limit": 500,
        },
    ),
    # Live's "Recent failed attempts": the columns it shows, so that it can be answered from
    # one read of the window (PublishedData.query_attempts).
    "failed_attempts": Query(
        """
        SELECT started_at, route, target, error_class, http_status, fault_kind, decision,
               error_message, request_id
        FROM recent_attempts
        WHERE outcome = 'error' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        ORDER BY started_at DESC, request_id, attempt_number
        LIMIT $limit
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "limit": 50},
    ),
    "attempt_counts_by_minute": Query(
        """
        SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS minute, provider, outcome,
               count(*) AS attempts
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL
        ORDER BY minute, provider, outcome
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "attempt_latency_by_minute": Query(
        """
        SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, count(*) AS attempts,
               quantile_cont(latency_ms, 0.5) AS p50_ms, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "attempt_latency": Query(
        """
        SELECT count(*) AS attempts, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        HAVING count(*) > 0
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    # The Live page's timelines and health lines. Skipped rows made no HTTP call: they are
    # requests, never attempts, so they carry no latency (as in the rollups).
    "latency_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, count(*) AS attempts,
               quantile_cont(latency_ms, 0.5) AS p50_ms, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE outcome <> 'skipped' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    "latency_between": Query(
        """
        SELECT count(*) AS attempts, quantile_cont(latency_ms, 0.5) AS p50_ms,
               quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE outcome <> 'skipped' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        HAVING count(*) > 0
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    # Time to first token of the streamed attempts that answered, per route.
    "ttft_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, route, count(*) AS streams,
               quantile_cont(ttft_ms, 0.5) AS p50_ms, quantile_cont(ttft_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE streamed AND outcome = 'success' AND ttft_ms IS NOT NULL
          AND started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket, route
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    # Failed attempts by what failed; the dashboard groups the classes for people.
    "failures_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, fault_kind, error_class, http_status,
               count(*) AS attempts
        FROM recent_attempts
        WHERE outcome = 'error' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket, attempts DESC, error_class
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    "failures_by_target": Query(
        """
        SELECT target, fault_kind, error_class, http_status, count(*) AS attempts
        FROM recent_attempts
        WHERE outcome = 'error' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY target, attempts DESC, error_class
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    # Who answered, per route and target, by the answers given in [since, until): the Live
    # page's "now (last min)", exact to the second where the minute rollups are not.
    "served_between": Query(
        """
        SELECT route, target, count(*) AS answered
        FROM recent_attempts
        WHERE served AND outcome = 'success' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY route, target
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "live_processes": Query(
        "SELECT DISTINCT host, process_id FROM recent_attempts WHERE started_at >= $since",
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED},
    ),
    "attempt_values": Query(
        """
        SELECT DISTINCT route, provider, outcome, decision FROM recent_attempts
        WHERE started_at >= $since
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED},
    ),
    "find_attempts": Query(
        """
        SELECT *, count(*) OVER () AS matching FROM recent_attempts
        WHERE started_at >= $since
          AND ($routes IS NULL OR list_contains($routes, route))
          AND ($providers IS NULL OR list_contains($providers, provider))
          AND ($outcomes IS NULL OR list_contains($outcomes, outcome))
          AND ($decisions IS NULL OR list_contains($decisions, decision))
        ORDER BY started_at DESC, request_id, attempt_number
        LIMIT $limit
        """,
        (RECENT_ATTEMPTS,),
        {
            "since": REQUIRED,
            "routes": None,
            "providers": None,
            "outcomes": None,
            "decisions": None,
            "limit": 500,
        },
    ),
    "request_attempts": Query(
        """
        SELECT * FROM recent_attempts WHERE request_id = $request_id
        ORDER BY attempt_number
        """,
        (RECENT_ATTEMPTS,),
        {"request_id": REQUIRED},
    ),
    **{
        f"{grain}_rollups": Query(
            f"""
            SELECT * FROM {table}
            WHERE bucket >= $since AND ($until IS NULL OR bucket < $until)
              AND ($route IS NULL OR route = $route)
              AND ($provider IS NULL OR provider = $provider)
              AND ($feature IS NULL OR feature = $feature)
            ORDER BY bucket, route, provider, model, feature
            """,
            (table,),
            {"since": REQUIRED, "until": None, "route": None, "provider": None, "feature": None},
        )
        for grain, table in ROLLUPS.items()
    },
    "route_primaries": Query(
        "SELECT * FROM route_primaries ORDER BY route", ("route_primaries",), {}
    ),
    "alerts": Query(
        """
        SELECT * FROM alerts
        WHERE (state = 'firing' OR fired_at >= $since)
          AND ($state IS NULL OR state = $state)
        ORDER BY state = 'firing' DESC, severity = 'critical' DESC, fired_at DESC
        """,
        ("alerts",),
        {"since": REQUIRED, "state": None},
    ),
    "alert_notifications": Query(
        """
        SELECT * FROM alert_notifications
        WHERE created_at >= $since AND ($alert_id IS NULL OR alert_id = $alert_id)
        ORDER BY created_at DESC, notification_id
        """,
        ("alert_notifications",),
        {"since": REQUIRED, "alert_id": None},
    ),
    "alert_silences": Query(
        "SELECT * FROM alert_silences WHERE ends_at > $since ORDER BY ends_at",
        ("alert_silences",),
        {"since": REQUIRED},
    ),
    "incidents": Query(
        """
        SELECT * FROM incidents
        WHERE (ended_at IS NULL OR ended_at >= $since)
          AND ($until IS NULL OR started_at < $until)
          AND ($scope IS NULL OR scope = $scope)
        ORDER BY ended_at IS NULL DESC, started_at DESC
        """,
        ("incidents",),
        {"since": REQUIRED, "until": None, "scope": None},
    ),
    "failure_classes": Query(
        """
        SELECT * FROM failure_classes
        WHERE day >= $since AND ($until IS NULL OR day < $until)
        ORDER BY day, provider, attempts DESC
        """,
        ("failure_classes",),
        {"since": REQUIRED, "until": None},
    ),
    "breaker_events": Query(
        """
        SELECT * FROM breaker_events
        WHERE occurred_at >= $since AND ($until IS NULL OR occurred_at < $until)
          AND ($target IS NULL OR target = $target)
        ORDER BY occurred_at, event_id
        """,
        ("breaker_events",),
        {"since": REQUIRED, "until": None, "target": None},
    ),
    # Readiness (docs/metrics.md, Readiness): runs started in [since, until), newest first.
    "eval_runs": Query(
        """
        SELECT * FROM eval_runs
        WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
        ORDER BY started_at DESC, run_id
        """,
        ("eval_runs",),
        {"since": None, "until": None, "route": None},
    ),
    # One row a run and target: its pass rate (cases passed ÷ cases run) and what the run cost.
    "eval_scores": Query(
        """
        SELECT *, pass_rate < min_pass_rate AS below_minimum FROM (
            SELECT u.run_id, u.route, u.cases_file, u.started_at, u.finished_at,
                u.min_pass_rate, x.target, count(*) AS cases,
                count(*) FILTER (x.passed) AS passed,
                count(*) FILTER (x.passed) / count(*) AS pass_rate,
                count(*) FILTER (x.error IS NOT NULL) AS errors,
                quantile_cont(x.latency_ms, 0.5) AS latency_p50_ms,
                sum(x.cost_usd)::DECIMAL(18,9) AS cost_usd
            FROM eval_runs u JOIN eval_results x ON x.run_id = u.run_id
            WHERE ($since IS NULL OR u.started_at >= $since)
              AND ($until IS NULL OR u.started_at < $until)
              AND ($route IS NULL OR u.route = $route)
            GROUP BY ALL
        )
        ORDER BY started_at DESC, run_id, target
        """,
        ("eval_runs", "eval_results"),
        {"since": None, "until": None, "route": None},
    ),
    "eval_results": Query(
        """
        SELECT * FROM eval_results
        WHERE ($run_id IS NULL OR run_id = $run_id) AND ($passed IS NULL OR passed = $passed)
        ORDER BY run_id, target, case_name
        """,
        ("eval_results",),
        {"run_id": None, "passed": None},
    ),
    # Drills that were on at some time since `since` (all of them without it), newest first,
    # with the figures of their report (JSON, written once the drill ended) as columns.
    "drills": Query(
        """
        SELECT * EXCLUDE (r),
            r->>'verdict' AS verdict, r->>'summary' AS summary,
            (r->>'requests')::BIGINT AS requests,
            (r->>'served_by_backups')::BIGINT AS served_by_backups,
            (r->>'failed')::BIGINT AS failed, (r->>'drill_faults')::BIGINT AS drill_faults,
            (r->>'breaker_opened_after_s')::DOUBLE AS breaker_opened_after_s,
            (r->>'cost_usd')::DECIMAL(18,9) AS cost_usd,
            (r->>'primary_estimate_usd')::DECIMAL(18,9) AS primary_estimate_usd,
            (r->>'cost_difference_usd')::DECIMAL(18,9) AS cost_difference_usd,
            (r->>'restored')::BOOLEAN AS restored,
            (r->>'restored_after_s')::DOUBLE AS restored_after_s
        FROM (SELECT *, CASE WHEN json_valid(report) THEN report END AS r FROM drills)
        WHERE ($since IS NULL OR ended_at IS NULL OR ended_at >= $since)
          AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
        ORDER BY started_at DESC, drill_id
        """,
        ("drills",),
        {"since": None, "until": None, "route": None},
    ),
    # Each [[slo]]'s week and burn rates as of the last cycle (engine.store.error_budget).
    "slo_status": Query("SELECT * FROM slo_status ORDER BY slo", ("slo_status",), {}),
    **PROFILE_QUERIES,  # what the what-if reads (engine.published.profile_queries)
}
