"""How one budget is shared between a primary and its backups: the reserve line, the retries
that must fit before it, the time to first token, and the decisions recorded when the time
decides. The real chain and adapters over the in-process fake providers, on virtual time (a
20 s hang costs no real time)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.errors import AllProvidersUnavailable
from engine.core.messages import Message, MessageEnd, Request, Response, StreamStart
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.openai import OpenAIProvider
from simulations.fakes import FakeTransport

ASK = Request(messages=(Message.user("where is my parcel?"),))
MODELS = ("claude-sonnet-4-5", "gpt-4o", "gpt-4.1-mini")
HANG = "read_timeout"  # accepts the request, never answers
SLACK_S = 0.05


class Route:
    """Up to three targets (an Anthropic primary, OpenAI-dialect backups) on one fake transport;
    chain, providers and fake share one virtual clock. `clock` may wrap it (see Oversleeping)."""

    def __init__(self, targets: int = 2, *, clock: Any = None, order: Any = None, **policy: Any):
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock)
        self.attempts: list[Attempt] = []
        anthropic = AnthropicProvider(
            "claude", base_url="http://anthropic.fake", api_key="k", transport=self.fake,
            clock=self.clock,
        )  # fmt: skip
        openai = OpenAIProvider(
            "gpt", base_url="http://openai.fake/v1", api_key="k", transport=self.fake,
            clock=self.clock,
        )  # fmt: skip
        providers = (anthropic, openai, openai)
        self.chain = Chain(
            "support",
            [Target(p, m) for p, m in zip(providers, MODELS, strict=True)][:targets],
            policy=Policy(**policy),
            clock=clock(self.clock) if clock is not None else self.clock,
            hooks=[self.attempts.append],
            rng=random.Random(3),
            order=order(self.clock) if order is not None else None,
        )

    def script(self, position: int, *faults: str) -> None:
        self.fake.script(MODELS[position], faults)

    def complete(self) -> tuple[Response, float]:
        start = self.clock.now()
        response = self.clock.run(self.chain.complete(ASK))
        return response, self.clock.now() - start

    def stream(self) -> tuple[list[Any], float]:
        start = self.clock.now()

        async def read() -> list[Any]:
            return [event async for event in self.chain.stream(ASK)]

        events = self.clock.run(read())
        return events, self.clock.now() - start

    def decisions(self) -> list[tuple[str, str]]:
        return [(a.model, a.decision) for a in self.attempts]


# --- a hanging primary --------------------------------------------------------------------------


@pytest.mark.parametrize("retries", [0, 1, 2])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_hanging_primary_leaves_its_backup_a_third_of_the_budget_for_any_retries(
    retries: int, streamed: bool
):
    route = Route(primary_retries=retries)
    route.script(0, HANG)
    if streamed:
        events, elapsed = route.stream()
        assert isinstance(events[0], StreamStart) and isinstance(events[-1], MessageEnd)
        assert events[0].model == MODELS[1]
    else:
        response, elapsed = route.complete()
        assert response.fallback_depth == 1
    assert len(route.fake.calls(MODELS[0])) == 1  # the timeout is not retried into the reserve
    assert route.decisions() == [(MODELS[0], "fall_back"), (MODELS[1], "served")]
    assert route.attempts[0].latency_ms == 20_000.0  # 30 s budget, 10 s kept for the backup
    assert elapsed <= 30.0


def test_an_eight_second_budget_leaves_the_backup_its_share_of_a_hang():
    """Issue 20: with `budget_s = 8` two read timeouts left the backup skipped and a 504."""
    route = Route(budget_s=8)
    route.script(0, HANG, HANG)
    response, elapsed = route.complete()
    assert response.fallback_depth == 1
    assert route.decisions() == [(MODELS[0], "fall_back"), (MODELS[1], "served")]
    assert route.attempts[0].latency_ms == pytest.approx(8_000 * 2 / 3)
    assert elapsed <= 8.0


def test_a_retry_that_fits_before_the_line_is_made_and_ends_there():
    route = Route()
    route.script(0, "500", HANG)
    response, elapsed = route.complete()
    assert response.fallback_depth == 1
    assert route.decisions() == [
        (MODELS[0], "retry"),
        (MODELS[0], "fall_back"),
        (MODELS[1], "served"),
    ]
    assert elapsed == pytest.approx(20.0)  # the retry ended at the line, the backup answered


@pytest.mark.parametrize(
    ("retry_after", "decision"),
    [(0.2, "wait_and_retry"), (0.3, "fall_back"), (0.8, "fall_back")],
)
def test_a_rate_limit_wait_is_taken_only_when_the_retry_fits_before_the_line(
    retry_after: float, decision: str
):
    """Budget 3 s: the line is at 2 s. A 429 at 1.5 s asking for a wait leaves the retry
    0.3 s (taken: at least the 0.25 s minimum), 0.2 s or less (the backup is asked now)."""
    route = Route(budget_s=3)
    route.script(0, f"rate_limit:retry_after={retry_after},delay=1.5", "ok")
    response, _ = route.complete()
    assert route.attempts[0].decision == decision
    assert response.fallback_depth == (0 if decision == "wait_and_retry" else 1)


def test_a_hanging_first_backup_leaves_the_last_one_a_share_of_what_remains():
    route = Route(targets=3)
    route.script(0, HANG)
    route.script(1, HANG)
    response, elapsed = route.complete()
    assert response.fallback_depth == 2
    primary, backup = route.attempts[0], route.attempts[1]
    assert (primary.latency_ms, backup.latency_ms) == (20_000.0, pytest.approx(10_000 * 2 / 3))
    assert elapsed <= 30.0


def test_a_budget_too_small_to_keep_a_reserve_lets_the_primary_use_it_all():
    """0.3 s, and at least 0.25 s an attempt: nothing is worth keeping for a backup."""
    route = Route(budget_s=0.3)
    route.fake.latency(MODELS[0], fixed_ms=280)
    response, _ = route.complete()
    assert response.fallback_depth == 0


# --- the time to first token --------------------------------------------------------------------


def test_a_first_token_at_the_boundary_is_given_up_exactly_there():
    """Default policy: the first-token timeout (20 s) and the reserve line are one instant;
    a token that lands on it is late, and the backup answers with the 10 s left."""
    route = Route()
    route.script(0, "late_first_token:delay=20")
    events, elapsed = route.stream()
    assert events[0].model == MODELS[1]
    primary = route.attempts[0]
    assert (primary.decision, primary.latency_ms) == ("fall_back", 20_000.0)
    assert "20 s" in (primary.error_message or "")
    assert elapsed == 20.0


def test_a_first_token_just_before_the_boundary_is_kept():
    route = Route()
    route.script(0, "late_first_token:delay=19.999")
    events, _ = route.stream()
    assert events[0].model == MODELS[0] and isinstance(events[-1], MessageEnd)
    assert route.attempts[0].ttft_ms == pytest.approx(19_999.0)


class SlowOrder:
    """Target ordering that takes 2 ms of the budget, as a shared breaker store can."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    async def arrange(self, route: str, targets: Sequence[Target]) -> Sequence[Target]:
        await self.clock.sleep(0.002)
        return targets

    async def drills(self, route: str) -> Mapping[str, datetime]:
        return {}


