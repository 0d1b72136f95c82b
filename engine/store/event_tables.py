"""The tables of breaker events, alerts and incidents: their columns, created by migration 3
and published as snapshots of the same names (their shapes: engine.published.catalogue). Frozen
by that migration: a change needs a migration of its own (migration 10 adds
INCIDENT_TARGET_COLUMNS)."""

EVENT_AND_ALERT_TABLES: dict[str, str] = {
    "breaker_events": """
    event_id VARCHAR PRIMARY KEY,
    occurred_at TIMESTAMPTZ NOT NULL,
    target VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    process_id INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    from_status VARCHAR NOT NULL,
    to_status VARCHAR NOT NULL,
    reason VARCHAR,
    open_until TIMESTAMPTZ
""",
    "alerts": """
    alert_id VARCHAR PRIMARY KEY,
    rule VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    subject VARCHAR NOT NULL,
    state VARCHAR NOT NULL,
    fired_at TIMESTAMPTZ NOT NULL,
    resolved_at TIMESTAMPTZ,
    evaluated_at TIMESTAMPTZ NOT NULL,
    value DOUBLE,
    threshold DOUBLE,
    summary VARCHAR NOT NULL,
    cost_usd DECIMAL(18,9),
    notified BOOLEAN NOT NULL,
    silenced BOOLEAN NOT NULL
""",
    "alert_notifications": """
    notification_id VARCHAR PRIMARY KEY,
    alert_id VARCHAR NOT NULL,
    event VARCHAR NOT NULL,
    receiver VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    attempts INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    next_attempt_at TIMESTAMPTZ,
    delivered_at TIMESTAMPTZ,
    last_http_status SMALLINT,
    last_error VARCHAR
""",
    "alert_silences": """
    silence_id VARCHAR PRIMARY KEY,
    rule VARCHAR NOT NULL,
    subject VARCHAR,
    starts_at TIMESTAMPTZ NOT NULL,
    ends_at TIMESTAMPTZ NOT NULL,
    reason VARCHAR,
    created_at TIMESTAMPTZ NOT NULL
""",
    "incidents": """
    incident_id VARCHAR PRIMARY KEY,
    scope VARCHAR NOT NULL,
    subject VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    peak_fault_rate DOUBLE NOT NULL,
    fault_attempts BIGINT NOT NULL,
    top_error VARCHAR,
    routes VARCHAR NOT NULL,
    requests BIGINT NOT NULL,
    requests_affected BIGINT NOT NULL,
    answered_by_fallback BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    fallback_premium_usd DECIMAL(18,9) NOT NULL,
    cache_loss_usd DECIMAL(18,9) NOT NULL,
    price_difference_usd DECIMAL(18,9) NOT NULL,
    rewarm_usd DECIMAL(18,9) NOT NULL,
    wasted_usd DECIMAL(18,9) NOT NULL,
    extra_cost_usd DECIMAL(18,9) NOT NULL
""",
}

# Incidents per target and fault family (engine.alerts.incidents), added by migration 10:
# `scope` is "target" and `subject` the target for them. Nullable: rows from before have none.
INCIDENT_TARGET_COLUMNS: dict[str, str] = {
    "target": "VARCHAR",  # provider/model
    "family": "VARCHAR",  # availability, rate_limit or account (engine.core.fault_families)
    "provider": "VARCHAR",
    "during_drills": "VARCHAR",  # the drills that ran on its routes meanwhile ("" for none)
}
