"""A streamed attempt: one provider stream read for a `RequestRun`, whose public methods it uses
(composition: the run keeps the deadline and the records, this module reads the stream).

Nothing reaches the caller before the first content event (until then a failure falls back
invisibly); the first token and the silences after it are timed by the chain's own limits; a
failure after the commit is reported in-band (`StreamError`) and the stream ends incomplete, or,
on a route that continues failed streams, raised as `CommittedFailure` for
`engine.fallback.continuation`; a caller who stops reading cancels the attempt. The answer is
judged against the route's contract at its end (engine.behaviours.quality): it can only be
recorded, the caller holds it already.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.behaviours.quality import StreamedAnswer, judge
from engine.core import classify
from engine.core.attempt import Attempt, Step
from engine.core.errors import AttemptError, RateLimited
from engine.core.messages import (
    Message,
    MessageEnd,
    Request,
    StreamError,
    StreamEvent,
    StreamStart,
    Text,
    TextDelta,
    Usage,
    UsageUpdate,
    is_content,
)
from engine.fallback.admission import Admitted
from engine.fallback.policy import too_little
from engine.fallback.run import RequestRun, internal_error

if TYPE_CHECKING:
    from engine.fallback.target import Target

__all__ = ["CommittedFailure", "Resume", "attempt_stream", "stream_error"]

log = logging.getLogger("switchover.chain")


@dataclass(frozen=True, slots=True)
class Resume:
    """What a continuation attempt is sent beyond the request: the answer so far as a final
    assistant message, without its trailing whitespace (the Anthropic API refuses a prefill
    that ends in it); the attempt it continues and the characters the caller holds (recorded);
    the output tokens so far, taken off the request's `max_tokens`."""

    text: str
    attempt: int
    chars: int
    output_tokens: int = 0

    def request(self, request: Request) -> Request:
        messages = list(request.messages)
        last = messages[-1]
        # Text only whitespace is no prefill (the API refuses an empty one): a fresh answer
        # then follows what the caller holds.
        if self.text and last.role == "assistant":  # the caller prefilled: go on from theirs
            content = last.content
            if content and isinstance(content[-1], Text):
                content = (*content[:-1], Text(content[-1].text + self.text))
            else:
                content = (*content, Text(self.text))
            messages[-1] = Message("assistant", content)
        elif self.text:
            messages.append(Message.assistant(self.text))
        limit = request.max_tokens
        if limit is not None:  # the caller's limit is for the whole answer
            limit = max(1, limit - self.output_tokens)
        return request.replace(messages=tuple(messages), max_tokens=limit)


class CommittedFailure(Exception):
    """A continuable stream (`attempt_stream(continuable=True)`) failed after its commit. The
    attempt is still under way, neither reported to its breaker nor recorded:
    `engine.fallback.continuation` decides what follows and records it with that decision."""

    def __init__(self, error: AttemptError, ttft_ms: float, usage: Usage) -> None:
        super().__init__(error.message)
        self.error = error
        self.ttft_ms = ttft_ms
        self.usage = usage


async def attempt_stream(
    run: RequestRun,
    target: Target,
    depth: int,
    admitted: Admitted,
    *,
    backups_left: bool = False,
    continuable: bool = False,
    resume: Resume | None = None,
) -> AsyncIterator[StreamEvent]:
    """`continuable`: a failure after the commit is raised as `CommittedFailure`, neither
    reported nor recorded. `resume`: this attempt continues an answer the caller holds part of
    (sent as a final assistant message)."""
    continues = None if resume is None else (resume.attempt, resume.chars)
    flight = run.begin(target, depth, admitted, continues=continues)
    reading = _Reading.open(run, target, resume, backups_left, continuable)
    handed_to_chain = False
    try:
        while True:
            event = await reading.next()
            if reading.ttft_ms is None:
                opening = reading.commit(event, flight.started, depth)
                if opening is None:
                    continue  # held until the answer is committed
                for early in opening:
                    yield early
            if isinstance(event, MessageEnd):
                yield await reading.end(event)
                return
            yield event
    except AttemptError as error:
        if reading.ttft_ms is None:
            handed_to_chain = True  # the chain records it with the decision it takes
            raise  # not committed: the chain falls back, invisibly to the caller
        if continuable:  # engine.fallback.continuation goes on elsewhere, or reports it in-band
            handed_to_chain = True
            raise CommittedFailure(error, reading.ttft_ms, reading.usage) from error
        # Committed: the caller already holds part of this answer, and no fallback can
        # splice another model's answer onto it. Report in-band; the stream ends incomplete.
        await run.report(error)
        run.failed(
            error, Step.IN_BAND_ERROR, ttft_ms=reading.ttft_ms, usage=reading.usage, served=True
        )
        yield stream_error(error, run.attempts)
    finally:
        if run.current is flight and not handed_to_chain:  # the caller went away
            await run.cancelled(
                served=reading.ttft_ms is not None, usage=reading.usage, ttft_ms=reading.ttft_ms
            )
        await _close_quietly(reading.events)


