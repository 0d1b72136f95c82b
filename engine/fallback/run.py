"""One request's pass through the chain, attempt by attempt.

`RequestRun` holds the request's deadline and runs each HTTP attempt: timing, the per-attempt
time limit, the breaker bookkeeping, a drilled target's made-up invalid key (`Admitted.drill`,
raised in place of the call), the answer judged against the route's contract, and one frozen
`Attempt` per call handed to the hooks. A streamed attempt, with its commit on the first content
event, is `engine.fallback.run_stream`'s, built on this module's public methods (`begin`,
`succeeded`, `report`, `failed`, `cancelled`). Which target to try next, and whether to wait, is
the chain's business (`engine.fallback.chain`), not this module's.

A target the chain passes over without a call (`pass_over`) is no attempt: it goes on the
records nearest it (`engine.fallback.records`); a failure the chain moves on from is held
(`failed(..., hold=True)`) until the next attempt begins or the request ends (`finish`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from engine.behaviours.contracts import OutputContract
from engine.behaviours.quality import judge
from engine.core.attempt import Attempt, Outcome, Step
from engine.core.clock import Clock
from engine.core.errors import AmbiguousFault, AttemptError, LocalFault, QualityFault
from engine.core.messages import Request, Response, Usage
from engine.core.scrub import Scrubber
from engine.core.skips import SkipReason
from engine.fallback.admission import Admitted
from engine.fallback.learned_limits import LearnedLimits
from engine.fallback.poison import ChargedContent, Evidence, RequestEvidence
from engine.fallback.policy import Budget, Policy
from engine.fallback.records import AttemptHook, Records, failure_fields
from engine.providers.transport_faults import classify_exception
from engine.state.breaker import BreakerStore, ProviderFailure, Released, Success, event_for

if TYPE_CHECKING:
    from engine.fallback.target import Target

log = logging.getLogger("switchover.chain")


@dataclass(frozen=True, slots=True)
class _InFlight:
    target: Target
    depth: int
    breaker_state: str
    started: float
    started_wall: datetime
    ended: float | None = None  # set when the failure is reported, before the breaker I/O
    # A continuation (engine.fallback.continuation): the attempt it picks up from, and the
    # characters of the answer the caller held when it began.
    continues: tuple[int, int] | None = None


@dataclass
class RequestRun:
    """One request's pass through the chain: its deadline and everything it attempted."""

    route: str
    request: Request
    request_id: str
    policy: Policy
    clock: Clock
    breakers: BreakerStore
    hooks: Sequence[AttemptHook]
    attempts: list[Attempt] = field(default_factory=list)  # the calls made (`Records`)
    errors: list[AttemptError] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # what the failure names
    deadline_hit: bool = False
    current: _InFlight | None = None  # the attempt under way, until it is recorded
    pii_masked: int = 0  # personal data masked in the request, recorded on every attempt
    contract: OutputContract | None = None  # what answers must meet (engine.behaviours.quality)
    fall_back_on_quality: bool = False
    # Error texts are scrubbed of keys and quoted request text before anything keeps them.
    scrub: Scrubber = field(default_factory=Scrubber)
    # The chain's memory of the contents that charged its breakers (engine.fallback.poison).
    charged: ChargedContent | None = None
    # The route's learned first-token limits (engine.fallback.learned_limits), if it learns.
    first_token_limits: LearnedLimits | None = None

    def __post_init__(self) -> None:
        self.budget = Budget(self.policy, self.clock.now() + self.policy.budget_s)
        self.records = Records(self.hooks, self.attempts, self.skipped)
        self.evidence = (
            None if self.charged is None else RequestEvidence(self.charged, self.request)
        )

    def now(self) -> float:
        return self.clock.now()

    def remaining(self) -> float:
        return self.budget.deadline - self.clock.now()

    def begin(
        self,
        target: Target,
        depth: int,
        admitted: Admitted,
        continues: tuple[int, int] | None = None,
    ) -> _InFlight:
        """Start the attempt on `target` that `admitted` let in. A target under a fault drill
        fails here, before any call, as an invalid key would."""
        self.records.release()
        self.current = _InFlight(
            target,
            depth,
            admitted.breaker_state,
            self.now(),
            self.clock.wall(),
            continues=continues,
        )
        if self.budget.first_call is None:
            self.budget.first_call = self.current.started
        if admitted.drill is not None:
            raise admitted.drill
        return self.current

    def first_token_s(self, target: Target) -> float:
        """How long a stream on `target` may wait for its first content (before the attempt's
        end caps it): the route's limit, or what the target's history taught, when lower."""
        static, limits = self.policy.first_token_timeout_s, self.first_token_limits
        return static if limits is None else limits.first_token_s(target.name, static)

    def usable(self, backups_left: bool) -> float:
        """What the attempt under way may still spend: until its end (`Budget.attempt_end`)."""
        flight = self.current
        started, depth = (flight.started, flight.depth) if flight else (self.now(), 0)
        return self.budget.attempt_end(started, depth, backups_left) - self.now()

    # --- attempts ------------------------------------------------------------------------

    async def attempt_complete(
        self, target: Target, depth: int, admitted: Admitted, *, backups_left: bool = False
    ) -> Response:
        self.begin(target, depth, admitted)
        limit = min(self.usable(backups_left), self.policy.attempt_timeout_s)
        request = self.request_for(target)
        try:
            async with self.clock.timeout(limit):
                response = await target.provider.complete(request, target.model, timeout_s=limit)
        except TimeoutError as exc:
            raise self.out_of_time(limit) from exc
        except asyncio.CancelledError:
            await self.cancelled(served=False)
            raise
        except AttemptError:
            raise
        except Exception as exc:
            raise internal_error(target, exc) from exc
        quality = judge(response, request, self.contract, fall_back=self.fall_back_on_quality)
        await self.succeeded(
            response.usage,
            ttft_ms=None,
            provider_request_id=response.provider_request_id,
            quality_error=quality,
        )
        return response.replace(
            provider=target.provider.name,
            route=self.route,
            attempts=tuple(self.attempts),
            fallback_depth=depth,
            quality_error=quality,
        )

    def out_of_time(self, limit: float) -> AttemptError:
        """The attempt's time limit passed: the budget's end, or the attempt's own share."""
        error = classify_exception(TimeoutError(), sent=True)
        if self.remaining() <= 0:
            error.message = f"the time budget of {self.policy.budget_s:g} s ran out"
        else:
            error.message = f"no answer within the attempt's {limit:.3g} s"
        return error

    def request_for(self, target: Target) -> Request:
        """What this target is sent: the (masked) request, in the target's own prompt. Nothing
        has been sent if this fails: our fault (a LocalFault), never the provider's."""
        if target.prompt is None:
            return self.request
        try:
            return target.prompt.apply(self.request)
        except Exception as exc:
            log.exception("applying prompt %s for %s failed", target.prompt.label, target.name)
            raise LocalFault.internal(f"prompt {target.prompt.label}: {exc!r}") from exc

    # --- recording -----------------------------------------------------------------------

    async def succeeded(
        self,
        usage: Usage,
        *,
        ttft_ms: float | None,
        provider_request_id: str | None,
        quality_error: str | None = None,
        unreadable_events: int = 0,
    ) -> None:
        flight = self._take()
        await self._charge_held()
        await self.breakers.record(flight.target.name, Success(), self.now())
        self._record(
            flight,
            outcome="success",
            decision=Step.SERVED,
            served=True,
            usage=usage,
            ttft_ms=ttft_ms,
            provider_request_id=provider_request_id,
            quality_error=quality_error,
            unreadable_events=unreadable_events,
        )

    async def report(self, error: AttemptError) -> None:
        """Tell the breaker how the attempt under way failed. The chain does so before it
        decides what follows: a failure that opened the breaker leaves nothing to retry. A
        provider failure that says nothing new of the target (engine.fallback.poison) releases
        it instead; a probe's failure is its verdict, whatever the content."""
        assert self.current is not None, "no attempt under way"
        self.current = flight = dataclasses.replace(self.current, ended=self.now())
        event = event_for(error) or Released()
        evidence = self.evidence if flight.breaker_state == "closed" else None
        if isinstance(event, ProviderFailure) and evidence is not None:
            if evidence.judge(flight.target.name, error, self.now()) is not Evidence.NEW:
                event = Released()
            else:
                await self._charge_held()
        elif not isinstance(event, Released):
            await self._charge_held()
        await self.breakers.record(flight.target.name, event, self.now())

    @property
    def suspected_request(self) -> bool:
        """Whether targets repeated the request's first failure, and nothing else followed."""
        return self.evidence is not None and bool(self.evidence.held)

    async def _charge_held(self) -> None:
        """The request met something other than its first failure again (an answer, another
        failure): the targets that repeated it were at fault after all, and are charged."""
        for name in self.evidence.release_held() if self.evidence is not None else ():
            await self.breakers.record(name, ProviderFailure(), self.now())

    def failed(
        self,
        error: AttemptError,
        decision: Step,
        *,
        ttft_ms: float | None = None,
        usage: Usage | None = None,
        served: bool = False,
        tokens_estimated: bool = False,
        hold: bool = False,
    ) -> None:
        """Record the attempt under way as failed (the breaker was told by `report`), with
        the decision the chain took. `tokens_estimated`: `usage` is partly an estimate.
        `hold`: the chain goes on to later targets; the record waits for what follows it."""
        flight = self._take()
        # In place: the chain's log line, the caller's exception and the record all read it.
        error.message = self.scrub.error_text(error.message, self.request)
        self.errors.append(error)
        estimated = usage is None and isinstance(error, AmbiguousFault) and error.sent
        quality = isinstance(error, QualityFault)
        if quality:  # the answer came, and was billed; it broke the contract
            usage = error.usage
        if estimated:  # the provider may have done, and billed, the work: price the prompt
            usage = Usage(input_tokens=self.request.estimated_input_tokens())
        self._record(
            flight,
            outcome="error",
            decision=decision,
            served=served,
            usage=usage or Usage(),
            ttft_ms=ttft_ms,
            error=error,
            provider_request_id=error.provider_request_id,
            tokens_estimated=estimated or tokens_estimated,
            quality_error=error.message if quality else None,
            hold=hold,
        )

    async def cancelled(
        self, *, served: bool, usage: Usage | None = None, ttft_ms: float | None = None
    ) -> None:
        """The caller went away. A stream abandoned midway keeps the usage seen so far: the
        provider bills what it generated, and that is wasted spend."""
        flight = self._take()
        await self.breakers.record(flight.target.name, Released(), self.now())
        self._record(
            flight,
            outcome="cancelled",
            decision=Step.CANCELLED,
            served=served,
            usage=usage or Usage(),
            ttft_ms=ttft_ms,
        )

    def unsent(self, target: Target, breaker_state: str) -> None:
        """Record a request that ended without any attempt, every target skipped: one row to
        the hooks (outcome "skipped", no HTTP call, no tokens) so that telemetry counts it as
        unavailable and the Explorer finds it; the caller's attempts stay empty."""
        if self.attempts:
            return
        now, wall = self.now(), self.clock.wall()
        flight = _InFlight(target, 0, breaker_state, now, wall, ended=now)
        reasons = "; ".join(f"{name}: {why}" for name, why in self.skipped)
        kind = "no_budget" if self.deadline_hit else "all_skipped"
        why = (kind, reasons or "every target was skipped")
        self._record(
            flight,
            outcome="skipped",
            decision=Step.GIVE_UP,
            served=False,
            usage=Usage(),
            ttft_ms=None,
            skipped=why,
        )

    def pass_over(
        self, target: Target, depth: int | None, reason: SkipReason, detail: str | None = None
    ) -> None:
        """`target` is passed over without a call (`Records.pass_over`)."""
        self.records.pass_over(target.name, depth, reason, detail)

    def finish(self) -> None:
        """The request is over: the record held for what followed it goes to the hooks."""
        self.records.finish()

    def _take(self) -> _InFlight:
        flight, self.current = self.current, None
        assert flight is not None, "an attempt was recorded twice"
        return flight

    def _record(
        self,
        flight: _InFlight,
        *,
        outcome: Outcome,
        decision: Step,
        served: bool,
        usage: Usage,
        ttft_ms: float | None,
        error: AttemptError | None = None,
        provider_request_id: str | None = None,
        tokens_estimated: bool = False,
        skipped: tuple[str, str] | None = None,  # (class, message) of an unsent request
        quality_error: str | None = None,
        unreadable_events: int = 0,
        hold: bool = False,
    ) -> None:
        target = flight.target
        skips = self.records.next_skips()
        attempt = Attempt(
            request_id=self.request_id,
            attempt_number=len(self.attempts) + 1,
            route=self.route,
            target=target.name,
            provider=target.provider.name,
            provider_kind=target.provider.kind,
            model=target.model,
            key_kind=target.key_kind,
            process_id=os.getpid(),
            started_at=flight.started_wall,
            latency_ms=((flight.ended or self.now()) - flight.started) * 1000,
            ttft_ms=ttft_ms,
            streamed=self.request.stream,
            outcome=outcome,
            decision=decision,
            **failure_fields(error, skipped, outcome),
            breaker_state=flight.breaker_state,
            served=served,
            fallback_depth=flight.depth,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            feature=self.request.feature,
            key_label=self.request.key_label,
            provider_request_id=provider_request_id,
            tokens_estimated=tokens_estimated,
            pii_masked=self.pii_masked,
            prompt_version=target.prompt.label if target.prompt is not None else None,
            quality_error=quality_error,
            unreadable_events=unreadable_events,
            continues_attempt=flight.continues[0] if flight.continues else None,
            continued_chars=flight.continues[1] if flight.continues else None,
            skips=skips,
        )
        self.records.add(attempt, hold=hold)


def internal_error(target: Target | None, exc: Exception) -> AttemptError:
    """A bug on our side of one provider (say, an answer shape the codec did not expect) must
    not fail a request that a backup can serve: log it loudly, treat it as a provider fault."""
    log.exception("unexpected error talking to %s", target.name if target else "a provider")
    return classify_exception(exc, sent=True)
