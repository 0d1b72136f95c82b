"""One LLM call inside a queued job (Celery, RQ, arq, a cron), with the queue doing the retrying.

Retries multiply: a job retried 3 times × a chain that retries its primary × an HTTP client
that retries too turns one job into a dozen paid calls. Here the job queue's retry is the only
one: each run calls the chain with `primary_retries=0` (the engine's HTTP clients retry
nothing: httpx's default transport has `retries=0`, and aiohttp replays only idempotent methods
on a dropped keep-alive connection, never our POSTs), so one run makes at most one HTTP call
per target, and a job at most `max_runs` × targets.

    outcome = await run_job(chain, request, run=queue_retries + 1)
    Done(response)            answered
    RetryLater(after_s, ...)  every target unavailable: run the job again in `after_s` seconds
    Failed(reason, error)     the request's fault, or `max_runs` reached: fail the job now

Never sleeps and never re-enqueues: waiting is the queue's business. Anything that is not a
verdict on this request (ConfigError, a bug, a cancellation) propagates unchanged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.errors import AllProvidersUnavailable, ChainError, RequestFailed
from engine.runtime.switchover import Prompt, Switchover, request_of

if TYPE_CHECKING:
    from engine.core.messages import Request, Response
    from engine.fallback.chain import Chain

__all__ = [
    "Done",
    "Failed",
    "JobOutcome",
    "JobPolicy",
    "RetryLater",
    "backoff_s",
    "next_run_after_s",
    "run_job",
    "run_job_sync",
]


@dataclass(frozen=True, slots=True)
class JobPolicy:
    max_runs: int = 6  # the job's runs in total, the first included
    first_backoff_s: float = 30.0  # wait before the 2nd run; doubles each run
    max_backoff_s: float = 1800.0
    jitter: float = 0.2  # ± share of the backoff, so a queue's jobs do not come back together

    def __post_init__(self) -> None:
        if self.max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        if self.first_backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("backoffs must not be negative")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")


DEFAULT_POLICY = JobPolicy()


@dataclass(frozen=True, slots=True)
class Done:
    response: Response


@dataclass(frozen=True, slots=True)
class RetryLater:
    """Every provider was unavailable: run the job again in `after_s` seconds."""

    after_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    """Fail the job now. `error` is None only when the run was past `max_runs` and not sent."""

    reason: str
    error: ChainError | None


JobOutcome = Done | RetryLater | Failed


async def run_job(
    chain: Chain,
    request: Request,
    *,
    run: int,
    policy: JobPolicy = DEFAULT_POLICY,
    rng: random.Random | None = None,
) -> JobOutcome:
    """Run `request` once through `chain` as run number `run` (1-based: the queue's retry
    count + 1) of a job, and say what the queue should do next. `rng` (default: the chain's)
    draws the jitter."""
    if run < 1:
        raise ValueError(f"run is 1-based (got {run})")
    if run > policy.max_runs:
        # A queue whose own retry limit is higher than ours must not buy more calls.
        return Failed(f"run {run} is past max_runs={policy.max_runs}; nothing was sent", None)
    try:
        # The queue's retry replaces the chain's same-target retry; backups are still tried.
        response = await chain.complete(request, primary_retries=0)
    except RequestFailed as error:
        return Failed(f"{error} (the request's fault: retrying cannot help)", error)
    except AllProvidersUnavailable as error:
        if run >= policy.max_runs:
            return Failed(f"{error} (gave up after {run} of {policy.max_runs} runs)", error)
        blocked_s = await _until_a_target_admits(chain)
        after_s, why = next_run_after_s(
            policy,
            run,
            rng or chain.rng,
            retry_after_s=max((e.retry_after_s or 0.0 for e in error.errors), default=0.0),
            blocked_s=blocked_s,
        )
        unsent = "" if error.errors else "; no paid call was made: every target was skipped"
        reason = f"{error}{unsent}; run {run + 1} of {policy.max_runs} in {after_s:.0f} s ({why})"
        return RetryLater(after_s, reason)
    return Done(response)


def run_job_sync(
    switchover: Switchover,
    route: str,
    prompt: Prompt,
    *,
    run: int,
    policy: JobPolicy = DEFAULT_POLICY,
    rng: random.Random | None = None,
    **request_fields: Any,
) -> JobOutcome:
    """`run_job` for workers without an event loop (Celery, RQ): on the Switchover's private
    loop thread, like `complete_sync`, so the job's calls share its pooled connections."""

    async def job() -> JobOutcome:
        # Looked up on the loop, as `Switchover.complete` does: a ConfigError (unknown route)
        # propagates from here.
        chain = switchover.chain(route)
        request = request_of(prompt, request_fields)
        return await run_job(chain, request, run=run, policy=policy, rng=rng)

    return switchover.run_sync(job())


def backoff_s(policy: JobPolicy, run: int, rng: random.Random) -> float:
    """The jittered exponential wait after failed run `run`: first_backoff_s × 2^(run-1),
    ± jitter, never above max_backoff_s."""
    # The band is centred low enough that its top is the cap, so jobs that reached the cap
    # still spread over the band instead of all coming back at exactly max_backoff_s.
    ceiling = policy.max_backoff_s / (1 + policy.jitter)
    centre = min(policy.first_backoff_s * 2.0 ** min(run - 1, 64), ceiling)
    return centre * (1 + policy.jitter * rng.uniform(-1.0, 1.0))


def next_run_after_s(
    policy: JobPolicy, run: int, rng: random.Random, *, retry_after_s: float, blocked_s: float
) -> tuple[float, str]:
    """Seconds until the next run, and what set them: the backoff, unless a provider asked for
    longer (Retry-After) or no target will be admitted sooner (breaker open, cooling down); a
    run before then would be skipped without a call and waste one of `max_runs`."""
    waits = {
        "backoff": backoff_s(policy, run, rng),
        "Retry-After": retry_after_s,
        "every target's breaker open or cooling down": blocked_s,
    }
    why = max(waits, key=waits.__getitem__)
    if waits[why] > policy.max_backoff_s:
        return policy.max_backoff_s, f"{why}, capped at max_backoff_s"
    return waits[why], why


async def _until_a_target_admits(chain: Chain) -> float:
    """Seconds until the first of the chain's targets can be called again; 0 when one can now.
    Breaker times are on the chain's clock."""
    now = chain.clock.now()
    waits = []
    for target in chain.targets:
        state = await chain.breakers.snapshot(target.name)
        until = now
        if state.status == "open" and state.open_until is not None:
            until = max(until, state.open_until)
        if state.cooling_until is not None:
            until = max(until, state.cooling_until)
        waits.append(until - now)
    return min(waits)
