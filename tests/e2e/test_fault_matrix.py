"""The fault matrix: every catalogue row, in both dialects, streaming and not, through the real
chain against the fake provider server over loopback HTTP.

Each case puts the fault on the primary (its model name carries `#fault`) and a healthy backup
in the other dialect behind it, then asserts the decision the chain took, how many paid calls
each fake received, and which target served. Row 14 (the connection never opens) cannot be
served by a listening socket; `test_connection_faults.py` covers it with real refused, DNS and
TLS failures.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.errors import RequestFailed
from engine.types import MessageEnd, StreamStart
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


@dataclass(frozen=True)
class Expected:
    served_by_primary: bool
    fails_fast: bool
    primary_calls: int
    first_decision: str


def expected(fault: Fault) -> Expected:
    if fault.decision in ("ok", "adapt") or fault.name == "refusal":
        # A refusal is an answer: no provider shopping to get past it (row 4).
        return Expected(True, False, 1, "served")
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


def test_the_matrix_covers_every_catalogue_row():
    rows = {param.values[0].row for param in MATRIX}
    assert rows == set(range(1, 26)) - {14}
