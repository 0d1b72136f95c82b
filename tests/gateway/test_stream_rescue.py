"""Streams the gateway rescues, and the records of those it cannot, over real HTTP: the official
SDKs against the gateway, the gateway against the fake providers (issue 20, items 2, 3 and 6).

A stream whose finish reason arrived is whole, with or without its end marker; an unreadable
event is skipped and counted, four of them are a cut; a failure after the stream started is one
WARNING line of the gateway's log; a provider that sent no status line is recorded with none."""

from __future__ import annotations

import logging
from pathlib import Path

import anthropic
import duckdb
import openai
import pytest

from engine.core.paths import DataPaths
from engine.providers.stream import MAX_UNREADABLE_EVENTS
from simulations.fakes import FakeProviders
from simulations.fakes.model import words_text

from .conftest import GATEWAY_KEY, PROVIDER_KEYS, Gateway, GatewayFactory, paid_calls, user

QUESTION = "Where is my order, and when will it reach the depot near me?"
ECHO = "echo: " + QUESTION
# About sixty events in either dialect: the fake streams two words an event.
SIXTY_EVENTS = 112
# The events before the first content in each dialect's stream (the fake's, as the real ones
# send them): Anthropic's message_start, ping and content_block_start; OpenAI's role chunk.
BEFORE_CONTENT = {"claude": 3, "gpt": 1}
TOO_MANY = MAX_UNREADABLE_EVENTS + 1


