"""Mid-stream continuation on virtual time (engine.fallback.continuation): a route with
`on_stream_failure = "continue"` finishes a committed stream that failed on a later target that
continues a final assistant message, so the caller reads one answer, once, in one stream."""

from __future__ import annotations

import re
from typing import Any

import pytest

from engine.behaviours.contracts import OutputContract
from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.messages import (
    Message,
    MessageEnd,
    Request,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    Tool,
    ToolCallStart,
    Usage,
)
from engine.fallback.chain import Chain
from engine.fallback.continuation import CONTINUE_ELSEWHERE, continued_parts
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.openai import OpenAIProvider
from engine.state.breaker import ProviderFailure
from simulations.fakes import FakeTransport

QUESTION = "Where is my order, and when will it reach the depot near me?"
ECHO = "echo: " + QUESTION
ASK = Request(messages=(Message.user(QUESTION),), max_tokens=400)
# A stream of the fake's events: OpenAI sends a role chunk first, Anthropic three events.
CUT = "stream_cut:after_events=4"  # the first three text deltas reach the caller, then a cut


class Rig:
    """A route of `targets` ("claude/..." Anthropic, "gpt/..." OpenAI-compatible; "gpt+/..."
    an OpenAI-compatible server declared to continue), one fake transport, one virtual clock."""

    def __init__(
        self, *targets: str, continue_streams: bool = True, contract: Any = None, **policy: Any
    ) -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock, keep_bodies=True)
        self.attempts: list[Attempt] = []
        claude = AnthropicProvider("claude", base_url="http://anthropic.fake", api_key="k1",
                                   transport=self.fake, clock=self.clock)  # fmt: skip
        gpt = OpenAIProvider("gpt", base_url="http://openai.fake/v1", api_key="k2",
                             transport=self.fake, clock=self.clock)  # fmt: skip
        built = []
        for name in targets:
            kind, _, model = name.partition("/")
            provider = claude if kind == "claude" else gpt
            built.append(Target(provider, model, prefill=True if kind == "gpt+" else None))
        self.chain = Chain(
            "support",
            built,
            policy=Policy(**{"idle_timeout_s": 5, "first_token_timeout_s": 5, **policy}),
            clock=self.clock,
            hooks=[self.attempts.append],
            continue_streams=continue_streams,
            contract=contract,
        )

    def script(self, model: str, *faults: str | dict[str, Any]) -> None:
        self.fake.script(model, faults)

    def stream(self, request: Request = ASK) -> list[StreamEvent]:
        async def read() -> list[StreamEvent]:
            return [event async for event in self.chain.stream(request)]

        return self.clock.run(read())

    def rows(self) -> list[tuple[str, str, str, bool]]:
        return [(a.target, a.outcome, a.decision, a.served) for a in self.attempts]


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def total(attempts: list[Attempt]) -> Usage:
    return Usage(
        sum(a.input_tokens for a in attempts),
        sum(a.output_tokens for a in attempts),
        sum(a.cache_read_tokens for a in attempts),
        sum(a.cache_write_tokens for a in attempts),
    )


def assert_one_stream(events: list[StreamEvent]) -> MessageEnd:
    """One StreamStart first, one MessageEnd last, no error: the caller's stream is whole."""
    assert isinstance(events[0], StreamStart)
    assert sum(isinstance(e, StreamStart) for e in events) == 1
    assert not any(isinstance(e, StreamError) for e in events)
    assert [type(e) for e in events].count(MessageEnd) == 1 and isinstance(events[-1], MessageEnd)
    return events[-1]


