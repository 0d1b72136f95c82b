"""The rollups' SQL: what the attempts mean per minute, as `docs/metrics.md` defines it, and
the hours and days as sums of the minutes. Run by engine.store.rollups, which refreshes a range
of buckets in one transaction; every value is a bound parameter (`$lo`, `$hi`, `$settled`,
`$missing`), and prices come in as the temporary `prices` table, never as literals.
"""

from __future__ import annotations

# The windows the query uses (as SQL literals, documented in docs/metrics.md):
# - a request's attempts can outlive the bucket it started in (retries, fallbacks, a long
#   stream): attempts 5 minutes either side of a refreshed range are read with it;
# - a primary's healthy cache-hit ratio is measured over its successes in the trailing day;
# - a primary success re-warms its prompt cache when, in the 5 minutes before it, its route
#   was served more by backups than by the primary.


# A route re-warms its primary's cache in a minute when backups served it more than the
# primary in the 5 minutes before (over a table of route, minute, by_primary, by_backup).
REWARMING = """coalesce(sum(by_backup) OVER recent, 0) > coalesce(sum(by_primary) OVER recent, 0)"""
REWARMING_WINDOW = """recent AS (PARTITION BY route ORDER BY minute
        RANGE BETWEEN INTERVAL 5 MINUTE PRECEDING AND INTERVAL 1 MINUTE PRECEDING)"""
# What re-warming costs on a primary's answer (of `priced` rows: with the primary's prices).
REWARM_COST = "a.cache_write_tokens * (a.p_cache_write - a.p_cache_read)"