def openai_stream(gw: Gateway, route: str, text: str = QUESTION) -> tuple[str, object, str]:
    """(text, usage, x-request-id) of one stream read with the OpenAI SDK, usage asked for."""
    client = openai.OpenAI(base_url=gw.openai_url, api_key=GATEWAY_KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=route,
        messages=user(text),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return content, chunks[-1].usage, raw.headers["x-request-id"]


def anthropic_stream(gw: Gateway, route: str, text: str = QUESTION) -> tuple[str, object, str]:
    """(text, usage, request-id) of one stream read with the Anthropic SDK."""
    client = anthropic.Anthropic(base_url=gw.url, api_key=GATEWAY_KEY, max_retries=0)
    with client.messages.stream(model=route, max_tokens=512, messages=user(text)) as stream:
        message = stream.get_final_message()
        request_id = stream.response.headers["request-id"]
    content = "".join(block.text for block in message.content if block.type == "text")
    return content, message.usage, request_id


READ = {"openai": openai_stream, "anthropic": anthropic_stream}


def input_output(usage: object) -> tuple[int, int]:
    """(input, output) tokens, as either SDK reports them."""
    if isinstance(usage, openai.types.CompletionUsage):
        return usage.prompt_tokens, usage.completion_tokens
    assert isinstance(usage, anthropic.types.Usage)
    return usage.input_tokens, usage.output_tokens


# --- item 2: a stream is complete when its finish reason arrives -----------------------------


@pytest.mark.parametrize("close", ["clean", "abrupt"])
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("provider", ["claude", "gpt"])
def test_a_stream_without_its_end_marker_is_served_whole_with_its_usage_as_a_success(
    gateway: GatewayFactory, fake: FakeProviders, provider: str, sdk: str, close: str
):
    """The provider sends the whole answer, its finish reason and usage, then closes without
    `[DONE]` (OpenAI) or `message_stop` (Anthropic): the caller gets all of it, no error."""
    gw = gateway({"chat": [f"{provider}/primary#no_done:close={close}", "gpt/backup"]})
    text, usage, _ = READ[sdk](gw, "chat")
    assert text == ECHO
    (attempt,) = gw.attempts
    assert (attempt.outcome, attempt.decision, attempt.served) == ("success", "served", True)
    assert attempt.error_class is None and attempt.unreadable_events == 0
    assert input_output(usage) == (attempt.input_tokens, attempt.output_tokens)
    assert attempt.input_tokens > 0 and attempt.output_tokens > 0
    assert paid_calls(fake, "backup") == 0


# --- item 3: unreadable events are skipped --------------------------------------------------


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("provider", ["claude", "gpt"])
def test_one_unreadable_event_mid_stream_is_skipped_and_counted(
    gateway: GatewayFactory, fake: FakeProviders, provider: str, sdk: str
):
    """The tenth of about sixty events is not JSON: the answer goes on to its end."""
    spec = f"bad_event:after_events=9,words={SIXTY_EVENTS}"
    gw = gateway({"chat": [f"{provider}/primary#{spec}", "gpt/backup"]})
    text, usage, _ = READ[sdk](gw, "chat")
    assert text == words_text(SIXTY_EVENTS)
    (attempt,) = gw.attempts
    assert (attempt.outcome, attempt.unreadable_events) == ("success", 1)
    assert input_output(usage)[1] == attempt.output_tokens > 0
    assert paid_calls(fake, "backup") == 0


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("provider", ["claude", "gpt"])
def test_too_many_unreadable_events_before_the_first_content_fall_back(
    gateway: GatewayFactory, fake: FakeProviders, provider: str, sdk: str
):
    spec = f"bad_event:after_events={BEFORE_CONTENT[provider]},count={TOO_MANY}"
    gw = gateway({"chat": [f"{provider}/primary#{spec}", "claude/backup"]})
    text, _, _ = READ[sdk](gw, "chat")
    assert text == ECHO
    assert [(a.error_class, a.decision) for a in gw.attempts] == [
        ("stream_cut", "retry"),
        ("stream_cut", "fall_back"),
        (None, "served"),
    ]
    assert gw.attempts[0].error_message.endswith(f"{TOO_MANY} unreadable events")
    assert gw.attempts[-1].target == "claude/backup" and paid_calls(fake, "backup") == 1


@pytest.mark.parametrize("provider", ["claude", "gpt"])
def test_too_many_unreadable_events_after_the_first_content_are_an_in_band_error(
    gateway: GatewayFactory, fake: FakeProviders, provider: str
):
    """Committed: no backup can be spliced on, so both SDKs raise on the in-band error."""
    spec = f"bad_event:after_events={BEFORE_CONTENT[provider] + 1},count={TOO_MANY}"
    gw = gateway({"chat": [f"{provider}/primary#{spec}", "claude/backup"]})
    with pytest.raises(openai.APIError, match="unreadable events"):
        openai_stream(gw, "chat")
    with pytest.raises(anthropic.APIStatusError, match="unreadable events"):
        anthropic_stream(gw, "chat")
    assert [(a.error_class, a.decision, a.served) for a in gw.attempts] == [
        ("stream_cut", "in_band_error", True)
    ] * 2
    assert paid_calls(fake, "backup") == 0


# --- item 6: records and logs say what happened -------------------------------------------


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_failure_after_the_stream_started_is_one_warning_of_the_gateway(
    gateway: GatewayFactory, sdk: str, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    gw = gateway({"chat": ["claude/primary#stream_cut:after_events=6", "gpt/backup"]})
    error = openai.APIError if sdk == "openai" else anthropic.APIStatusError
    with pytest.raises(error):
        READ[sdk](gw, "chat")
    (attempt,) = gw.attempts
    lines = [
        r for r in caplog.records if r.name == "switchover.gateway" and r.levelno >= logging.WARNING
    ]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    line = lines[0].getMessage()
    assert lines[0].levelno == logging.WARNING
    assert line.startswith("stream failed after its start: route chat, target claude/primary#")
    assert "stream_cut: claude: stream cut: the connection closed mid-body (transfer encoding)" in (
        line
    )
    assert line.endswith(f"(request {attempt.request_id})")
    said = line.removesuffix(f"(request {attempt.request_id})")  # the id is random hex
    assert "400" not in said, "a cut after a 200 reads like no HTTP status"
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("switchover"))
    for secret in (QUESTION, "Where is my order", *PROVIDER_KEYS.values(), GATEWAY_KEY):
        assert secret not in ours  # (the SDKs' own debug lines quote the request)


def test_a_stream_served_whole_leaves_no_warning(
    gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="switchover.gateway")
    gw = gateway({"chat": ["gpt/primary#no_done:close=abrupt"]})
    assert openai_stream(gw, "chat")[0] == ECHO
    assert not [r for r in caplog.records if r.name == "switchover.gateway"]


def test_a_reset_before_the_headers_is_stored_with_no_http_status(
    gateway: GatewayFactory, fake: FakeProviders, tmp_path: Path
):
    """No status line arrived: the attempt, its spool row and the store's row say NULL, not
    200; the cut of a stream whose 200 did arrive keeps its 200."""
    paths = DataPaths(tmp_path / "data")
    gw = gateway(
        {
            "reset": ["claude/primary#reset", "gpt/backup"],
            "cut": ["gpt/cutter#stream_cut:after_events=1", "gpt/backup"],
        },
        record_to=paths,
    )
    assert openai_stream(gw, "reset")[0] == ECHO
    assert anthropic_stream(gw, "cut")[0] == ECHO
    recorded = [(a.target, a.error_class, a.http_status) for a in gw.attempts if a.error_class]
    assert recorded == [
        ("claude/primary#reset", "reset", None),
        ("claude/primary#reset", "reset", None),
        ("gpt/cutter#stream_cut:after_events=1", "stream_cut", 200),
        ("gpt/cutter#stream_cut:after_events=1", "stream_cut", 200),
    ]
    gw.stop_and_ingest(paths)
    with duckdb.connect(str(paths.database), read_only=True) as con:
        stored = con.execute(
            "SELECT error_class, http_status, count(*) FROM attempts WHERE error_class IS NOT NULL"
            " GROUP BY ALL ORDER BY error_class"
        ).fetchall()
    assert stored == [("reset", None, 2), ("stream_cut", 200, 2)]


def test_a_stream_that_stalls_before_its_headers_is_recorded_with_no_http_status(
    gateway: GatewayFactory, fake: FakeProviders
):
    """The provider accepts the connection and never answers: the chain's first-token limit
    ends the wait, and the record says no status line came."""
    route = {"targets": ["claude/primary#read_timeout", "gpt/backup"], "primary_retries": 0,
             "first_token_timeout_s": 0.3}  # fmt: skip
    gw = gateway({"chat": route})
    assert anthropic_stream(gw, "chat")[0] == ECHO
    stalled, served = gw.attempts
    assert (stalled.error_class, stalled.http_status, stalled.decision) == (
        "stream_stalled",
        None,
        "fall_back",
    )
    assert stalled.error_message == (
        "stream stalled: no stream event for 0.3 s before the response headers"
    )
    assert served.outcome == "success"
