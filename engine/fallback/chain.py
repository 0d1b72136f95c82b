"""The fallback chain: targets in order, one total deadline, a decision after every failure.

Call path, one concern per layer:
    Chain.complete / Chain.stream   the loop: deadline, order, retry / fall back / fail fast
    RequestRun.attempt_*            one HTTP attempt: timing, commit, breaker, recording
    Provider.complete / .stream     wire format (engine/providers)
    httpx                           transport

The chain imports no storage: every attempt goes to the registered hooks as a frozen
`Attempt`, and a hook that raises never fails the request. Time comes from the injected clock,
so tests and the simulator run this very code on virtual time.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engine.behaviours.contracts import OutputContract
from engine.behaviours.pii import PiiPolicy, mask_request, restore_response
from engine.core.clock import Clock, SystemClock
from engine.core.errors import (
    AccountFault,
    AllProvidersUnavailable,
    AttemptError,
    DrillFault,
    LocalFault,
    RateLimited,
    RequestFailed,
    RequestFault,
)
from engine.core.messages import Request, Response, StreamEvent
from engine.core.scrub import Scrubber
from engine.fallback.context_windows import (
    CONTEXT_OVERFLOW,
    larger_window_ahead,
    too_narrow,
    window_of,
)
from engine.fallback.continuation import continued_stream
from engine.fallback.policy import Policy, backoff_s, too_little
from engine.fallback.run import AttemptHook, RequestRun
from engine.fallback.shaping import Arranger, restore_events
from engine.fallback.target import Target
from engine.state.breaker import (
    Admission,
    BreakerStore,
    DrillOver,
    MemoryBreakerStore,
)

log = logging.getLogger("switchover.chain")


@dataclass(frozen=True, slots=True)
class ChainEvent:
    """Something an operator must hear about at once, beyond the attempt record: a credential
    failure, or a request that failed with every provider unavailable (`causes`: the targets
    that failed or were skipped)."""

    kind: Literal["credential_failure", "all_unavailable"]
    route: str
    target: str
    error_class: str
    message: str
    at: datetime
    request_id: str | None = None
    causes: tuple[str, ...] = ()


# A hook may be a coroutine function: the chain awaits it before it goes on (or raises).
EventHook = Callable[[ChainEvent], Awaitable[None] | None]


# A context overflow passed to a later target with a larger window (catalogue row 2).
FALL_BACK_LARGER_CONTEXT = "fall_back_larger_context"

_SKIP_REASONS = {
    Admission.REJECT_OPEN: "breaker open",
    Admission.REJECT_PROBING: "breaker half-open, probe in flight",
    Admission.REJECT_COOLING: "cooling down after a rate limit",
}


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
    ) -> None:
        """`order`: arranges the targets per request (adaptive order, operator switches);
        None keeps them as given. `pii`: mask personal data before any target sees it.
        `contract`: the JSON Schema answers must meet; an answer that breaks it (or a tool's
        schema) is recorded as a quality error, and with `fall_back_on_quality` retried once
        and then passed to the next target. `model_from_caller`: the caller named this model,
        the configuration did not (a direct target), so a provider's "no such model" is the
        caller's mistake (fail fast), not a broken account to alert on. `continue_streams`: a
        stream that fails after its first content is finished by a later target that can
        continue it (`on_stream_failure = "continue"`, engine.fallback.continuation)."""
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
        self.continue_streams = continue_streams

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
        # Closed here, not left to the event loop's async-generator finalizer, which wakes
        # the loop through its self-pipe once per request.
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
        policy = self.policy
        if budget_s is not None and 0 < budget_s < policy.budget_s:
            policy = policy.replace(budget_s=budget_s)
        if primary_retries is not None and 0 <= primary_retries < policy.primary_retries:
            policy = policy.replace(primary_retries=primary_retries)
        masker = None
        if self.pii is not None:  # above the loop: every target gets the same masked request
            request, masker = mask_request(request, self.pii)
        run = RequestRun(
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
        )
        restore = (
            masker if masker is not None and self.pii is not None and self.pii.restore else None
        )
        targets = self.targets
        if self.order is not None:
            targets = tuple(await self.order.arrange(self.route, self.targets))
            run.drills = dict(await self.order.drills(self.route))
        overflowed: int | None = None  # a context window the request is known to overflow
        for depth, target in enumerate(targets):
            narrow = too_narrow(target, overflowed) if overflowed is not None else None
            if narrow is not None:
                run.skipped.append((target.name, narrow))
                continue
            if too_little(run.remaining(), policy):
                run.skipped.append((target.name, "time budget too small"))
                run.deadline_hit = True
                continue
            admission, breaker_state = await self._admit(target, run)
            if admission in _SKIP_REASONS:
                run.skipped.append((target.name, _SKIP_REASONS[admission]))
                continue
            tries = 1 + (policy.primary_retries if depth == 0 else 0)
            for done in range(1, tries + 1):
                try:
                    backups_left = depth < len(targets) - 1
                    if streaming:
                        events = self._stream_attempt(
                            run, targets, depth, breaker_state, backups_left=backups_left
                        )
                        if restore is not None:
                            events = restore_events(events, restore)
                        async with aclosing(events):
                            async for event in events:
                                yield event
                        return
                    response = await run.attempt_complete(
                        target, depth, breaker_state, backups_left=backups_left
                    )
                    yield response if restore is None else restore_response(response, restore)
                    return
                except AttemptError as caught:
                    retry_state, decision = await self._failed(
                        run, caught, target, targets[depth + 1 :], retries_left=tries - done
                    )
                    if decision == FALL_BACK_LARGER_CONTEXT:
                        overflowed = window_of(target)
                    if retry_state is None:
                        break
                    breaker_state = retry_state
        if not run.attempts:
            state = (await self.breakers.snapshot(targets[0].name)).status
            run.unsent(targets[0], state)
        failure = AllProvidersUnavailable(
            tuple(run.errors),
            tuple(run.attempts),
            skipped=tuple(run.skipped),
            deadline_exceeded=run.deadline_hit,
        )
        causes = dict.fromkeys([a.target for a in run.attempts] + [n for n, _ in run.skipped])
        await self._announce(ChainEvent("all_unavailable", self.route, targets[0].name,
                                        "all_unavailable", str(failure), self.clock.wall(),
                                        run.request_id, tuple(causes)))  # fmt: skip
        raise failure

    def _stream_attempt(
        self,
        run: RequestRun,
        targets: Sequence[Target],
        depth: int,
        breaker_state: str,
        *,
        backups_left: bool,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed attempt on `targets[depth]`; on a route that continues failed streams,
        with the continuation on later targets should it fail after its first content."""
        if not self.continue_streams:
            return run.attempt_stream(
                targets[depth], depth, breaker_state, backups_left=backups_left
            )
        return continued_stream(
            run, targets, depth, breaker_state,
            backups_left=backups_left, admit=self._admit, alert=self._emit,
        )  # fmt: skip

    def _callers_mistake(self, error: AttemptError) -> AttemptError:
        """On a direct target, the provider's 404 for the model is the caller's error."""
        if not (self.model_from_caller and error.error_class == "model_not_found"):
            return error
        return RequestFault(
            error.error_class,
            error.message,
            status=error.status,
            error_type=error.error_type,
            error_code=error.error_code,
            provider_request_id=error.provider_request_id,
        )

    async def _after_drill(
        self, target: Target, admission: Admission, run: RequestRun
    ) -> tuple[Admission, str]:
        """A breaker a fault drill held open, once the drill is over (ended early, say): let
        the probe through now rather than at the drill's planned end."""
        if self.order is None:  # no switches, so no drill: the breaker is open for real
            return admission, "open"
        if (await self.breakers.snapshot(target.name)).open_reason != "drill":
            return admission, "open"
        await self.breakers.record(target.name, DrillOver(), run.now())
        return await self.breakers.admit(target.name, run.now())

    async def _failed(
        self,
        run: RequestRun,
        caught: AttemptError,
        target: Target,
        later: Sequence[Target],
        *,
        retries_left: int,
    ) -> tuple[str | None, str]:
        """Decide what follows a failed attempt, wait for a retry, record the attempt with the
        decision taken, and raise when the request fails fast. Returns the breaker state the
        retry begins with (None: move on to `later`) and the decision."""
        error = self._callers_mistake(caught)
        await run.report(error)
        # A failure that opened the breaker (or failed its probe) ends this target: no backoff
        # is slept for a retry the breaker would refuse.
        if (await self.breakers.snapshot(target.name)).status == "open":
            retries_left = 0
        wait, decision = self._next_step(
            run, error, retries_left=retries_left, target=target, later=later
        )
        retry_state = None
        if wait is not None:  # recorded once the retry is sure to begin
            retry_state = await self._retry_admitted(run, target, error, wait, last=not later)
            if retry_state is None:
                decision = _move_on(last=not later)
        run.failed(error, decision)
        if decision == "fail_fast":
            raise RequestFailed(error, tuple(run.attempts)) from error
        if isinstance(error, AccountFault) and not isinstance(error, DrillFault):
            await self._emit(target, error)
        return retry_state, decision

    async def _admit(self, target: Target, run: RequestRun) -> tuple[Admission, str]:
        admission, breaker_state = await self.breakers.admit(target.name, run.now())
        if admission is Admission.REJECT_OPEN and target.name not in run.drills:
            admission, breaker_state = await self._after_drill(target, admission, run)
        return admission, breaker_state

    def _next_step(
        self,
        run: RequestRun,
        error: AttemptError,
        *,
        retries_left: int,
        target: Target,
        later: Sequence[Target],
    ) -> tuple[float | None, str]:
        """What follows a failed attempt: the seconds to wait before retrying the same target
        (None: move on) and the decision's name, recorded on the attempt."""
        last = not later
        move_on = _move_on(last=last)
        if isinstance(error, RequestFault | LocalFault):
            # The request's fault fails everywhere, except a context overflow on a target
            # with a larger window (catalogue row 2); targets no larger are skipped.
            if error.error_class == CONTEXT_OVERFLOW and larger_window_ahead(target, later):
                return None, FALL_BACK_LARGER_CONTEXT
            return None, "fail_fast"
        if isinstance(error, AccountFault):
            return None, "give_up" if last else "fall_back_now"
        if retries_left <= 0:
            return None, move_on
        if isinstance(error, RateLimited):
            wait = error.retry_after_s
            if wait is None or wait > self.policy.max_retry_after_wait_s:
                return None, move_on
            decision = "wait_and_retry"
        elif not error.retry_same:
            return None, move_on
        else:
            overloaded = error.error_class == "overloaded"
            wait = backoff_s(self.policy, retry_number=1, rng=self.rng, overloaded=overloaded)
            decision = "retry"
        # Never sleep past the deadline, and while backups remain never into their reserve: a
        # retry that would not have its minimum there is a fallback now (a timeout that used
        # the primary's share, say).
        if not run.retry_fits(run.now() + wait, backups_left=not last):
            return None, move_on
        return wait, decision

    async def _retry_admitted(
        self, run: RequestRun, target: Target, error: AttemptError, wait: float, *, last: bool
    ) -> str | None:
        """Sleep the backoff, then let the retry decided on begin: the breaker state it begins
        with, or None when it cannot after all (a real clock slept past the line, another
        request opened the breaker meanwhile). The failed attempt is recorded after this, so
        that it names the decision taken, never a retry that did not run."""
        try:
            await self.clock.sleep(wait)
        except BaseException as exc:  # the caller went away during the backoff
            cancelled = isinstance(exc, asyncio.CancelledError)
            run.failed(error, "cancelled" if cancelled else _move_on(last=last))
            raise
        if not run.retry_fits(run.now(), backups_left=not last):
            return None
        admission, breaker_state = await self._admit(target, run)
        return None if admission in _SKIP_REASONS else breaker_state

    async def _emit(self, target: Target, error: AttemptError) -> None:
        event = ChainEvent(
            "credential_failure",
            self.route,
            target.name,
            error.error_class,
            error.message,
            self.clock.wall(),
        )
        log.warning(
            "credential or account failure on %s (route %s): %s %s",
            target.name,
            self.route,
            error.error_class,
            error.message,
        )
        await self._announce(event)

    async def _announce(self, event: ChainEvent) -> None:
        for hook in self.event_hooks:
            try:
                done = hook(event)
                if inspect.isawaitable(done):
                    await done
            except Exception:
                log.exception("event hook %r failed; the request goes on", hook)


def _move_on(*, last: bool) -> str:
    """The decision recorded when the chain leaves a target for the next, or the last."""
    return "give_up" if last else "fall_back"