@pytest.mark.parametrize("primary", ["claude/primary", "gpt/primary"])
def test_a_cut_stream_is_finished_by_the_backup_and_read_once(primary: str):
    rig = Rig(primary, "claude/backup")
    rig.script("primary", CUT)
    events = rig.stream()
    end = assert_one_stream(events)
    assert text(events) == ECHO
    assert events[0] == StreamStart("support", primary.split("/")[0], "primary", 0, 1)
    first, second = rig.attempts
    assert rig.rows() == [
        (primary, "error", CONTINUE_ELSEWHERE, True),
        ("claude/backup", "success", "served", True),
    ]
    assert first.error_class == "stream_cut" and first.continues_attempt is None
    assert second.continues_attempt == 1
    assert second.continued_chars is not None and 0 < second.continued_chars < len(ECHO)
    assert second.fallback_depth == 1 and second.request_id == first.request_id
    assert end.usage == total(rig.attempts)  # the caller's usage is both parts'
    assert end.attempts == tuple(rig.attempts) and continued_parts(end.attempts) == (first, second)


def test_the_backup_is_sent_the_text_so_far_without_its_trailing_whitespace():
    """The Anthropic API refuses a prefill that ends in whitespace; the caller's copy keeps it,
    and the space the model puts back at the start of its continuation is not doubled."""
    rig = Rig("gpt/primary", "claude/backup")
    rig.script("primary", CUT)
    events = rig.stream()
    held = rig.attempts[1].continued_chars
    assert held is not None and ECHO[held - 1] == " "
    (body,) = rig.fake.sent_to("backup")
    question, prefill = body["messages"]
    assert (question["role"], prefill["role"]) == ("user", "assistant")
    sent = "".join(block["text"] for block in prefill["content"])
    assert sent == ECHO[:held].rstrip() and not sent[-1].isspace()
    assert text(events) == ECHO and "  " not in text(events)


def test_the_backup_may_write_only_what_is_left_of_the_callers_max_tokens():
    rig = Rig("gpt/primary", "claude/backup")
    rig.script("primary", CUT)
    rig.stream()
    first = rig.attempts[0]
    (body,) = rig.fake.sent_to("backup")
    assert body["max_tokens"] == ASK.max_tokens - first.output_tokens
    assert first.output_tokens > 0 and first.tokens_estimated  # OpenAI sends usage last


def test_a_stall_after_the_first_content_is_continued_after_the_idle_timeout():
    rig = Rig("claude/primary", "claude/backup", idle_timeout_s=3)
    rig.script("primary", "stream_stall:after_events=5")
    started = rig.clock.now()
    events = rig.stream()
    assert_one_stream(events)
    assert text(events) == ECHO
    assert rig.attempts[0].error_class == "stream_stalled"
    assert rig.attempts[0].decision == CONTINUE_ELSEWHERE
    assert rig.clock.now() - started == pytest.approx(3, abs=0.01)


def test_an_in_band_error_event_after_the_first_content_is_continued():
    rig = Rig("claude/primary", "claude/backup")
    rig.script("primary", "stream_error:after_events=5")
    events = rig.stream()
    assert_one_stream(events)
    assert text(events) == ECHO and rig.attempts[0].error_class == "overloaded"


def test_a_backup_that_refuses_the_prefill_is_passed_over_unseen():
    rig = Rig("gpt/primary", "claude/refuses", "claude/backup")
    rig.script("primary", CUT)
    rig.script("refuses", "prefill_rejected")
    events = rig.stream()
    assert_one_stream(events)
    assert text(events) == ECHO
    assert rig.rows() == [
        ("gpt/primary", "error", CONTINUE_ELSEWHERE, True),
        ("claude/refuses", "error", "fall_back", False),
        ("claude/backup", "success", "served", True),
    ]
    assert rig.attempts[1].http_status == 400 and rig.attempts[1].continues_attempt == 1
    assert rig.attempts[2].continues_attempt == 1  # it goes on from the primary's text


