"""Queue-job semantics: one run is at most one HTTP call per target, and the outcome tells the
queue whether to retry, when, or to give up. The real chain and provider adapters over the
in-process fake providers, on virtual time."""

from __future__ import annotations

import random
import tomllib
from typing import Any

import httpx
import pytest

from engine.config import parse_config
from engine.core.clock import SystemClock, VirtualClock
from engine.core.errors import AllProvidersUnavailable, ConfigError, RequestFailed
from engine.core.messages import Message, Request
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.http import HttpProvider
from engine.providers.openai import OpenAIProvider
from engine.providers.transport import AiohttpTransport
from engine.runtime.jobs import (
    Done,
    Failed,
    JobOutcome,
    JobPolicy,
    RetryLater,
    backoff_s,
    run_job,
    run_job_sync,
)
from engine.runtime.switchover import Switchover
from engine.state.breaker import AccountFailure
from simulations.fakes import FakeProviders, FakeTransport

PRIMARY, BACKUP, THIRD = "claude/claude-sonnet-4-5", "gpt/gpt-4o", "mistral/mistral-large"
ASK = Request(messages=(Message.user("Summarise ticket 4521"),), feature="nightly-digest")
# Breakers that never open, so a test sees the backoff alone.
NO_BREAKER = {"breaker_failures": 10_000, "breaker_min_volume": 10_000}


class Rig:
    """A route of one to three targets (an Anthropic primary, OpenAI-dialect backups) over one
    fake transport; the chain, the providers and the fake share one virtual clock."""

    def __init__(self, targets: int = 2, **policy: Any) -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock)
        providers = [
            AnthropicProvider("claude", base_url="http://anthropic.fake", api_key="k",
                              transport=self.fake, clock=self.clock),
            OpenAIProvider("gpt", base_url="http://openai.fake/v1", api_key="k",
                           transport=self.fake, clock=self.clock),
            OpenAIProvider("mistral", base_url="http://mistral.fake/v1", api_key="k",
                           transport=self.fake, clock=self.clock),
        ]  # fmt: skip
        names = (PRIMARY, BACKUP, THIRD)[:targets]
        self.names = names
        self.chain = Chain(
            "digest",
            [Target(p, model(n)) for p, n in zip(providers, names, strict=False)],
            policy=Policy(**policy),
            clock=self.clock,
            rng=random.Random(7),
        )

    def script(self, target: str, *faults: str) -> None:
        self.fake.script(model(target), faults)

    def all_down(self, fault: str = "529") -> None:
        for name in self.names:
            self.script(name, *[fault] * 50)  # more runs than any test makes

    def job(self, run: int, policy: JobPolicy | None = None, seed: int = 1) -> JobOutcome:
        return self.clock.run(
            run_job(self.chain, ASK, run=run, policy=policy or JobPolicy(), rng=random.Random(seed))
        )

    def calls(self, target: str | None = None) -> int:
        return len(self.fake.calls(model(target) if target else None))


def model(target: str) -> str:
    return target.partition("/")[2]


# --- the three outcomes ----------------------------------------------------------------------


def test_a_healthy_run_is_done_with_one_call():
    rig = Rig()
    outcome = rig.job(run=1)
    assert isinstance(outcome, Done)
    assert outcome.response.provider == "claude" and rig.calls() == 1


def test_a_request_fault_fails_the_job_at_once_with_one_call():
    rig = Rig()
    rig.script(PRIMARY, "400")
    outcome = rig.job(run=1)
    assert isinstance(outcome, Failed) and isinstance(outcome.error, RequestFailed)
    assert "retrying cannot help" in outcome.reason
    assert (rig.calls(PRIMARY), rig.calls(BACKUP)) == (1, 0)


@pytest.mark.parametrize("fault", ["529", "500", "connect_refused", "reset"])
def test_every_provider_down_is_retry_later_after_one_call_per_target(fault):
    rig = Rig(targets=3)
    rig.all_down(fault)
    outcome = rig.job(run=1)
    assert isinstance(outcome, RetryLater)
    assert [rig.calls(t) for t in (PRIMARY, BACKUP, THIRD)] == [1, 1, 1]
    assert "run 2 of 6" in outcome.reason


def test_a_failing_primary_falls_back_within_the_run():
    rig = Rig()
    rig.script(PRIMARY, "500", "ok")
    outcome = rig.job(run=1)
    assert isinstance(outcome, Done) and outcome.response.provider == "gpt"
    assert (rig.calls(PRIMARY), rig.calls(BACKUP)) == (1, 1)


def test_the_primary_is_not_retried_inside_a_run_as_it_is_by_a_plain_complete():
    """The same script costs two primary calls through `chain.complete`, one through a job."""
    plain = Rig()
    plain.script(PRIMARY, "500", "ok")
    assert plain.clock.run(plain.chain.complete(ASK)).provider == "claude"
    assert (plain.calls(PRIMARY), plain.calls(BACKUP)) == (2, 0)
    job = Rig()
    job.script(PRIMARY, "500", "ok")
    job.job(run=1)
    assert (job.calls(PRIMARY), job.calls(BACKUP)) == (1, 1)


