"""The tables of the traffic profile (engine.store.traffic_profile), created by migration 12:
the hours of prompt and answer sizes per route, the minutes of their sums, and the hours of
latency per target. Frozen by that
migration: a change needs a migration of its own."""

TABLES = """
CREATE TABLE traffic_sizes (hour TIMESTAMPTZ NOT NULL, route VARCHAR NOT NULL,
    answers BIGINT NOT NULL, prompt_tokens DOUBLE[] NOT NULL, output_tokens DOUBLE[] NOT NULL,
    warm_prompt_tokens BIGINT NOT NULL, warm_cache_read_tokens BIGINT NOT NULL,
    PRIMARY KEY (hour, route));
CREATE TABLE traffic_answers (bucket TIMESTAMPTZ NOT NULL, route VARCHAR NOT NULL,
    answers BIGINT NOT NULL, prompt_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
    PRIMARY KEY (bucket, route));
CREATE TABLE target_latency (hour TIMESTAMPTZ NOT NULL, target VARCHAR NOT NULL,
    answers BIGINT NOT NULL, latency_ms DOUBLE[] NOT NULL, streams BIGINT NOT NULL,
    ttft_ms DOUBLE[], PRIMARY KEY (hour, target));
"""