def test_when_every_backup_refuses_the_caller_is_told_of_the_first_failure():
    rig = Rig("gpt/primary", "claude/refuses", "claude/refuses-too")
    rig.script("primary", CUT)
    rig.script("refuses", "prefill_rejected")
    rig.script("refuses-too", "prefill_rejected")
    events = rig.stream()
    error = events[-1]
    assert isinstance(error, StreamError) and not any(isinstance(e, MessageEnd) for e in events)
    assert (error.error_class, error.error_type) == ("stream_cut", "api_error")
    assert "prefill" not in error.message and not re.search(r"\b400\b", error.message)
    assert error.message == rig.attempts[0].error_message
    assert rig.rows() == [
        ("gpt/primary", "error", CONTINUE_ELSEWHERE, True),
        ("claude/refuses", "error", "fall_back", False),
        ("claude/refuses-too", "error", "give_up", False),
    ]
    assert error.attempts == tuple(rig.attempts)
    assert ECHO.startswith(text(events)) and text(events) != ECHO


def test_without_the_option_a_committed_failure_is_an_in_band_error_as_before():
    rig = Rig("gpt/primary", "claude/backup", continue_streams=False)
    rig.script("primary", CUT)
    events = rig.stream()
    assert isinstance(events[-1], StreamError) and events[-1].error_class == "stream_cut"
    assert rig.rows() == [("gpt/primary", "error", "in_band_error", True)]
    assert not rig.fake.calls("backup")


def test_an_openai_compatible_backup_continues_only_when_declared():
    rig = Rig("claude/primary", "gpt/undeclared", "gpt+/declared")
    rig.script("primary", CUT)
    events = rig.stream()
    assert_one_stream(events)
    assert text(events) == ECHO
    assert not rig.fake.calls("undeclared")
    assert [a.target for a in rig.attempts] == ["claude/primary", "gpt/declared"]
    (body,) = rig.fake.sent_to("declared")
    assert body["messages"][-1]["role"] == "assistant"


def test_with_no_backup_that_can_continue_the_caller_gets_the_in_band_error():
    rig = Rig("claude/primary", "gpt/undeclared")
    rig.script("primary", CUT)
    events = rig.stream()
    assert isinstance(events[-1], StreamError) and events[-1].error_class == "stream_cut"
    assert rig.rows() == [("claude/primary", "error", "in_band_error", True)]
    assert not rig.fake.calls("undeclared")


def test_a_backup_whose_breaker_is_open_is_skipped():
    rig = Rig("gpt/primary", "claude/open", "claude/backup", breaker_failures=1)

    async def trip() -> None:
        await rig.chain.breakers.record("claude/open", ProviderFailure(), rig.clock.now())

    rig.clock.run(trip())
    rig.script("primary", CUT)
    events = rig.stream()
    assert text(events) == ECHO and not rig.fake.calls("open")
    assert [a.target for a in rig.attempts] == ["gpt/primary", "claude/backup"]


def test_a_stall_is_cut_at_the_reserve_line_so_the_continuation_has_its_share():
    """Issue 35, failoverbench S09: with the default limits (30 s idle in a 30 s budget) the
    stall was noticed at the deadline and the continuation had nothing left."""
    rig = Rig("claude/primary", "claude/backup", idle_timeout_s=30, first_token_timeout_s=20)
    rig.script("primary", "stream_stall:after_events=5")
    started = rig.clock.now()
    events = rig.stream()
    assert_one_stream(events)
    assert text(events) == ECHO
    assert rig.rows() == [
        ("claude/primary", "error", CONTINUE_ELSEWHERE, True),
        ("claude/backup", "success", "served", True),
    ]
    stalled_at = rig.attempts[1].started_at - rig.attempts[0].started_at
    assert stalled_at.total_seconds() == pytest.approx(20, abs=0.05), "at the reserve line"
    assert rig.clock.now() - started < 30


def test_no_continuation_begins_without_budget_left():
    """A committed stream is not cut by the budget: with no reserve kept, this one stalls
    until the deadline (3 s of silence in a 3 s budget), and no time is left for another."""
    rig = Rig("claude/primary", "claude/backup", budget_s=3, idle_timeout_s=3,
              backup_reserve_share=0)  # fmt: skip
    rig.script("primary", "stream_stall:after_events=5")
    events = rig.stream()
    assert isinstance(events[-1], StreamError) and events[-1].error_class == "stream_stalled"
    assert rig.rows() == [("claude/primary", "error", "in_band_error", True)]
    assert not rig.fake.calls("backup")


