"""One well-formed attempt, numbered, with any field changed: what the recorder's and the
telemetry's tests spool."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engine.core.attempt import Attempt

STARTED = datetime(2026, 1, 5, 9, 0, 0, 123456, tzinfo=UTC)


def make_attempt(n: int = 0, **changes: Any) -> Attempt:
    fields: dict[str, Any] = dict(
        request_id=f"req-{n:06d}",
        attempt_number=1,
        route="default",
        target="anthropic/claude-sonnet-4-5",
        provider="anthropic",
        provider_kind="anthropic",
        model="claude-sonnet-4-5",
        key_kind="managed",
        process_id=4242,
        started_at=STARTED + timedelta(seconds=n),
        latency_ms=812.5,
        ttft_ms=None,
        streamed=False,
        outcome="success",
        decision="served",
        error_class=None,
        fault_kind=None,
        http_status=200,
        error_type=None,
        error_code=None,
        error_message=None,
        retry_after_s=None,
        breaker_state="closed",
        served=True,
        fallback_depth=0,
        input_tokens=1200,
        output_tokens=300,
        cache_read_tokens=5000,
        feature="search",
    )
    fields.update(changes)
    return Attempt(**fields)