def test_the_primarys_twenty_seconds_count_from_its_call_not_from_the_request():
    """Issue 20: a first token at 20.02 s was given up at 19.9999 s, the chain's own work
    before the call having been taken from the primary's share."""
    route = Route(order=SlowOrder)
    route.script(0, HANG)
    events, elapsed = route.stream()
    assert events[0].model == MODELS[1]
    assert route.attempts[0].latency_ms == 20_000.0
    assert elapsed == pytest.approx(20.002)


def test_a_first_token_stall_moves_on_to_the_backup_at_once_while_one_remains():
    """Issue 35, failoverbench S07: a first-token limit below the line used to retry the
    stalled primary (a second 5 s) before the backup, which answered at 21 s of 30."""
    route = Route(first_token_timeout_s=5)
    route.script(0, "late_first_token:delay=6", "ok")
    events, elapsed = route.stream()
    assert events[0].model == MODELS[1]
    assert route.decisions() == [(MODELS[0], "fall_back"), (MODELS[1], "served")]
    assert route.attempts[0].latency_ms == 5_000.0
    assert elapsed < 5.5, "the backup is asked as soon as the primary's wait runs out"


def test_on_the_last_target_a_first_token_stall_is_retried_when_the_retry_fits():
    route = Route(targets=1, first_token_timeout_s=5)
    route.script(0, "late_first_token:delay=6", "ok")
    events, _ = route.stream()
    assert events[0].model == MODELS[0]
    assert route.decisions() == [(MODELS[0], "retry"), (MODELS[0], "served")]


# --- decisions recorded are the ones taken ------------------------------------------------------