# Minute buckets [$lo, $hi), from the attempts; the ground truth for every additive figure.
MINUTES = f"""
WITH win AS (
    SELECT *, time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket,
        coalesce(feature, '') AS feat
    FROM attempts
    WHERE started_at >= $lo::TIMESTAMPTZ - INTERVAL 5 MINUTE
      AND started_at < $hi::TIMESTAMPTZ + INTERVAL 5 MINUTE
),
req AS (  -- one row a request, at the attempt that decided it
    SELECT request_id,
        time_bucket(INTERVAL 1 MINUTE, min(started_at)) AS bucket,
        arg_max(route, served::INT * 100000 + attempt_number) AS route,
        arg_max(provider, served::INT * 100000 + attempt_number) AS provider,
        arg_max(model, served::INT * 100000 + attempt_number) AS model,
        arg_max(target, served::INT * 100000 + attempt_number) AS target,
        arg_max(feat, served::INT * 100000 + attempt_number) AS feat,
        bool_or(served AND outcome = 'success') AS answered,
        bool_or(served AND outcome = 'success' AND fallback_depth > 0) AS by_fallback,
        bool_or(decision = 'fail_fast') AS request_fault,
        bool_or(served AND outcome = 'error') AS broken,
        -- the caller left: during an attempt, or during the backoff after a failed one
        bool_or(outcome = 'cancelled' OR decision = 'cancelled') AS abandoned,
        min(started_at) AS first_at,
        -- whether the request is over: an attempt that ended it, or a last one long enough ago
        bool_or(decision IN ('served', 'fail_fast', 'give_up', 'cancelled', 'in_band_error'))
            OR max(started_at + to_microseconds((latency_ms * 1000)::BIGINT)) < $settled
            AS over
    FROM win
    GROUP BY request_id
),
req_rollup AS (
    SELECT bucket, route, provider, model, target, feat,
        count(*) AS requests,
        count(*) FILTER (answered) AS answered,
        count(*) FILTER (by_fallback) AS answered_by_fallback,
        -- sent to a backup while a fault drill held its route's target down (engine.state.drills)
        count(*) FILTER (by_fallback AND EXISTS (
            SELECT 1 FROM drills d WHERE d.route = req.route AND req.first_at >= d.started_at
                AND req.first_at < coalesce(d.ended_at, d.ends_at))) AS drill_fallbacks,
        -- failed (unavailable or broken) while a drill held the route's target down, as its
        -- report counts them: what an error budget sets aside (engine.store.error_budget)
        count(*) FILTER (NOT answered AND (broken OR NOT (request_fault OR abandoned))
            AND EXISTS (SELECT 1 FROM drills d WHERE d.route = req.route
                AND (req.request_id = d.aborted_by_request OR (req.first_at >= d.started_at
                    AND req.first_at < coalesce(d.ended_at, d.ends_at))))) AS drill_failures,
        count(*) FILTER (request_fault) AS request_faults,
        count(*) FILTER (broken AND NOT answered) AS broken_streams,
        count(*) FILTER (abandoned AND NOT answered AND NOT broken) AS abandoned,
        count(*) FILTER (NOT (answered OR request_fault OR broken OR abandoned)) AS unavailable
    FROM req
    -- A request still on its way (a retry or a fallback not yet recorded) waits for the next
    -- refresh: counted now it would look unavailable, and fire a false alert.
    WHERE bucket >= $lo AND bucket < $hi AND over
    GROUP BY ALL
),
route_share AS (  -- per route and minute: did backups serve more than the primary lately?
    SELECT route, minute, {REWARMING} AS rewarming
    FROM (
        SELECT route, time_bucket(INTERVAL 1 MINUTE, started_at) AS minute,
            count(*) FILTER (fallback_depth = 0) AS by_primary,
            count(*) FILTER (fallback_depth > 0) AS by_backup
        FROM win WHERE served AND outcome = 'success'
        GROUP BY ALL
    )
    WINDOW {REWARMING_WINDOW}
),
continued AS (  -- requests a later target finished after their stream failed mid-answer
    SELECT DISTINCT request_id FROM win
    WHERE continues_attempt IS NOT NULL AND served AND outcome = 'success'
),
priced AS (  -- attempt rows with what the primary would have charged for the same work
    SELECT w.*,
        w.input_tokens + w.cache_read_tokens + w.cache_write_tokens AS total_in,
        -- a part of an answer that a continuation finished: its text was served, not wasted
        w.decision = 'continue_elsewhere'
            AND w.request_id IN (SELECT request_id FROM continued) AS carried_on,
        coalesce(bl.hit_ratio, 0) AS hit_ratio,
        px.p_input, px.p_output, px.p_cache_read, px.p_cache_write,
        coalesce(rs.rewarming, false) AS rewarming
    FROM win w
    LEFT JOIN route_primaries pr ON pr.route = w.route
    LEFT JOIN baselines bl
        ON bl.route = w.route AND bl.hour = time_bucket(INTERVAL 1 HOUR, w.started_at)
    LEFT JOIN prices px ON px.provider IS NOT DISTINCT FROM pr.provider
        AND px.provider_kind = pr.provider_kind AND px.model = pr.model
    LEFT JOIN route_share rs
        ON rs.route = w.route AND rs.minute = time_bucket(INTERVAL 1 MINUTE, w.started_at)
),
att_lists AS (
    SELECT a.bucket, a.route, a.provider, a.model, a.target, a.feat,
        count(*) AS attempts,
        count(*) FILTER (a.outcome = 'error') AS failed_attempts,
        count(*) FILTER (a.fault_kind = 'request') AS request_fault_attempts,
        count(*) FILTER (a.fault_kind = 'provider') AS provider_faults,
        count(*) FILTER (a.fault_kind = 'account') AS account_faults,
        count(*) FILTER (a.fault_kind = 'rate_limit') AS rate_limited,
        count(*) FILTER (a.fault_kind = 'ambiguous') AS ambiguous_faults,
        count(*) FILTER (a.quality_error IS NOT NULL) AS quality_errors,
        -- each list one aggregate: one copy of the values (three quantiles apart: three)
        quantile_cont(a.latency_ms, [0.5, 0.95, 0.99]) AS latency_q,
        quantile_cont(a.ttft_ms, [0.5, 0.95]) FILTER (a.outcome = 'success') AS ttft_q,
        sum(a.input_tokens) AS input_tokens,
        sum(a.output_tokens) AS output_tokens,
        sum(a.cache_read_tokens) AS cache_read_tokens,
        sum(a.cache_write_tokens) AS cache_write_tokens,
        coalesce(sum(a.cost_usd), 0) AS cost_usd,
        count(*) FILTER (a.cost_usd IS NULL
            AND a.input_tokens + a.output_tokens + a.cache_read_tokens
                + a.cache_write_tokens > 0) AS unpriced_attempts,
        coalesce(sum(a.cost_usd) FILTER (a.outcome <> 'success' AND NOT a.carried_on), 0)
            AS wasted_usd,
        sum(a.cost_usd - (a.total_in * (1 - a.hit_ratio) * a.p_input
                + a.total_in * a.hit_ratio * a.p_cache_read + a.output_tokens * a.p_output))
            FILTER (a.served AND a.outcome = 'success' AND a.fallback_depth > 0)
            AS fallback_premium_usd,
        sum(a.total_in * a.hit_ratio * (a.p_input - a.p_cache_read))
            FILTER (a.served AND a.outcome = 'success' AND a.fallback_depth > 0)
            AS cache_loss_usd,
        coalesce(sum({REWARM_COST}) FILTER (
            a.outcome = 'success' AND a.fallback_depth = 0 AND a.rewarming), 0) AS rewarm_usd
    FROM priced a
    WHERE a.bucket >= $lo AND a.bucket < $hi AND a.outcome <> 'skipped'  -- no call was made
    GROUP BY ALL
),
att_rollup AS (
    SELECT * EXCLUDE (latency_q, ttft_q),
        latency_q[1] AS latency_p50_ms, latency_q[2] AS latency_p95_ms,
        latency_q[3] AS latency_p99_ms, ttft_q[1] AS ttft_p50_ms, ttft_q[2] AS ttft_p95_ms
    FROM att_lists
)
SELECT bucket, route, provider, model, target, feat AS feature,
    sum(requests)::BIGINT AS requests, sum(answered)::BIGINT AS answered,
    sum(answered_by_fallback)::BIGINT AS answered_by_fallback,
    sum(drill_fallbacks)::BIGINT AS drill_fallbacks,
    sum(drill_failures)::BIGINT AS drill_failures,
    sum(request_faults)::BIGINT AS request_faults, sum(unavailable)::BIGINT AS unavailable,
    sum(broken_streams)::BIGINT AS broken_streams, sum(abandoned)::BIGINT AS abandoned,
    sum(attempts)::BIGINT AS attempts, sum(failed_attempts)::BIGINT AS failed_attempts,
    sum(request_fault_attempts)::BIGINT AS request_fault_attempts,
    sum(provider_faults)::BIGINT AS provider_faults,
    sum(account_faults)::BIGINT AS account_faults, sum(rate_limited)::BIGINT AS rate_limited,
    sum(ambiguous_faults)::BIGINT AS ambiguous_faults,
    sum(quality_errors)::BIGINT AS quality_errors,
    max(latency_p50_ms) AS latency_p50_ms, max(latency_p95_ms) AS latency_p95_ms,
    max(latency_p99_ms) AS latency_p99_ms, max(ttft_p50_ms) AS ttft_p50_ms,
    max(ttft_p95_ms) AS ttft_p95_ms,
    sum(input_tokens)::BIGINT AS input_tokens, sum(output_tokens)::BIGINT AS output_tokens,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
    sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum(cost_usd)::DECIMAL(18,9) AS cost_usd, sum(unpriced_attempts)::BIGINT AS unpriced_attempts,
    sum(wasted_usd)::DECIMAL(18,9) AS wasted_usd,
    sum(fallback_premium_usd)::DECIMAL(18,9) AS fallback_premium_usd,
    sum(cache_loss_usd)::DECIMAL(18,9) AS cache_loss_usd,
    sum(rewarm_usd)::DECIMAL(18,9) AS rewarm_usd
FROM (SELECT * FROM att_rollup UNION ALL BY NAME SELECT * FROM req_rollup)
GROUP BY ALL
"""