def test_a_short_retry_after_is_not_waited_out_inside_a_run():
    rig = Rig(targets=1, max_retry_after_wait_s=2)
    rig.script(PRIMARY, "rate_limit:retry_after=1", "ok")
    outcome = rig.job(run=1, policy=JobPolicy(first_backoff_s=0.1))
    assert isinstance(outcome, RetryLater) and rig.calls() == 1
    assert outcome.after_s == pytest.approx(1)


# --- when to come back -------------------------------------------------------------------------


def test_the_backoff_doubles_run_after_run_within_the_jitter_band_and_is_capped():
    policy = JobPolicy(max_runs=12, first_backoff_s=30, max_backoff_s=1800, jitter=0.2)
    rig = Rig(**NO_BREAKER)
    rig.all_down()
    waits = []
    for run in range(1, 12):
        outcome = rig.job(run, policy, seed=run)
        assert isinstance(outcome, RetryLater)
        waits.append(outcome.after_s)
    for run, wait in enumerate(waits[:6], start=1):  # 30, 60, ... 960: below the cap
        assert 30 * 2 ** (run - 1) * 0.8 <= wait <= 30 * 2 ** (run - 1) * 1.2
    assert all(1800 / 1.2 * 0.8 <= wait <= 1800 for wait in waits[6:])
    assert len(set(waits[6:])) == len(waits[6:])  # jobs at the cap still spread out


def test_the_jitter_band_is_honoured_over_many_draws():
    policy = JobPolicy(first_backoff_s=10, max_backoff_s=100, jitter=0.25)
    rng = random.Random(3)
    first = [backoff_s(policy, 1, rng) for _ in range(2000)]
    capped = [backoff_s(policy, 30, rng) for _ in range(2000)]
    assert 7.5 <= min(first) < 8 and 12 < max(first) <= 12.5
    assert max(capped) <= 100 and min(capped) >= 100 / 1.25 * 0.75


def test_a_long_retry_after_lengthens_the_wait():
    rig = Rig(**NO_BREAKER)
    rig.script(PRIMARY, "rate_limit:retry_after=120")
    rig.script(BACKUP, "529")
    outcome = rig.job(run=1, policy=JobPolicy(first_backoff_s=5))
    assert isinstance(outcome, RetryLater)
    assert outcome.after_s == pytest.approx(120) and "Retry-After" in outcome.reason


def test_a_retry_after_beyond_the_cap_is_capped():
    rig = Rig(targets=1)
    rig.script(PRIMARY, "rate_limit_long")
    outcome = rig.job(run=1, policy=JobPolicy(max_backoff_s=600))
    assert isinstance(outcome, RetryLater) and outcome.after_s == 600
    assert "capped" in outcome.reason


def test_a_breaker_opened_by_the_run_holds_the_next_run_until_it_half_opens():
    rig = Rig(breaker_failures=1, breaker_cooldown_s=90)
    rig.all_down()
    outcome = rig.job(run=1, policy=JobPolicy(first_backoff_s=1))
    assert isinstance(outcome, RetryLater)
    assert outcome.after_s == pytest.approx(90) and "breaker" in outcome.reason


def test_a_run_while_every_breaker_is_open_makes_no_call_and_waits_for_the_soonest():
    rig = Rig(breaker_failures=1, breaker_cooldown_s=60, account_cooldown_s=300)
    rig.script(PRIMARY, "401")  # open for 300 s
    rig.script(BACKUP, "529")  # open for 60 s
    first = rig.job(run=1)
    assert isinstance(first, RetryLater) and first.after_s == pytest.approx(60)
    rig.clock.advance(20)  # a queue that came back early
    outcome = rig.job(run=2, policy=JobPolicy(first_backoff_s=1))
    assert rig.calls() == 2  # none in run 2
    assert isinstance(outcome, RetryLater) and "no paid call was made" in outcome.reason
    assert outcome.after_s == pytest.approx(40)
    rig.clock.advance(outcome.after_s)
    done = rig.job(run=3)
    assert isinstance(done, Done) and done.response.provider == "gpt"


def test_one_admitted_target_is_enough_to_come_back_on_the_backoff():
    rig = Rig(**NO_BREAKER)
    rig.fake.set_default("529")
    rig.clock.run(rig.chain.breakers.record(PRIMARY, AccountFailure(), rig.clock.now()))
    outcome = rig.job(run=1, policy=JobPolicy(first_backoff_s=10))
    assert isinstance(outcome, RetryLater) and outcome.after_s <= 12
    assert (rig.calls(PRIMARY), rig.calls(BACKUP)) == (0, 1)