class _Reading:
    """What one streamed attempt has read: the usage last reported, the answer gathered for
    judging at the end (if anything will judge it), the events held until the commit, and the
    time to the first content once it came."""

    def __init__(
        self,
        run: RequestRun,
        target: Target,
        events: AsyncIterator[StreamEvent],
        request: Request,
        answer: StreamedAnswer | None,
        backups_left: bool,
        continuable: bool,
    ) -> None:
        self.run, self.target, self.events = run, target, events
        self.request, self.answer, self.backups_left = request, answer, backups_left
        self.continuable = continuable
        self.usage = Usage()
        self.held: list[StreamEvent] = []
        self.ttft_ms: float | None = None

    @classmethod
    def open(
        cls,
        run: RequestRun,
        target: Target,
        resume: Resume | None,
        backups_left: bool,
        continuable: bool = False,
    ) -> _Reading:
        """The stream the target is asked for (a continuation: with the answer so far as the
        final assistant message), not yet read; the answer to gather for judging, if anything
        will judge it (a continued one whole: the caller's part too)."""
        request = run.request_for(target)
        if resume is not None:
            request = resume.request(request)
        answer = StreamedAnswer() if run.contract is not None or request.tools else None
        if answer is not None and resume is not None:
            answer.add(TextDelta(resume.text))
        # The chain's own first-token and idle limits bound the stream; httpx's read timeout
        # only has to outlast them.
        timeout_s = max(run.remaining(), run.policy.idle_timeout_s)
        events = target.provider.stream(request, target.model, timeout_s=timeout_s)
        return cls(run, target, events, request, answer, backups_left, continuable)

    async def next(self) -> StreamEvent:
        event = await self._next_event()
        if isinstance(event, UsageUpdate | MessageEnd):
            self.usage = event.usage
        if self.answer is not None:
            self.answer.add(event)
        return event

    def commit(self, event: StreamEvent, started: float, depth: int) -> list[StreamEvent] | None:
        """What the caller gets first when `event` commits the answer (its start, then the
        events held until now), or None when it does not: `event` is held."""
        if not (is_content(event) or isinstance(event, MessageEnd)):
            self.held.append(event)
            return None
        run, target = self.run, self.target
        self.ttft_ms = (run.now() - started) * 1000
        start = StreamStart(
            run.route, target.provider.name, target.model, depth, len(run.attempts) + 1
        )
        return [start, *self.held]

    async def end(self, event: MessageEnd) -> MessageEnd:
        """The caller's last event, once the answer is judged and recorded as served."""
        quality = None
        if self.answer is not None:
            full = self.answer.response(event, self.usage)
            quality = judge(full, self.request, self.run.contract, fall_back=False)
        await self.run.succeeded(
            self.usage,
            ttft_ms=self.ttft_ms,
            provider_request_id=event.provider_request_id,
            quality_error=quality,
            unreadable_events=event.unreadable_events,
        )
        return MessageEnd(
            event.stop_reason,
            event.usage,
            event.model or self.target.model,
            event.provider_request_id,
            tuple(self.run.attempts),
            event.unreadable_events,
        )

    async def _next_event(self) -> StreamEvent:
        run, events, committed = self.run, self.events, self.ttft_ms is not None
        if committed:
            limit = self._idle_limit()
        else:
            limit = min(run.first_token_s(self.target), run.usable(self.backups_left))
        try:
            async with run.clock.timeout(limit):
                return await anext(events)
        except StopAsyncIteration:
            raise classify.stream_fault(
                "stream_cut",
                "stream cut: the stream ended without its final event",
                status=_status(events),
            ) from None
        except TimeoutError:
            raise self._stalled(limit) from None
        except AttemptError:
            raise
        except Exception as exc:
            raise internal_error(run.current.target if run.current else None, exc) from exc

    def _idle_limit(self) -> float:
        """The silence allowed after the first content. A stream that may be continued stops
        waiting at its attempt's end (the reserve line while backups remain) as long as that
        is ahead, so that the continuation has the backups' share rather than what a 30 s idle
        limit in a 30 s budget leaves (issue 35, failoverbench S09); past it, or with nothing
        to continue on, the idle limit alone: a committed stream is never cut by the budget."""
        idle = self.run.policy.idle_timeout_s
        if not (self.continuable and self.backups_left):
            return idle
        before_line = self.run.usable(backups_left=True)
        return min(idle, before_line) if not too_little(before_line, self.run.policy) else idle

    def _stalled(self, limit: float) -> AttemptError:
        """No event within `limit`: out of budget, or a stall, said with when it happened."""
        committed, status = self.ttft_ms is not None, _status(self.events)
        if not committed and self.run.remaining() <= 0:
            error = self.run.out_of_time(limit)
            error.status = status
            return error
        if committed:
            phase = "after the first content"
        elif status is None and hasattr(self.events, "http_status"):
            phase = "before the response headers"
        else:
            phase = "before the first content"
        return classify.stream_fault(
            "stream_stalled",
            f"stream stalled: no stream event for {limit:g} s {phase}",
            status=status,
        )


def stream_error(error: AttemptError, attempts: Sequence[Attempt]) -> StreamError:
    """The in-band event that tells the caller how its committed stream failed."""
    return StreamError(
        error.error_class, error.message, _anthropic_error_type(error), tuple(attempts)
    )


def _status(events: AsyncIterator[StreamEvent]) -> int | None:
    """The provider's HTTP status, None until its status line arrived: a stream that never got
    its headers records no status (and a provider that is no HTTP server never says one)."""
    return getattr(events, "http_status", None)


def _anthropic_error_type(error: AttemptError) -> str:
    """The Anthropic error type a caller of either dialect can act on."""
    if isinstance(error, RateLimited):
        return "rate_limit_error"
    if error.error_class == "overloaded":
        return "overloaded_error"
    if error.error_class in ("read_timeout", "timeout", "stream_stalled"):
        return "timeout_error"
    return (
        error.error_type
        if error.error_type and error.error_type.endswith("_error")
        else ("api_error")
    )


async def _close_quietly(events: AsyncIterator[StreamEvent]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.debug("closing a provider stream failed", exc_info=True)
