"""The fault matrix: every catalogue row, in both dialects, streaming and not, through the real
chain against the fake provider server over loopback HTTP.

Each case puts the fault on the primary (its model name carries `#fault`) and a healthy backup
in the other dialect behind it, then asserts the decision the chain took, how many paid calls
each fake received, and which target served. Row 14 (the connection never opens) cannot be
served by a listening socket; `test_connection_faults.py` covers it with real refused, DNS and
TLS failures. Row 26 (unreadable stream events) is also tested past its limit at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.core.errors import RequestFailed
from engine.core.messages import MessageEnd, StreamError, StreamStart, TextDelta
from engine.providers.stream import MAX_UNREADABLE_EVENTS
from simulations.fakes import CATALOGUE, Fault

from .conftest import Stack, ask, collect

# Parameters that keep slow faults short; the chain's limits in FAST_POLICY do the rest.
FAST_PARAMS = {
    "timeout_504": "delay=0.05",
    "slow_drip": "interval=0.1",
    "slow_tokens": "interval=1.0",
    "stream_cut": "after_events=1",
    "stream_error": "after_events=1",
    # Cut before the first content event, or a stream would be committed (tested apart).
    "truncated": "fraction=0.02",
    "truncated_chunked": "fraction=0.02",
}
OTHER = {"anthropic": "openai", "openai": "anthropic"}
# Faults the chain's own limits cut short (no headers, no first token: a wait that ran out),
# which move on to the backup at once rather than wait again (issue 35, failoverbench S07).
WAITS_OUT = {"read_timeout", "late_first_token", "slow_drip", "slow_tokens", "stream_stall"}


@dataclass(frozen=True)
class Expected:
    served_by_primary: bool
    fails_fast: bool
    primary_calls: int
    first_decision: str


def expected(fault: Fault) -> Expected:
    if fault.name == "prefill_rejected":
        # Refused only when the last message is the assistant's (a continuation): the matrix's
        # question ends with the user, so it is answered (tests/fakes covers the refusal).
        return Expected(True, False, 1, "served")
    if fault.decision in ("ok", "adapt") or fault.name == "refusal":
        # A refusal is an answer: no provider shopping to get past it (row 4).
        return Expected(True, False, 1, "served")
    if fault.row == 2:
        # Neither target's window is stated (fakes' models are in no price list): the backup
        # may take the request, so it is tried (issue 35); a known window no larger is skipped
        # (tests/fallback/test_context_overflow.py), and with no backup it fails fast.
        return Expected(False, False, 1, "fall_back_larger_context")
    if fault.decision == "fail_fast":
        return Expected(False, True, 1, "fail_fast")
    if fault.decision == "fall_back_now":
        return Expected(False, False, 1, "fall_back_now")
    if fault.decision == "rate_limited":
        short_wait = fault.name == "slow_down"  # 1 s ≤ max_retry_after_wait_s: wait and retry
        return Expected(False, False, 2 if short_wait else 1,
                        "wait_and_retry" if short_wait else "fall_back")  # fmt: skip
    if fault.name == "timeout_504":
        return Expected(False, False, 1, "fall_back")  # never repeat a long wait
    if fault.name in WAITS_OUT:
        return Expected(False, False, 1, "fall_back")  # nor one of the chain's own
    # retry_then_fall_back, ambiguous, and error_in_200 (an embedded overloaded_error)
    return Expected(False, False, 2, "retry")


MATRIX = [
    pytest.param(fault, dialect, streaming, id=f"row{fault.row:02d}-{fault.name}-{dialect}-{mode}")
    for fault in CATALOGUE
    if fault.row >= 1 and fault.row != 14
    for dialect in ("anthropic", "openai")
    for streaming, mode in ((False, "plain"), (True, "stream"))
]


@pytest.mark.parametrize(("fault", "dialect", "streaming"), MATRIX)
async def test_each_fault_gets_its_decision(stack: Stack, fault: Fault, dialect: str, streaming):
    spec = fault.name + (f":{FAST_PARAMS[fault.name]}" if fault.name in FAST_PARAMS else "")
    chain = stack.chain((dialect, f"primary#{spec}"), (OTHER[dialect], "backup"))
    want = expected(fault)

    if want.fails_fast:
        with pytest.raises(RequestFailed):
            if streaming:
                await collect(chain.stream(ask()))
            else:
                await chain.complete(ask())
    elif streaming:
        events = await collect(chain.stream(ask()))
        start = next(e for e in events if isinstance(e, StreamStart))
        assert start.model.startswith("primary" if want.served_by_primary else "backup")
        assert isinstance(events[-1], MessageEnd), "a served stream ends complete"
    else:
        response = await chain.complete(ask())
        assert response.model == ("primary" if want.served_by_primary else "backup")
        assert response.fallback_depth == (0 if want.served_by_primary else 1)

    assert stack.paid_calls("primary") == want.primary_calls
    backup_calls = 0 if (want.served_by_primary or want.fails_fast) else 1
    assert stack.paid_calls("backup") == backup_calls, "a request fault never reaches a backup"
    assert stack.attempts[0].decision == want.first_decision
    assert len(stack.attempts) == want.primary_calls + backup_calls, "one Attempt per HTTP call"
    assert [a.served for a in stack.attempts].count(True) == (0 if want.fails_fast else 1)
    if fault.decision == "fall_back_now":
        assert [e.kind for e in stack.events] == ["credential_failure"]
    if fault.name == "bad_event":  # skipped, and counted on the attempt (row 26)
        assert stack.attempts[0].unreadable_events == (1 if streaming else 0)


def test_the_matrix_covers_every_catalogue_row():
    rows = {param.values[0].row for param in MATRIX}
    assert rows == set(range(1, 27)) - {14}


# --- row 26 past its limit: more unreadable events than a healthy stream has are a cut -------

TOO_MANY = MAX_UNREADABLE_EVENTS + 1
# The events before the first content event in each dialect's stream: Anthropic's
# message_start, ping and content_block_start; OpenAI's role-only chunk.
BEFORE_CONTENT = {"anthropic": 3, "openai": 1}


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_an_unreadable_event_is_counted_on_the_end_and_on_the_attempt(stack, dialect):
    chain = stack.chain((dialect, "primary#bad_event"), (OTHER[dialect], "backup"))
    events = await collect(chain.stream(ask()))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "echo: Where is my order?"
    end = events[-1]
    assert isinstance(end, MessageEnd) and end.unreadable_events == 1
    (attempt,) = stack.attempts
    assert end.attempts == (attempt,)
    assert (attempt.decision, attempt.unreadable_events) == ("served", 1)


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_too_many_unreadable_events_before_the_first_content_fall_back(stack, dialect):
    spec = f"bad_event:after_events={BEFORE_CONTENT[dialect]},count={TOO_MANY}"
    chain = stack.chain((dialect, f"primary#{spec}"), (OTHER[dialect], "backup"))
    events = await collect(chain.stream(ask()))
    start = next(e for e in events if isinstance(e, StreamStart))
    assert start.model.startswith("backup") and isinstance(events[-1], MessageEnd)
    assert [a.decision for a in stack.attempts] == ["retry", "fall_back", "served"]
    assert [a.error_class for a in stack.attempts[:2]] == ["stream_cut", "stream_cut"]
    assert stack.attempts[0].error_message.endswith(f"{TOO_MANY} unreadable events")


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_too_many_unreadable_events_after_the_first_content_are_an_in_band_error(
    stack, dialect
):
    spec = f"bad_event:after_events={BEFORE_CONTENT[dialect] + 1},count={TOO_MANY}"
    chain = stack.chain((dialect, f"primary#{spec}"), (OTHER[dialect], "backup"))
    events = await collect(chain.stream(ask("a question long enough to stream in pieces")))
    assert any(isinstance(e, TextDelta) and e.text for e in events)
    assert isinstance(events[-1], StreamError) and events[-1].error_class == "stream_cut"
    assert not any(isinstance(e, MessageEnd) for e in events), "never a complete-looking end"
    assert stack.paid_calls("backup") == 0
    (attempt,) = stack.attempts
    assert (attempt.decision, attempt.served, attempt.outcome) == ("in_band_error", True, "error")