# --- giving up ---------------------------------------------------------------------------------


def test_the_last_run_fails_the_job():
    rig = Rig()
    rig.all_down()
    outcome = rig.job(run=3, policy=JobPolicy(max_runs=3))
    assert isinstance(outcome, Failed)
    assert isinstance(outcome.error, AllProvidersUnavailable)
    assert "gave up after 3 of 3 runs" in outcome.reason


def test_a_run_past_max_runs_fails_without_a_call():
    rig = Rig()
    outcome = rig.job(run=4, policy=JobPolicy(max_runs=3))
    assert isinstance(outcome, Failed) and outcome.error is None and rig.calls() == 0


@pytest.mark.parametrize(
    "breakers",
    [NO_BREAKER, {"breaker_failures": 2, "breaker_cooldown_s": 30}],
    ids=["breakers_closed", "breakers_opening"],
)
def test_a_queue_loop_never_pays_for_more_than_max_runs_times_targets(breakers):
    """Whether or not the breakers open, every run makes exactly one call per target: none
    more, and none wasted on a run the breakers would have skipped."""
    rig = Rig(targets=3, **breakers)
    rig.fake.set_default("529")
    policy = JobPolicy(max_runs=5, first_backoff_s=1, max_backoff_s=60)
    waits = []
    run, outcome = 1, rig.job(1, policy)
    while isinstance(outcome, RetryLater):
        waits.append(outcome.after_s)
        rig.clock.advance(outcome.after_s)
        run += 1
        outcome = rig.job(run, policy, seed=run)
    assert isinstance(outcome, Failed) and run == 5
    assert rig.calls() == 5 * 3
    if "breaker_cooldown_s" in breakers:  # open after run 2: runs 3 to 5 waited them out
        assert waits[1:] == pytest.approx([30, 30, 30], abs=0.01)


def test_run_is_one_based():
    with pytest.raises(ValueError, match="1-based"):
        Rig().job(run=0)


@pytest.mark.parametrize(
    "fields", [{"max_runs": 0}, {"first_backoff_s": -1}, {"jitter": 1.0}, {"jitter": -0.1}]
)
def test_a_nonsensical_job_policy_is_refused(fields):
    with pytest.raises(ValueError):
        JobPolicy(**fields)


# --- the sync entry point, for workers without an event loop ------------------------------------

CONFIG = """
[providers.claude]
kind = "anthropic"
base_url = "http://anthropic.fake"
api_key_env = "CLAUDE_KEY"
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "GPT_KEY"
[routes.digest]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4o"]
"""


@pytest.fixture
def switchover():
    fake = FakeTransport(clock=SystemClock())
    keys = {"CLAUDE_KEY": "k", "GPT_KEY": "k"}
    sw = Switchover(parse_config(tomllib.loads(CONFIG)), transport=fake, environ=keys)
    yield sw, fake
    sw.close()


def test_run_job_sync_answers_on_the_switchovers_loop(switchover):
    sw, fake = switchover
    outcome = run_job_sync(sw, "digest", "Summarise ticket 4521", run=1, max_tokens=64)
    assert isinstance(outcome, Done) and outcome.response.provider == "claude"
    assert [c.request["max_tokens"] for c in fake.calls()] == [64]


def test_run_job_sync_says_retry_later_after_one_call_per_target(switchover):
    sw, fake = switchover
    fake.set_default("529")
    outcome = run_job_sync(sw, "digest", "Summarise ticket 4521", run=1)
    assert isinstance(outcome, RetryLater) and len(fake.calls()) == 2


def test_an_unknown_route_is_not_a_job_outcome(switchover):
    sw, _ = switchover
    with pytest.raises(ConfigError):
        run_job_sync(sw, "no-such-route", "hi", run=1)


# --- the HTTP clients under the providers retry nothing ----------------------------------------


@pytest.mark.parametrize("transport", [AiohttpTransport, httpx.AsyncHTTPTransport])
@pytest.mark.parametrize("fault", ["reset", "reset:mode=fin", "500", "529"])
async def test_the_http_clients_send_a_failed_post_once_over_real_sockets(transport, fault):
    """A reset on a reused keep-alive connection is what aiohttp replays for idempotent methods;
    the providers POST, so a failed attempt is one request on the wire, whatever the transport."""
    async with FakeProviders(port=0) as fake:
        provider: HttpProvider = AnthropicProvider(
            "claude",
            base_url=fake.anthropic_url,
            api_key="k",
            transport=transport(),
        )
        chain = Chain("digest", [Target(provider, "claude-sonnet-4-5")])
        try:
            assert isinstance(await run_job(chain, ASK, run=1), Done)  # warms a connection
            fake.script("claude-sonnet-4-5", [fault])
            assert isinstance(await run_job(chain, ASK, run=1), RetryLater)
        finally:
            await provider.aclose()
        assert len(fake.calls("claude-sonnet-4-5")) == 2