def test_no_continuation_after_a_tool_call_began():
    tool = Tool(
        "lookup", "Find an order.", {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    ask = Request(messages=(Message.user(QUESTION),), tools=(tool,))
    rig = Rig("claude/primary", "claude/backup")
    rig.script("primary", "stream_cut:after_events=5")
    events = rig.stream(ask)
    assert any(isinstance(e, ToolCallStart) for e in events)
    assert isinstance(events[-1], StreamError)
    assert rig.rows() == [("claude/primary", "error", "in_band_error", True)]
    assert not rig.fake.calls("backup")


def test_a_continuation_that_is_cut_too_is_continued_by_the_next_target():
    rig = Rig("gpt/primary", "claude/second", "claude/third")
    rig.script("primary", "stream_cut:after_events=3")
    rig.script("second", "stream_cut:after_events=5")
    events = rig.stream()
    end = assert_one_stream(events)
    assert text(events) == ECHO
    assert rig.rows() == [
        ("gpt/primary", "error", CONTINUE_ELSEWHERE, True),
        ("claude/second", "error", CONTINUE_ELSEWHERE, True),
        ("claude/third", "success", "served", True),
    ]
    _, second, third = rig.attempts
    assert (second.continues_attempt, third.continues_attempt) == (1, 2)
    assert second.continued_chars is not None and third.continued_chars is not None
    assert 0 < second.continued_chars < third.continued_chars < len(ECHO)
    assert end.usage == total(rig.attempts)


def test_a_caller_who_leaves_during_the_continuation_cancels_it():
    rig = Rig("gpt/primary", "claude/backup")
    rig.script("primary", CUT)
    rig.script("backup", "slow_tokens:interval=2")

    async def read_until_the_backup_speaks() -> None:
        seen = 0
        async for event in rig.chain.stream(ASK):
            if isinstance(event, TextDelta):
                seen += 1
            if seen == 4:  # the first text of the continuation
                break

    rig.clock.run(read_until_the_backup_speaks())
    assert rig.rows() == [
        ("gpt/primary", "error", CONTINUE_ELSEWHERE, True),
        ("claude/backup", "cancelled", "cancelled", True),
    ]


def test_a_request_whose_answer_is_continued_is_judged_whole_against_its_contract():
    """The route's contract sees the caller's whole answer, both parts, not the backup's
    part alone (which no schema would accept)."""
    answer = '{"order": "A-1", "status": "shipped", "eta": "tomorrow"}'
    contract = OutputContract({"type": "object", "required": ["order", "status"]})
    rig = Rig("claude/primary", "claude/backup", contract=contract)
    rig.script("primary", {"fault": "stream_cut", "after_events": 5, "text": answer})
    rig.script("backup", {"fault": "ok", "text": answer})
    events = rig.stream()
    assert text(events) == answer
    assert rig.attempts[0].decision == CONTINUE_ELSEWHERE
    assert rig.attempts[-1].quality_error is None


def test_a_callers_own_prefill_is_continued_with_the_answer_after_it():
    """The caller began the answer itself (an assistant prefill): the backup is sent one final
    assistant message, the caller's prefill and then the text streamed after it."""
    answer = '{"order": "A-1", "status": "shipped", "eta": "tomorrow"}'
    ask = Request(messages=(Message.user(QUESTION), Message.assistant("{")), max_tokens=400)
    rig = Rig("claude/primary", "claude/backup")
    rig.script("primary", {"fault": "stream_cut", "after_events": 5, "text": answer})
    rig.script("backup", {"fault": "ok", "text": answer})
    events = rig.stream(ask)
    assert text(events) == answer[1:]
    (body,) = rig.fake.sent_to("backup")
    *_, prefill = body["messages"]
    sent = "".join(block["text"] for block in prefill["content"])
    assert prefill["role"] == "assistant" and len(body["messages"]) == 2
    assert sent == ("{" + answer[1 : 1 + rig.attempts[1].continued_chars]).rstrip()