class Oversleeping:
    """The chain's clock on a loaded machine: every sleep ends 0.3 s late."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock.now()

    def wall(self) -> datetime:
        return self.clock.wall()

    async def sleep(self, seconds: float) -> None:
        await self.clock.sleep(seconds + 0.3)

    def timeout(self, seconds: float) -> Any:
        return self.clock.timeout(seconds)


@pytest.mark.parametrize(
    ("targets", "failed_at", "decision"), [(1, 2.5, "give_up"), (2, 1.5, "fall_back")]
)
def test_a_retry_the_clock_slept_past_is_recorded_as_what_happened(
    targets: int, failed_at: float, decision: str
):
    """Budget 3 s: a 500 0.5 s before the retry's end (the deadline alone, the line at 2 s
    with a backup) leaves the retry room after its backoff (at most 0.1 s), but the backoff
    ends 0.3 s late, past where the retry could begin."""
    route = Route(targets, clock=Oversleeping, budget_s=3, backoff_base_s=0.1)
    route.script(0, f"500:delay={failed_at}", "ok")
    if targets == 1:
        with pytest.raises(AllProvidersUnavailable):
            route.complete()
    else:
        assert route.complete()[0].fallback_depth == 1
    assert route.attempts[0].decision == decision
    assert len(route.fake.calls(MODELS[0])) == 1


def test_a_retry_the_breaker_refused_after_the_backoff_is_recorded_as_a_fallback():
    """Two requests fail on the primary together; the second failure opens its breaker while
    the first request sleeps before its retry, so that retry never runs."""
    route = Route(breaker_failures=2)
    route.script(0, "500:delay=0.01", "500:delay=0.02")

    async def both() -> list[Response]:
        other = Request(messages=(Message.user("and my other parcel?"),))
        return list(await asyncio.gather(route.chain.complete(ASK), route.chain.complete(other)))

    responses = route.clock.run(both())
    assert [r.fallback_depth for r in responses] == [1, 1]
    primary = [a for a in route.attempts if a.model == MODELS[0]]
    assert [a.decision for a in primary] == ["fall_back", "fall_back"]
    assert len(route.fake.calls(MODELS[0])) == 2


def test_a_caller_that_leaves_during_the_backoff_records_the_attempt_as_cancelled():
    route = Route()
    route.script(0, "500")

    async def leave() -> None:
        task = asyncio.ensure_future(route.chain.complete(ASK))
        await asyncio.sleep(0.05)  # the backoff before the retry is at least 0.1 s
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    route.clock.run(leave())
    assert [(a.outcome, a.decision) for a in route.attempts] == [("error", "cancelled")]


# --- the property ------------------------------------------------------------------------------

FAST_FAILURES = ["500", "529", "reset", "invalid_json", "401", "rate_limit:retry_after=0.5"]
HANGS = [HANG, "late_first_token:delay=120"]


@st.composite
def hangs_before_a_healthy_target(draw: st.DrawFn) -> tuple[list[list[str]], float]:
    """Up to three targets: failures before a healthy target, at least one of them a hang
    (at any position), maybe one more target after it; and the healthy one's latency."""
    before = draw(st.integers(1, 2))
    hang_at = draw(st.integers(0, before - 1))
    scripts = [
        [draw(st.sampled_from(HANGS))]
        if i == hang_at
        else draw(st.lists(st.sampled_from(HANGS + FAST_FAILURES), min_size=3, max_size=3))
        for i in range(before)
    ]
    scripts.append(["ok"])
    if before == 1 and draw(st.booleans()):
        scripts.append([draw(st.sampled_from(HANGS + FAST_FAILURES + ["ok"]))])
    return scripts, draw(st.floats(0.0, 0.2))


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=hangs_before_a_healthy_target(),
    budget=st.floats(3.0, 60.0),
    retries=st.integers(0, 2),
    streamed=st.booleans(),
)
def test_a_healthy_target_after_a_hanging_one_answers_within_the_budget(
    layout: tuple[list[list[str]], float], budget: float, retries: int, streamed: bool
):
    scripts, latency_s = layout
    route = Route(len(scripts), budget_s=budget, primary_retries=retries)
    for position, script in enumerate(scripts):
        route.script(position, *script)
    healthy = scripts.index(["ok"])
    route.fake.latency(MODELS[healthy], fixed_ms=latency_s * 1000)
    if streamed:
        events, elapsed = route.stream()
        assert isinstance(events[-1], MessageEnd)
    else:
        elapsed = route.complete()[1]
    assert elapsed <= budget + SLACK_S
    assert [a.served for a in route.attempts].count(True) == 1
