"""Mid-stream continuation over real HTTP (issue 20, item 5): the official SDKs against the
gateway, the gateway against the fake providers. A route with `on_stream_failure = "continue"`
finishes a stream cut or stalled after its first content on a later target that continues a
final assistant message; the caller reads one well-formed stream with the whole answer once."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import anthropic
import duckdb
import openai
import pytest

from engine.core.paths import DataPaths
from simulations.fakes import FakeProviders

from .conftest import GATEWAY_KEY, PROVIDER_KEYS, Gateway, GatewayFactory, paid_calls, user

QUESTION = "Where is my order, and when will it reach the depot near me?"
ECHO = "echo: " + QUESTION
CUT = "stream_cut:after_events=6"  # a few text deltas reach the caller in either dialect
REFUSES = "claude/refuses#prefill_rejected"


def continuing(*targets: str, **options: Any) -> dict[str, Any]:
    return {"targets": list(targets), "on_stream_failure": "continue", **options}


def openai_read(gw: Gateway, route: str) -> tuple[str, list[Any], str]:
    """(text, chunks, x-request-id) of one stream read with the OpenAI SDK, usage asked for."""
    client = openai.OpenAI(base_url=gw.openai_url, api_key=GATEWAY_KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=route,
        messages=user(QUESTION),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks, raw.headers["x-request-id"]


def anthropic_read(gw: Gateway, route: str) -> tuple[str, list[Any], str]:
    """(text, raw events, request-id) of one stream read with the Anthropic SDK."""
    client = anthropic.Anthropic(base_url=gw.url, api_key=GATEWAY_KEY, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model=route, max_tokens=512, messages=user(QUESTION), stream=True
    )
    events = list(raw.parse())
    text = "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    return text, events, raw.headers["request-id"]


READ = {"openai": openai_read, "anthropic": anthropic_read}


def assert_well_formed(sdk: str, stream: list[Any], gw: Gateway) -> None:
    """One message: one start, one text block (OpenAI: one id, one role chunk), one end with
    a finish reason, and the usage of every part of the answer."""
    outputs = sum(a.output_tokens for a in gw.attempts)
    if sdk == "openai":
        assert len({c.id for c in stream}) == 1
        roles = [c.choices[0].delta.role for c in stream if c.choices and c.choices[0].delta.role]
        assert roles == ["assistant"]
        finishes = [c.choices[0].finish_reason for c in stream if c.choices]
        assert [f for f in finishes if f] == ["stop"] and finishes[-1] == "stop"
        usage = stream[-1].usage
        assert not stream[-1].choices and usage.completion_tokens == outputs
        inputs = sum(
            a.input_tokens + a.cache_read_tokens + a.cache_write_tokens for a in gw.attempts
        )
        assert usage.prompt_tokens == inputs
        return
    types = [e.type for e in stream]
    assert types[0] == "message_start" and types.count("message_start") == 1
    assert types[-2:] == ["message_delta", "message_stop"] and types.count("message_stop") == 1
    starts = [e for e in stream if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [(0, "text")]
    assert {e.index for e in stream if e.type in ("content_block_delta", "content_block_stop")} == {
        0
    }
    assert types.count("content_block_stop") == 1
    end = stream[-2]
    assert end.delta.stop_reason == "end_turn" and end.usage.output_tokens == outputs


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("primary", ["claude", "gpt"])
def test_a_cut_stream_is_continued_on_an_anthropic_backup_as_one_stream(
    gateway: GatewayFactory, fake: FakeProviders, primary: str, sdk: str
):
    gw = gateway({"chat": continuing(f"{primary}/primary#{CUT}", "claude/backup")})
    text, stream, request_id = READ[sdk](gw, "chat")
    assert text == ECHO  # the whole answer, exactly once
    assert_well_formed(sdk, stream, gw)
    first, second = gw.attempts
    assert (first.decision, first.error_class, first.served) == (
        "continue_elsewhere",
        "stream_cut",
        True,
    )
    assert (second.target, second.decision, second.continues_attempt) == (
        "claude/backup",
        "served",
        1,
    )
    assert first.request_id == second.request_id == request_id
    assert paid_calls(fake, "backup") == 1


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_stream_that_stalls_after_its_first_content_is_continued(
    gateway: GatewayFactory, sdk: str
):
    route = continuing("gpt/primary#stream_stall:after_events=4", "claude/backup",
                       idle_timeout_s=0.5)  # fmt: skip
    gw = gateway({"chat": route})
    text, stream, _ = READ[sdk](gw, "chat")
    assert text == ECHO
    assert_well_formed(sdk, stream, gw)
    assert [(a.error_class, a.decision) for a in gw.attempts] == [
        ("stream_stalled", "continue_elsewhere"),
        (None, "served"),
    ]


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_backup_that_rejects_prefill_is_skipped_and_the_next_one_continues(
    gateway: GatewayFactory, sdk: str
):
    gw = gateway({"chat": continuing(f"gpt/primary#{CUT}", REFUSES, "claude/backup")})
    text, stream, _ = READ[sdk](gw, "chat")
    assert text == ECHO
    assert_well_formed(sdk, stream, gw)
    assert [(a.target, a.decision, a.http_status, a.served) for a in gw.attempts] == [
        (f"gpt/primary#{CUT}", "continue_elsewhere", 200, True),
        (REFUSES, "fall_back", 400, False),
        ("claude/backup", "served", 200, True),
    ]


def test_when_no_backup_can_continue_the_in_band_error_names_the_original_cut(
    gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="switchover.gateway")
    gw = gateway({"chat": continuing(f"gpt/primary#{CUT}", REFUSES)})
    with pytest.raises(openai.APIError, match="stream cut") as from_openai:
        openai_read(gw, "chat")
    with pytest.raises(anthropic.APIStatusError, match="stream cut") as from_anthropic:
        anthropic_read(gw, "chat")
    for caught in (from_openai, from_anthropic):
        assert "prefill" not in str(caught.value) and not re.search(r"\b400\b", str(caught.value))
    assert [(a.target, a.decision) for a in gw.attempts] == [
        (f"gpt/primary#{CUT}", "continue_elsewhere"),
        (REFUSES, "give_up"),
    ] * 2
    lines = [r.getMessage() for r in caplog.records if r.name == "switchover.gateway"]
    assert len(lines) == 2, lines  # one a request, naming the primary's cut
    assert all(line.startswith("stream failed after its start: route chat, target gpt/primary#")
               and "stream_cut" in line and "prefill" not in line for line in lines)  # fmt: skip


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_by_default_a_committed_failure_is_still_an_in_band_error(
    gateway: GatewayFactory, fake: FakeProviders, sdk: str
):
    gw = gateway({"chat": [f"gpt/primary#{CUT}", "claude/backup"]})
    error = openai.APIError if sdk == "openai" else anthropic.APIStatusError
    with pytest.raises(error, match="stream cut"):
        READ[sdk](gw, "chat")
    assert [(a.decision, a.served) for a in gw.attempts] == [("in_band_error", True)]
    assert paid_calls(fake, "backup") == 0


def test_an_openai_compatible_backup_continues_only_where_the_configuration_declares_it(
    gateway: GatewayFactory, fake: FakeProviders
):
    providers = {
        "claude": {"kind": "anthropic", "base_url": fake.anthropic_url,
                   "api_key_env": "FAKE_ANTHROPIC_KEY"},
        "gpt": {"kind": "openai", "base_url": fake.openai_url, "api_key_env": "FAKE_OPENAI_KEY"},
        "vllm": {"kind": "openai", "base_url": fake.openai_url, "api_key_env": "FAKE_OPENAI_KEY",
                 "supports_prefill": True},
    }  # fmt: skip
    gw = gateway(
        {"chat": continuing(f"claude/primary#{CUT}", "gpt/undeclared", "vllm/declared")},
        providers=providers,
    )
    text, stream, _ = openai_read(gw, "chat")
    assert text == ECHO
    assert_well_formed("openai", stream, gw)
    assert [a.target for a in gw.attempts] == [f"claude/primary#{CUT}", "vllm/declared"]
    assert paid_calls(fake, "undeclared") == 0
    (call,) = fake.calls("declared")
    assert call.request["messages"][-1]["role"] == "assistant"


def test_a_continuation_is_one_warning_line_of_the_gateway(
    gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    gw = gateway({"chat": continuing(f"gpt/primary#{CUT}", "claude/backup")})
    assert anthropic_read(gw, "chat")[0] == ECHO
    first, second = gw.attempts
    lines = [
        r for r in caplog.records if r.name == "switchover.gateway" and r.levelno >= logging.WARNING
    ]
    assert [r.levelno for r in lines] == [logging.WARNING]
    assert lines[0].getMessage() == (
        f"stream continued after a failure: route chat, gpt/primary#{CUT} failed with "
        f"stream_cut at {second.continued_chars} characters, continued on claude/backup "
        f"(request {first.request_id})"
    )
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("switchover"))
    for secret in (QUESTION, *PROVIDER_KEYS.values(), GATEWAY_KEY):
        assert secret not in ours


PRICES = {
    f"primary#{CUT}": {"input_mtok": 3, "output_mtok": 15, "source": "test"},
    "backup": {"input_mtok": 1, "output_mtok": 5, "source": "test"},
}


def test_a_continued_request_is_stored_as_two_priced_parts_and_counted_once_answered(
    gateway: GatewayFactory, tmp_path: Path
):
    """Through the spool and a real scheduler cycle: both attempts in DuckDB with the marker
    and their own costs, and the rollup counts one request, answered, nothing wasted."""
    paths = DataPaths(tmp_path / "data")
    gw = gateway({"chat": continuing(f"gpt/primary#{CUT}", "claude/backup")},
                 record_to=paths, prices=PRICES)  # fmt: skip
    text, _, request_id = openai_read(gw, "chat")
    assert text == ECHO
    gw.stop_and_ingest(paths)
    with duckdb.connect(str(paths.database), read_only=True) as con:
        parts = con.execute(
            "SELECT attempt_number, target, decision, served, continues_attempt, continued_chars,"
            " output_tokens, tokens_estimated, cost_usd FROM attempts WHERE request_id = $id"
            " ORDER BY attempt_number",
            {"id": request_id},
        ).fetchall()
        rollup = con.execute(
            "SELECT sum(requests), sum(answered), sum(answered_by_fallback), sum(broken_streams),"
            " sum(unavailable), sum(attempts), sum(failed_attempts), sum(cost_usd),"
            " sum(wasted_usd) FROM rollup_minute WHERE route = 'chat'"
        ).fetchone()
    (first, second) = parts
    assert first[:6] == (1, f"gpt/primary#{CUT}", "continue_elsewhere", True, None, None)
    assert second[:5] == (2, "claude/backup", "served", True, 1)
    assert second[5] == gw.attempts[1].continued_chars and 0 < second[5] < len(ECHO)
    assert first[6] > 0 and first[7], "the cut part's output is estimated from its text"
    assert first[8] > 0 and second[8] > 0
    requests, answered, by_fallback, broken, unavailable, attempts, failed, cost, wasted = rollup
    assert (requests, answered, by_fallback, broken, unavailable) == (1, 1, 1, 0, 0)
    assert (attempts, failed) == (2, 1)
    assert cost == first[8] + second[8] and wasted == 0