# Each route's primary (its first target) as last seen, kept across refreshes: while the
# primary's breaker is open no attempt names it, yet the premium is measured against it.
UPDATE_PRIMARIES = """
INSERT INTO route_primaries
(route, target, provider_kind, model, last_seen, provider)
SELECT route, arg_max(target, started_at), arg_max(provider_kind, started_at),
    arg_max(model, started_at), max(started_at), arg_max(provider, started_at)
FROM attempts
WHERE fallback_depth = 0 AND started_at >= $lo AND started_at < $hi
GROUP BY route
ON CONFLICT (route) DO UPDATE SET target = excluded.target,
    provider_kind = excluded.provider_kind, model = excluded.model,
    last_seen = excluded.last_seen, provider = excluded.provider
    WHERE excluded.last_seen > route_primaries.last_seen
"""

# The route hours in [$lo, $hi) that have no cache-hit baseline yet: nearly always none, so the
# day of attempts each one reads is read only when an hour begins.
MISSING_BASELINES = """
SELECT DISTINCT h.route, h.hour FROM (
    SELECT DISTINCT route, time_bucket(INTERVAL 1 HOUR, started_at) AS hour FROM attempts
    WHERE started_at >= $lo AND started_at < $hi
) h
JOIN route_primaries p ON p.route = h.route
WHERE NOT EXISTS (SELECT 1 FROM baselines x WHERE x.route = h.route AND x.hour = h.hour)
"""
# The primary's healthy cache-hit ratio for each route and hour of $missing (a list of
# {route, hour}): its successes in the 24 hours before that hour. Computed once per route and
# hour.
ADD_BASELINES = """
INSERT INTO baselines (route, hour, hit_ratio)
SELECT h.route, h.hour,
    coalesce(sum(b.cache_read_tokens) / nullif(sum(b.input_tokens + b.cache_read_tokens
        + b.cache_write_tokens), 0), 0)
FROM (SELECT m.route, m.hour FROM (SELECT unnest($missing) AS m)) h
JOIN route_primaries p ON p.route = h.route
LEFT JOIN attempts b ON b.target = p.target AND b.outcome = 'success'
    AND b.fallback_depth = 0 AND b.started_at >= h.hour - INTERVAL 1 DAY
    AND b.started_at < h.hour
GROUP BY ALL
"""

