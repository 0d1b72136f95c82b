"""The fallback chain: targets in order, one total deadline, a decision after every failure.

Call path, one concern per layer:
    Chain.complete / Chain.stream   the loop: deadline, order, retry / fall back / fail fast
    Gate.admit                      may this target be tried now: breaker, fault drills
    RequestRun.attempt_complete,    one HTTP attempt: timing, commit, breaker, recording
      run_stream.attempt_stream
    Provider.complete / .stream     wire format (engine/providers)
    httpx                           transport

What follows a failure is read from the error's own decision (`engine.fallback.steps`). A
target passed over (disabled, its breaker, a window too small, too little time left) is
recorded with its reason on the request's attempts (`RequestRun.pass_over`). The chain imports
no storage: every attempt goes to the registered hooks as a frozen `Attempt`, and a hook that
raises never fails the request. Time comes from the injected clock, so tests and the simulator
run this very code on virtual time.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing

from engine.behaviours.contracts import OutputContract
from engine.behaviours.pii import Masker, PiiPolicy, mask_request, restore_response
from engine.behaviours.pii_stream import restore_events
from engine.core.attempt import Step
from engine.core.clock import Clock, SystemClock
from engine.core.errors import AllProvidersUnavailable, AttemptError, RequestFailed
from engine.core.messages import Request, Response, StreamEvent
from engine.core.scrub import Scrubber
from engine.core.skips import SkipReason
from engine.fallback.admission import Admitted, Gate
from engine.fallback.context_windows import raised_bar, too_narrow
from engine.fallback.continuation import continued_stream
from engine.fallback.events import (
    ChainEvent,
    EventHook,
    RequestHook,
    all_unavailable,
    announce,
    credential_failure,
    finishing,
)
from engine.fallback.learned_limits import LearnedLimits
from engine.fallback.order import Arranger
from engine.fallback.poison import ChargedContent
from engine.fallback.policy import Policy, too_little
from engine.fallback.run import AttemptHook, RequestRun
from engine.fallback.run_stream import attempt_stream
from engine.fallback.steps import callers_mistake, move_on, next_step
from engine.fallback.target import Target
from engine.state.breaker import BreakerStore, MemoryBreakerStore

__all__ = ["Chain", "ChainEvent", "EventHook"]


class Chain:
    def __init__(
        self,
        route: str,
        targets: Sequence[Target],
        *,
        policy: Policy | None = None,
        breakers: BreakerStore | None = None,
        clock: Clock | None = None,
        hooks: Sequence[AttemptHook] = (),
        event_hooks: Sequence[EventHook] = (),
        rng: random.Random | None = None,
        order: Arranger | None = None,
        pii: PiiPolicy | None = None,
        contract: OutputContract | None = None,
        fall_back_on_quality: bool = False,
        model_from_caller: bool = False,
        scrub: Scrubber | None = None,
        continue_streams: bool = False,
        request_hooks: Sequence[RequestHook] = (),
        first_token_limits: LearnedLimits | None = None,
    ) -> None:
        """`order`: arranges the targets per request (adaptive order, operator switches);
        None keeps them as given. `pii`: mask personal data before any target sees it.
        `contract`: the JSON Schema answers must meet; an answer that breaks it (or a tool's
        schema) is a quality error, with `fall_back_on_quality` retried once, then passed on.
        `model_from_caller`: the caller named this model (a direct target), so a provider's
        "no such model" is the caller's mistake (fail fast), not a broken account. Streams that
        fail after their first content are finished elsewhere with `continue_streams`
        (engine.fallback.continuation); `first_token_limits` are learned per target
        (engine.fallback.learned_limits); `request_hooks` hear how each request ended."""
        if not targets:
            raise ValueError(f"route {route!r} needs at least one target")
        self.route = route
        self.targets = tuple(targets)
        self.policy = policy or Policy()
        self.clock = clock or SystemClock()
        self.breakers = breakers or MemoryBreakerStore(self.policy.breaker_policy())
        self.hooks: list[AttemptHook] = list(hooks)
        self.event_hooks: list[EventHook] = list(event_hooks)
        self.rng = rng or random.Random()
        self.order = order
        self.pii = pii
        self.contract = contract
        self.fall_back_on_quality = fall_back_on_quality
        self.model_from_caller = model_from_caller
        self.scrub = scrub or Scrubber()  # the providers' keys, to keep out of error texts
        self.charged = ChargedContent(self.policy.breaker_window_s)  # engine.fallback.poison
        self.first_token_limits = first_token_limits
        self.continue_streams = continue_streams
        self.request_hooks: list[RequestHook] = list(request_hooks)

    async def complete(
        self,
        request: Request,
        *,
        request_id: str | None = None,
        budget_s: float | None = None,
        primary_retries: int | None = None,
    ) -> Response:
        """Answer `request`, or raise RequestFailed / AllProvidersUnavailable. `budget_s` can
        only shorten the route's budget (a caller that will give up sooner, say), and
        `primary_retries` only lower the policy's (a job queue that retries the job itself)."""
        # Closed here, not by the loop's async-generator finalizer (a self-pipe wake each).
        async with aclosing(
            self._run(
                request.replace(stream=False),
                request_id,
                streaming=False,
                budget_s=budget_s,
                primary_retries=primary_retries,
            )
        ) as items:
            async for item in items:
                assert isinstance(item, Response)
                return item
        raise AssertionError("the chain loop ended without an answer or an error")

    async def stream(
        self,
        request: Request,
        *,
        request_id: str | None = None,
        budget_s: float | None = None,
        primary_retries: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Yield StreamStart, then the answer's events, then MessageEnd, or StreamError when
        the committed target fails (the stream then ends incomplete). Before the first content
        event a failure falls back invisibly; failing everywhere raises like `complete`."""
        # aclosing: a caller that stops reading ends the attempt (recorded as cancelled, the
        # HTTP response and any half-open probe released) now, not whenever the GC gets to it.
        async with aclosing(
            self._run(
                request.replace(stream=True),
                request_id,
                streaming=True,
                budget_s=budget_s,
                primary_retries=primary_retries,
            )
        ) as items:
            async for item in items:
                assert not isinstance(item, Response)
                yield item

    # --- the loop ------------------------------------------------------------------------

    async def _run(
        self,
        request: Request,
        request_id: str | None,
        *,
        streaming: bool,
        budget_s: float | None = None,
        primary_retries: int | None = None,
    ) -> AsyncIterator[Response | StreamEvent]:
        policy = self.policy.for_caller(budget_s, primary_retries)
        request, masker = self._masked(request)
        run = self._new_run(request, request_id, policy, masker)
        restore = masker if self.pii is not None and self.pii.restore else None
        with finishing(self.request_hooks, run):
            targets, gate = await self._arranged(run)
            overflowed: int | None = None  # a context window the request is known to overflow
            for depth, target in enumerate(targets):
                admitted = await self._admitted(run, gate, target, depth, overflowed)
                if admitted is None:
                    continue
                tries = 1 + (policy.primary_retries if depth == 0 else 0)
                for done in range(1, tries + 1):
                    try:
                        if streaming:
                            events = self._events(run, gate, targets, depth, admitted, restore)
                            async with aclosing(events):
                                async for event in events:
                                    yield event
                        else:
                            yield await self._answer(run, targets, depth, admitted, restore)
                        return
                    except AttemptError as caught:
                        later, left = targets[depth + 1 :], tries - done
                        retry, step = await self._failed(
                            run, gate, caught, target, later, retries_left=left
                        )
                        if step is Step.FALL_BACK_LARGER_CONTEXT:
                            overflowed = raised_bar(overflowed, target)
                        if retry is None:
                            break
                        admitted = retry
            await self._unavailable(run, targets)

    def _masked(self, request: Request) -> tuple[Request, Masker | None]:
        """Above the loop: every target gets the same masked request."""
        if self.pii is None:
            return request, None
        return mask_request(request, self.pii)

    def _new_run(
        self, request: Request, request_id: str | None, policy: Policy, masker: Masker | None
    ) -> RequestRun:
        return RequestRun(
            self.route,
            request,
            request_id or uuid.uuid4().hex,
            policy,
            self.clock,
            self.breakers,
            self.hooks,
            pii_masked=masker.count if masker is not None else 0,
            contract=self.contract,
            fall_back_on_quality=self.fall_back_on_quality,
            scrub=self.scrub,
            charged=self.charged,
            first_token_limits=self.first_token_limits,
        )

    async def _arranged(self, run: RequestRun) -> tuple[tuple[Target, ...], Gate]:
        """This request's targets in order (adaptive order, operator switches; the ones an
        operator disabled, left out, recorded as passed over) and the gate that admits them,
        with the route's fault drills."""
        if self.order is None:  # no switches, so no drills
            return self.targets, Gate(self.breakers, self.clock)
        targets = tuple(await self.order.arrange(self.route, self.targets))
        for left_out in (t for t in self.targets if t not in targets):
            run.pass_over(left_out, None, SkipReason.DISABLED)
        drills = dict(await self.order.drills(self.route))
        return targets, Gate(self.breakers, self.clock, drills)

    async def _admitted(
        self, run: RequestRun, gate: Gate, target: Target, depth: int, overflowed: int | None
    ) -> Admitted | None:
        """Whether `target` is tried at all; when it is passed over, why is recorded: a window
        no larger than one the request overflowed, too little budget left, or its breaker."""
        narrow = too_narrow(target, overflowed) if overflowed is not None else None
        if narrow is not None:
            run.pass_over(target, depth, SkipReason.CONTEXT_TOO_SMALL, narrow)
            return None
        if too_little(run.remaining(), run.policy):
            run.pass_over(target, depth, SkipReason.NO_BUDGET)
            run.deadline_hit = True
            return None
        admitted = await gate.admit(target)
        if admitted.skip is not None:
            run.pass_over(target, depth, admitted.skip)
            return None
        return admitted

    async def _answer(
        self,
        run: RequestRun,
        targets: Sequence[Target],
        depth: int,
        admitted: Admitted,
        restore: Masker | None,
    ) -> Response:
        """One attempt on `targets[depth]` for a whole answer, the caller's data put back."""
        response = await run.attempt_complete(
            targets[depth], depth, admitted, backups_left=depth < len(targets) - 1
        )
        return response if restore is None else restore_response(response, restore)

    def _events(
        self,
        run: RequestRun,
        gate: Gate,
        targets: Sequence[Target],
        depth: int,
        admitted: Admitted,
        restore: Masker | None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed attempt on `targets[depth]`, the caller's data put back; on a route
        that continues failed streams, with the continuation on later targets should it fail
        after its first content."""
        backups_left = depth < len(targets) - 1
        if self.continue_streams:
            events = continued_stream(
                run,
                targets,
                depth,
                admitted,
                backups_left=backups_left,
                admit=gate.admit,
                alert=self._alert,
            )
        else:
            events = attempt_stream(run, targets[depth], depth, admitted, backups_left=backups_left)
        return events if restore is None else restore_events(events, restore)

    # --- after a failure -----------------------------------------------------------------

    async def _failed(
        self,
        run: RequestRun,
        gate: Gate,
        caught: AttemptError,
        target: Target,
        later: Sequence[Target],
        *,
        retries_left: int,
    ) -> tuple[Admitted | None, Step]:
        """Decide what follows a failed attempt, wait for a retry, record the attempt with the
        step taken, and raise when the request fails fast. Returns the admission the retry
        begins with (None: move on to `later`) and the step."""
        error = callers_mistake(caught) if self.model_from_caller else caught
        await run.report(error)
        # A failure that opened the breaker (or failed its probe) ends this target: no backoff
        # is slept for a retry the breaker would refuse.
        if (await self.breakers.snapshot(target.name)).status == "open":
            retries_left = 0
        wait, step = next_step(
            error,
            target=target,
            later=later,
            retries_left=retries_left,
            policy=run.policy,
            rng=self.rng,
        )
        retry = None
        if wait is not None:  # recorded once the retry is sure to begin
            retry = await self._retry_admitted(run, gate, target, error, wait, last=not later)
            if retry is None:
                step = move_on(last=not later)
        # Held while later targets remain: the ones passed over after it go on its record.
        run.failed(error, step, hold=bool(later))
        if step is Step.FAIL_FAST:
            raise RequestFailed(error, tuple(run.attempts)) from error
        if error.credential_alert:
            await self._alert(target, error)
        return retry, step

    async def _retry_admitted(
        self,
        run: RequestRun,
        gate: Gate,
        target: Target,
        error: AttemptError,
        wait: float,
        *,
        last: bool,
    ) -> Admitted | None:
        """Sleep the backoff, then let the retry decided on begin: its admission, or None when
        it cannot after all (a real clock slept past the line, another request opened the
        breaker meanwhile). The failed attempt is recorded after this, so that it names the
        step taken, never a retry that did not run."""
        # Never sleep past the deadline, and while backups remain never into their reserve: a
        # retry that would not have its minimum there is a fallback now (a timeout that used
        # the primary's share, say).
        if not run.budget.retry_fits(run.now() + wait, backups_left=not last):
            return None
        try:
            await self.clock.sleep(wait)
        except BaseException as exc:  # the caller went away during the backoff
            cancelled = isinstance(exc, asyncio.CancelledError)
            run.failed(error, Step.CANCELLED if cancelled else move_on(last=last))
            raise
        if not run.budget.retry_fits(run.now(), backups_left=not last):
            return None
        admitted = await gate.admit(target)
        return None if admitted.skip is not None else admitted

    async def _unavailable(self, run: RequestRun, targets: Sequence[Target]) -> None:
        """Every target failed or was skipped: record a request that made no call at all (or the
        targets passed over after its last call), tell the operator, and raise."""
        run.finish()
        if not run.attempts:
            state = (await self.breakers.snapshot(targets[0].name)).status
            run.unsent(targets[0], state)
        failure = AllProvidersUnavailable(
            tuple(run.errors),
            tuple(run.attempts),
            skipped=tuple(run.skipped),
            deadline_exceeded=run.deadline_hit,
            suspected_request=run.suspected_request,
        )
        at = self.clock.wall()
        event = all_unavailable(self.route, targets[0].name, failure, at, run.request_id)
        await announce(self.event_hooks, event)
        raise failure

    async def _alert(self, target: Target, error: AttemptError) -> None:
        event = credential_failure(self.route, target.name, error, self.clock.wall())
        await announce(self.event_hooks, event)
