"""The attempt's columns are declared once, by the record: every field of `Attempt` is a column in
its order, a row holds what the attempt held, and the request path's telemetry loads no DuckDB."""

from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal

from engine.core.attempt import Attempt
from engine.telemetry.columns import ARROW_SCHEMA, COLUMN_NAMES, HOST, to_row, to_table

ROW_ONLY = ("host", "cost_usd", "price_source")


def attempt(**fields: object) -> Attempt:
    base: dict[str, object] = dict(
        request_id="req-1", attempt_number=2, route="support", target="claude/sonnet",
        provider="claude", provider_kind="anthropic", model="sonnet", key_kind="managed",
        process_id=4242, started_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC), latency_ms=120.5,
        ttft_ms=40.0, streamed=True, outcome="error", decision="fall_back",
        error_class="overloaded", fault_kind="provider", http_status=529,
        error_type="overloaded_error", error_code=None, error_message="Overloaded",
        retry_after_s=1.5, breaker_state="closed", served=False, fallback_depth=1,
        input_tokens=100, output_tokens=20, cache_read_tokens=5, cache_write_tokens=7,
        tokens_estimated=True, feature="chat", key_label="team-a", pii_masked=3,
        provider_request_id="p-1",
        prompt_version="v2", quality_error=None, unreadable_events=1, continues_attempt=1,
        continued_chars=12, skips='[{"target":"gpt/a","reason":"breaker_open","depth":0}]',
    )  # fmt: skip
    base.update(fields)
    return Attempt(**base)  # type: ignore[arg-type]


def test_every_field_of_the_attempt_is_a_column_in_its_order():
    fields = [f.name for f in dataclasses.fields(Attempt)]
    assert [name for name in COLUMN_NAMES if name not in ROW_ONLY] == fields
    assert set(COLUMN_NAMES) == {*fields, *ROW_ONLY}


def test_a_row_holds_every_field_of_the_attempt_with_its_host_and_price():
    one = attempt()
    [row] = to_table([to_row(one, Decimal("0.0000000012345"), "genai-prices")]).to_pylist()
    assert {f.name: row[f.name] for f in dataclasses.fields(Attempt)} == dataclasses.asdict(one)
    assert (row["host"], row["price_source"]) == (HOST, "genai-prices")
    assert row["cost_usd"] == Decimal("0.000000001")  # rounded half-even to nano-dollars


def test_a_string_vocabulary_is_stored_as_its_plain_strings():
    class Decision(enum.StrEnum):
        FALL_BACK = "fall_back"

    [row] = to_table([to_row(attempt(decision=Decision.FALL_BACK), None, None)]).to_pylist()
    assert type(row["decision"]) is str and row["decision"] == "fall_back"
    assert ARROW_SCHEMA.field("decision").type == ARROW_SCHEMA.field("route").type


def test_the_request_paths_telemetry_loads_no_duckdb():
    probe = (
        "import sys\n"
        "import engine.telemetry.recorder, engine.telemetry.postgres_sink\n"
        "print('duckdb' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