ADDITIVE = (
    *("requests", "answered", "answered_by_fallback", "request_faults", "unavailable"),
    *("broken_streams", "abandoned", "attempts", "failed_attempts", "request_fault_attempts"),
    *("provider_faults", "account_faults", "rate_limited", "ambiguous_faults", "quality_errors"),
    *("drill_fallbacks", "drill_failures"),
    *("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
    *("cost_usd", "unpriced_attempts", "wasted_usd", "fallback_premium_usd", "cache_loss_usd"),
    "rewarm_usd",
)
_KEYS = "route, provider, model, target, feature"

# Hour and day buckets: additive figures are sums of the minutes (so the three grains always
# agree to the cent); percentiles cannot be summed and come from the attempts themselves.
COARSE = f"""
WITH sums AS (
    SELECT time_bucket(INTERVAL 1 {{unit}}, bucket) AS bucket, {_KEYS},
        {", ".join(f"sum({c}) AS {c}" for c in ADDITIVE)}
    FROM rollup_minute WHERE bucket >= $lo AND bucket < $hi
    GROUP BY ALL
),
lists AS (  -- one aggregate a list of quantiles: one copy of a day's values, not five
    SELECT time_bucket(INTERVAL 1 {{unit}}, started_at) AS bucket, route, provider, model, target,
        coalesce(feature, '') AS feature,
        quantile_cont(latency_ms, [0.5, 0.95, 0.99]) AS latency_q,
        quantile_cont(ttft_ms, [0.5, 0.95]) FILTER (outcome = 'success') AS ttft_q
    FROM attempts WHERE started_at >= $lo AND started_at < $hi AND outcome <> 'skipped'
    GROUP BY ALL
),
spread AS (
    SELECT * EXCLUDE (latency_q, ttft_q),
        latency_q[1] AS latency_p50_ms, latency_q[2] AS latency_p95_ms,
        latency_q[3] AS latency_p99_ms, ttft_q[1] AS ttft_p50_ms, ttft_q[2] AS ttft_p95_ms
    FROM lists
)
SELECT * FROM sums LEFT JOIN spread USING (bucket, {_KEYS})
"""
