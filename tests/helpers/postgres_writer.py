"""A gateway host for the PostgreSQL tests: records synthetic attempts through a real Recorder
whose sink is PostgreSQL, with a spool folder of its own (for breaker events), as a gateway on
another machine would.

    python tests/helpers/postgres_writer.py URL SPOOL COUNT RATE_PER_S TAG

`attempt(tag, n)` is the same synthetic attempt as tests/helpers/spool_writer.py's, its request id
`{tag}-{n}`.

Prints "done N" at the end; exits normally (atexit flushes what is left).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from engine.core.attempt import Attempt
from engine.telemetry.postgres_sink import PostgresSink
from engine.telemetry.recorder import Recorder


def attempt(tag: str, n: int) -> Attempt:
    return Attempt(
        request_id=f"{tag}-{n}", attempt_number=1, route="support", target="gpt/gpt-4.1-mini",
        provider="gpt", provider_kind="openai", model="gpt-4.1-mini", key_kind="managed",
        process_id=os.getpid(), started_at=datetime.now(UTC), latency_ms=120.0, ttft_ms=None,
        streamed=False, outcome="success", decision="served", error_class=None,
        fault_kind=None, http_status=None, error_type=None, error_code=None,
        error_message=None, retry_after_s=None, breaker_state="closed", served=True,
        fallback_depth=0, input_tokens=900, output_tokens=120, feature="postgres-test",
    )  # fmt: skip


def main(url: str, spool: str, count: str, rate: str, tag: str) -> None:
    recorder = Recorder(Path(spool), sink=PostgresSink(url), flush_interval_s=0.2)
    total, per_s = int(count), float(rate)
    start = time.monotonic()
    for n in range(total):
        recorder(attempt(tag, n))
        due = start + (n + 1) / per_s
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
    print(f"done {total}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
