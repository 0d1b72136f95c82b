"""Secrets and callers' content never come to rest: a provider error that quotes the key or
the prompt, and a model's answer that breaks the route's contract, go through the real
gateway, recorder and scheduler, and then the whole data folder (spool, database, published
snapshots) and every log line are searched for them."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from engine.core.paths import DataPaths
from simulations.fakes import FakeProviders

from .conftest import GATEWAY_KEY, PROVIDER_KEYS, GatewayFactory, user

AUTH = {"authorization": f"Bearer {GATEWAY_KEY}"}
ANTHROPIC_KEY = PROVIDER_KEYS["FAKE_ANTHROPIC_KEY"]
PROMPT = "Please refund order CANARY-PROMPT-7731 to the card ending 4242 today"
ANSWER = "CANARY-ANSWER-d00d"
SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}}


def everything_at_rest(data: Path) -> str:
    """Every file under the data folder as text: Parquet files read back through Arrow
    (their bytes may be compressed), the DuckDB store through a query of each table, the rest
    as bytes."""
    seen = []
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            seen.append(str(pq.read_table(path).to_pylist()))
        elif path.suffix == ".duckdb":
            with duckdb.connect(str(path), read_only=True) as con:
                for (table,) in con.execute("SHOW TABLES").fetchall():
                    seen.append(str(con.execute(f'SELECT * FROM "{table}"').fetchall()))
        elif not path.name.endswith(".wal"):
            seen.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(seen)


def test_a_key_or_prompt_quoted_by_a_provider_is_stored_and_logged_nowhere(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    paths = DataPaths(tmp_path / "data")
    gw = gateway(
        {
            "support": ["claude/primary", "gpt/backup"],
            "refund": ["claude/refunder"],
            "classify": {"targets": ["gpt/classifier"], "output_schema": SCHEMA},
        },
        keys=[GATEWAY_KEY],
        record_to=paths,
    )
    fake.script("primary", [{"fault": "auth", "message": f"invalid x-api-key {ANTHROPIC_KEY}"}])
    quoting = f"Invalid value for 'content': '{PROMPT}'"
    fake.script("refunder", [{"fault": "invalid_request", "message": quoting}])
    fake.script("classifier", [{"fault": "ok", "text": f'{{"count": "{ANSWER}"}}'}])

    fell_back = httpx.post(gw.openai_url + "/chat/completions", headers=AUTH,
                           json={"model": "support", "messages": user(PROMPT)})  # fmt: skip
    assert fell_back.status_code == 200 and fell_back.headers["x-switchover-model"] == "backup"
    refused = httpx.post(gw.openai_url + "/chat/completions", headers=AUTH,
                         json={"model": "refund", "messages": user(PROMPT)})  # fmt: skip
    assert refused.status_code == 400
    flagged = httpx.post(gw.openai_url + "/chat/completions", headers=AUTH,
                         json={"model": "classify", "messages": user("how many?")})  # fmt: skip
    assert flagged.headers["x-switchover-quality-error"] == (
        "schema: $.count: must be of type 'integer'"
    )
    gw.stop_and_ingest(paths)

    stored = everything_at_rest(paths.root)
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    # The backup's answer echoes the prompt (the fake's way): only errors are searched.
    answers = refused.text + str(dict(flagged.headers)) + str(dict(fell_back.headers))
    assert "invalid x-api-key ***" in stored, "the scrubbed error is kept, to be acted on"
    assert "[…]" in stored, "the quote is cut, the rest of the message kept"
    for secret in (ANTHROPIC_KEY, "CANARY-PROMPT-7731", ANSWER):
        assert secret not in stored, f"{secret} reached the data folder"
        assert secret not in logged, f"{secret} reached a log line"
        assert secret not in answers, f"{secret} was sent back"


@pytest.mark.parametrize("presented", [None, "wrong-key"])
def test_metrics_refuse_a_caller_without_a_key_when_keys_are_set(
    gateway: GatewayFactory, presented: str | None
):
    gw = gateway({"support": ["claude/primary"]}, keys=[GATEWAY_KEY], admin_keys=["admin-1"])
    headers = {} if presented is None else {"authorization": f"Bearer {presented}"}
    refused = httpx.get(gw.url + "/metrics", headers=headers)
    assert refused.status_code == 401
    assert "switchover_" not in refused.text
    for key in (GATEWAY_KEY, "admin-1"):
        scraped = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {key}"})
        assert scraped.status_code == 200 and "switchover_gateway_requests" in scraped.text


def test_metrics_answer_anyone_on_a_gateway_without_keys(gateway: GatewayFactory):
    gw = gateway({"support": ["claude/primary"]})
    assert httpx.get(gw.url + "/metrics").status_code == 200


SHORT_PROMPT = "cancel CANARY-25 by noon"  # 24 characters: the shortest quote that is cut
ALIGNMENTS = range(0, 13)  # the quote's place in the message, over a whole 12-character step


@pytest.mark.parametrize("prompt", [SHORT_PROMPT, SHORT_PROMPT + "!"], ids=["24", "25"])
def test_a_short_prompt_quoted_at_any_alignment_is_stored_and_logged_nowhere(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path, caplog, prompt: str
):
    """Issue 35: `cut_quotes` stepped 12 characters over 24-character windows, so a quote of
    24-35 characters survived at most alignments."""
    caplog.set_level(logging.DEBUG)
    paths = DataPaths(tmp_path / "data")
    gw = gateway({"refund": ["claude/refunder"]}, keys=[GATEWAY_KEY], record_to=paths)
    fake.script("refunder", [
        {"fault": "invalid_request", "message": f"Invalid{'.' * pad} value: '{prompt}'"}
        for pad in ALIGNMENTS
    ])  # fmt: skip
    for _ in ALIGNMENTS:
        refused = httpx.post(gw.openai_url + "/chat/completions", headers=AUTH,
                             json={"model": "refund", "messages": user(prompt)})  # fmt: skip
        assert refused.status_code == 400 and "CANARY-25" not in refused.text
    gw.stop_and_ingest(paths)
    stored = everything_at_rest(paths.root)
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    assert stored.count("[…]") >= len(ALIGNMENTS), "every message kept, its quote cut"
    assert "CANARY-25" not in stored and "CANARY-25" not in logged
