"""The breaker through the real chain over loopback: it opens on consecutive provider faults,
skips the target without calling it, and when half-open lets exactly one probe through even
when a hundred requests arrive at once."""

from __future__ import annotations

import asyncio

from engine.core.clock import VirtualClock
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.state.breaker import MemoryBreakerStore

from .conftest import FAST_POLICY, Stack, ask

# A hundred requests at once on a loaded machine can keep the backup's answer on the wire for
# more than FAST_POLICY's half second: the attempts here get the whole budget, so that only the
# breaker decides who is called (the chain's own time is the virtual clock, moved by hand).
POLICY: Policy = FAST_POLICY.replace(
    primary_retries=0,
    breaker_failures=3,
    breaker_cooldown_s=30,
    attempt_timeout_s=10,
    first_token_timeout_s=10,
)


def _chain(stack: Stack, clock: VirtualClock) -> Chain:
    return Chain(
        "e2e",
        [Target(stack.providers["anthropic"], "primary"), Target(stack.providers["openai"], "b")],
        policy=POLICY,
        clock=clock,  # moved by hand: the cooldown passes without sleeping
        breakers=MemoryBreakerStore(POLICY.breaker_policy()),
        hooks=[stack.attempts.append],
    )


async def test_an_open_breaker_skips_the_target_then_lets_exactly_one_probe_through(
    stack: Stack,
):
    clock = VirtualClock()
    chain = _chain(stack, clock)
    stack.fake.script("primary", ["overloaded"] * 3)

    for _ in range(3):  # three provider faults in a row open the breaker
        assert (await chain.complete(ask())).model == "b"
    assert (await chain.breakers.snapshot("claude/primary")).status == "open"

    await chain.complete(ask())  # open: skipped without an HTTP call
    assert stack.paid_calls("primary") == 3
    assert stack.attempts[-1].fallback_depth == 1

    clock.advance(POLICY.breaker_cooldown_s)  # the primary has recovered meanwhile
    results = await asyncio.gather(*(chain.complete(ask()) for _ in range(100)))

    assert stack.paid_calls("primary") == 4, "exactly one probe across 100 concurrent requests"
    assert sorted(r.model for r in results).count("primary") == 1
    probe = next(a for a in stack.attempts if a.target == "claude/primary" and a.served)
    assert probe.breaker_state == "half_open"
    assert (await chain.breakers.snapshot("claude/primary")).status == "closed"
    assert (await chain.complete(ask())).model == "primary", "closed again: primary first"
