"""Every OpenTelemetry name Switchover emits, in one table: the GenAI semantic conventions v1.41
(status Development) and Switchover's own `switchover.*` attributes.

The conventions are a draft and newer ones rename things (`gen_ai.system` became
`gen_ai.provider.name`; the cache counts moved under `gen_ai.usage.cache_*`): when they change,
this module is the only one to edit. Imports nothing, so it loads without the SDK.

Conventions this module settles:
- `gen_ai.usage.input_tokens` counts ALL input tokens, cache reads and writes included (the
  convention's rule); an Attempt's `input_tokens` excludes them, so the exporter adds them back.
- Values are never the prompt, the answer or a key: names, counts, times, classes.
"""

from __future__ import annotations

from typing import Final

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.41.0"
SCOPE: Final = "switchover"  # the instrumentation scope of every span and metric

# --- spans and their attributes --------------------------------------------------------------
OPERATION: Final = "chat"  # gen_ai.operation.name of every span: the chain answers chats
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"  # anthropic | openai (the provider's kind)
REQUEST_MODEL: Final = "gen_ai.request.model"  # the route on the request span, the model below
RESPONSE_MODEL: Final = "gen_ai.response.model"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
RESPONSE_ID: Final = "gen_ai.response.id"  # the provider's request id
TIME_TO_FIRST_CHUNK_ATTR: Final = "gen_ai.response.time_to_first_chunk"  # s, streamed attempts
REQUEST_STREAM: Final = "gen_ai.request.stream"
ERROR_TYPE: Final = "error.type"  # the error class (engine.core.classify), on failures only
HTTP_STATUS: Final = "http.response.status_code"

ROUTE: Final = "switchover.route"
TARGET: Final = "switchover.target"  # provider/model as configured
DECISION: Final = "switchover.decision"  # engine.core.attempt.Step
FALLBACK_DEPTH: Final = "switchover.fallback_depth"
BREAKER_STATE: Final = "switchover.breaker_state"  # before the call
COST_USD: Final = "switchover.cost_usd"  # priced off the request path; absent when unknown
ATTEMPT_NUMBER: Final = "switchover.attempt_number"
ATTEMPTS: Final = "switchover.attempts"  # on the request span: the HTTP calls made
REQUEST_ID: Final = "switchover.request_id"
SERVED: Final = "switchover.served"
SERVED_BY: Final = "switchover.served_by"  # on the request span: the target that answered

# --- metrics ----------------------------------------------------------------------------------
TOKEN_USAGE: Final = "gen_ai.client.token.usage"
TOKEN_UNIT: Final = "{token}"
TOKEN_TYPE: Final = "gen_ai.token.type"
TOKEN_INPUT, TOKEN_OUTPUT = "input", "output"
OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
SECONDS: Final = "s"

# The conventions' explicit bucket boundaries.
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
FIRST_CHUNK_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

# Which attributes a metric point carries (bounded by the configuration: routes, models).
METRIC_ATTRIBUTES: Final = (OPERATION_NAME, PROVIDER_NAME, REQUEST_MODEL, RESPONSE_MODEL, ROUTE)


def request_span_name(route: str) -> str:
    """`{gen_ai.operation.name} {gen_ai.request.model}`: the caller's model is the route."""
    return f"{OPERATION} {route}"


def attempt_span_name(model: str) -> str:
    return f"{OPERATION} {model}"
