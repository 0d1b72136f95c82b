"""The tables of fallback readiness: eval runs and their per-case results (`switchover eval`),
and fault drills (`switchover drill`). Created by migration 6, published whole as snapshots of
the same names (engine.published.catalogue), read by the Readiness page, the weekly report and
the `eval_pass_rate` alert. Frozen by that migration: a change needs a migration of its own
(DRILL_ABORT_COLUMNS, below, is the next one's)."""

READINESS_TABLES: dict[str, str] = {
    # One run of a case file through every target of one route, each target in isolation.
    "eval_runs": """
    run_id VARCHAR PRIMARY KEY,
    route VARCHAR NOT NULL,
    cases_file VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL,
    cases INTEGER NOT NULL,
    min_pass_rate DOUBLE NOT NULL
""",
    # One case on one target: passed, or why not (a validator, or the call's error).
    "eval_results": """
    run_id VARCHAR NOT NULL,
    route VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    case_name VARCHAR NOT NULL,
    passed BOOLEAN NOT NULL,
    reason VARCHAR,
    latency_ms DOUBLE,
    cost_usd DECIMAL(18,9),
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    error VARCHAR,
    PRIMARY KEY (run_id, target, case_name)
""",
    # A target forced to fail (as if its key were invalid) on one route for a while. `report`
    # is JSON, written by the scheduler once the drill ended and its attempts are in.
    "drills": """
    drill_id VARCHAR PRIMARY KEY,
    route VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ends_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    requested_by VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    report VARCHAR
""",
}

# Added to `drills` by migration 9: the drill's pre-flight (engine.state.drills), and why it ended
# before its planned end when it aborted itself. Nullable: drills from before have neither.
DRILL_ABORT_COLUMNS: dict[str, str] = {
    "forced": "BOOLEAN",  # started although its pre-flight found no other target healthy
    "preflight": "VARCHAR",  # what the pre-flight found wrong with the route's other targets
    "ended_reason": "VARCHAR",  # "aborted: request … failed with every provider unavailable"
    "aborted_by_request": "VARCHAR",  # the request whose failure ended the drill
}
