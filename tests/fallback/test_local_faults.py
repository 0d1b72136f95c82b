"""Our own failures are never a provider's: whatever fails before a byte leaves for a provider
(a request no JSON encoder can write, a bug in a prompt) fails the request at once, is recorded
as internal, is never retried or sent to a backup, and no breaker counts it. The gateway checks
callers' requests before the chain; this is the chain's own guard, for library callers."""

from __future__ import annotations

import math

from helpers.chain_rig import ASK, BACKUP, PRIMARY, Rig

from engine.core.errors import LocalFault, RequestFailed
from engine.core.messages import Message, Request, Text, ToolCall
from engine.fallback.target import Target
from engine.gateway.errors import failure_for
from engine.state.breaker import BreakerState


def test_a_lone_surrogate_in_a_library_request_is_never_sent_and_never_counted():
    rig = Rig(breaker_failures=1)
    broken = Request(messages=(Message.user("broken \ud800 text"),))
    for _ in range(3):
        error = _fails(rig, broken)
        assert isinstance(error.error, LocalFault) and error.error.error_class == "unencodable"
    assert rig.calls() == [], "no provider, primary or backup, was called"
    assert [(a.fault_kind, a.decision) for a in rig.attempts] == [("internal", "fail_fast")] * 3
    assert rig.breaker(PRIMARY) == BreakerState() and rig.breaker(BACKUP) == BreakerState()
    assert rig.complete().fallback_depth == 0, "the primary still serves the next caller"


def test_nan_in_tool_call_arguments_is_never_sent():
    rig = Rig(breaker_failures=1)
    call = ToolCall("call_1", "get_weather", {"days": math.nan})
    request = Request(
        messages=(Message.user("weather?"), Message("assistant", (call,)), Message.user("ok"))
    )
    error = _fails(rig, request)
    assert error.error.error_class == "unencodable" and rig.calls() == []
    assert rig.breaker(PRIMARY) == BreakerState()


class _BrokenPrompt:
    """A target prompt with a bug: applying it raises."""

    label = "broken@1"

    def apply(self, request: Request) -> Request:
        raise KeyError("system")


def test_a_prompt_that_raises_fails_the_request_as_internal_without_a_backup():
    rig = Rig(breaker_failures=1)
    primary = rig.chain.targets[0]
    rig.chain.targets = (Target(primary.provider, primary.model, prompt=_BrokenPrompt()),
                         *rig.chain.targets[1:])  # fmt: skip
    error = _fails(rig)
    assert error.error.error_class == "internal" and rig.calls() == []
    assert rig.breaker(PRIMARY) == BreakerState()
    answer = failure_for(error, "openai")
    assert (answer.status, answer.cause) == (500, "internal")
    assert "not sent" in str(error)


def test_a_local_fault_during_the_half_open_probe_releases_it_for_the_next_request():
    rig = Rig(breaker_failures=1, breaker_cooldown_s=30)
    rig.script(PRIMARY, "500")
    rig.complete()  # opens the primary's breaker; the backup serves
    rig.clock.advance(30)
    broken = Request(messages=(Message("user", (Text("\udfff"),)),))
    _fails(rig, broken)
    state = rig.breaker(PRIMARY)
    assert (state.status, state.probe_until) == ("half_open", None), "released, not failed"
    assert state.consecutive_failures == 1, "nothing more was counted"
    assert rig.complete(ASK).fallback_depth == 0, "the next request is the probe, and closes it"
    assert rig.breaker(PRIMARY).status == "closed"


def test_the_gateway_answers_an_unencodable_request_with_a_400():
    error = RequestFailed(LocalFault.unencodable("claude: UnicodeEncodeError: surrogates"))
    for face in ("openai", "anthropic"):
        answer = failure_for(error, face)
        assert (answer.status, answer.cause) == (400, "request")


def _fails(rig: Rig, request: Request = ASK) -> RequestFailed:
    try:
        rig.clock.run(rig.chain.complete(request))
    except RequestFailed as error:
        return error
    raise AssertionError("the request was answered")
