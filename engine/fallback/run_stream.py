"""A streamed attempt: the part of `engine.fallback.run.RequestRun` that reads a provider's stream.

Nothing reaches the caller before the first content event (until then a failure falls back
invisibly); the first token and the silences after it are timed by the chain's own limits; a
failure after the commit is reported in-band (`StreamError`) and the stream ends incomplete, or,
on a route that continues failed streams, raised for `engine.fallback.continuation`; a caller
who stops reading cancels the attempt. The answer is judged against the route's contract at its
end (engine.behaviours.quality): it can only be recorded, the caller holds it already.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from engine.behaviours.quality import StreamedAnswer, judge
from engine.core import classify
from engine.core.errors import AttemptError, RateLimited
from engine.core.messages import (
    MessageEnd,
    Request,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    Usage,
    UsageUpdate,
    is_content,
)
from engine.fallback.continuation import CommittedFailure, Resume

if TYPE_CHECKING:
    from engine.fallback.target import Target

log = logging.getLogger("switchover.chain")


class StreamingAttempts:
    """Mixed into `RequestRun`, whose state and recording methods it uses."""

    async def attempt_stream(
        self,
        target: Target,
        depth: int,
        breaker_state: str,
        *,
        backups_left: bool = False,
        continuable: bool = False,
        resume: Resume | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`continuable`: a failure after the commit is raised as `CommittedFailure`, neither
        reported nor recorded, for engine.fallback.continuation to decide on. `resume`: this attempt
        continues an answer the caller holds part of (sent as a final assistant message)."""
        continues = None if resume is None else (resume.attempt, resume.chars)
        flight = self._begin(target, depth, breaker_state, continues=continues)
        self._backups_left = backups_left
        # The chain's own first-token and idle limits bound the stream; httpx's read timeout
        # only has to outlast them.
        timeout_s = max(self.remaining(), self.policy.idle_timeout_s)
        request, answer = self._stream_request(target, resume)
        events = target.provider.stream(request, target.model, timeout_s=timeout_s)
        held: list[StreamEvent] = []  # usage and the like, held until the answer is committed
        ttft_ms: float | None = None
        usage = Usage()
        handed_to_chain = False
        try:
            self._drill_check(target)
            while True:
                event = await self._next_event(events, committed=ttft_ms is not None)
                if isinstance(event, UsageUpdate | MessageEnd):
                    usage = event.usage
                if answer is not None:
                    answer.add(event)
                if ttft_ms is None:
                    if not (is_content(event) or isinstance(event, MessageEnd)):
                        held.append(event)
                        continue
                    ttft_ms = (self.now() - flight.started) * 1000
                    yield StreamStart(
                        self.route,
                        target.provider.name,
                        target.model,
                        depth,
                        len(self.attempts) + 1,
                    )
                    for earlier in held:
                        yield earlier
                if isinstance(event, MessageEnd):
                    quality = None
                    if answer is not None:
                        full = answer.response(event, usage)
                        quality = judge(full, request, self.contract, fall_back=False)
                    await self._succeeded(
                        usage,
                        ttft_ms=ttft_ms,
                        provider_request_id=event.provider_request_id,
                        quality_error=quality,
                        unreadable_events=event.unreadable_events,
                    )
                    yield MessageEnd(
                        event.stop_reason,
                        event.usage,
                        event.model or target.model,
                        event.provider_request_id,
                        tuple(self.attempts),
                        event.unreadable_events,
                    )
                    return
                yield event
        except AttemptError as error:
            if ttft_ms is None:
                handed_to_chain = True  # the chain records it with the decision it takes
                raise  # not committed: the chain falls back, invisibly to the caller
            if continuable:  # engine.fallback.continuation goes on elsewhere, or reports it in-band
                handed_to_chain = True
                raise CommittedFailure(error, ttft_ms, usage) from error
            # Committed: the caller already holds part of this answer, and no fallback can
            # splice another model's answer onto it. Report in-band; the stream ends incomplete.
            await self.report(error)
            self.failed(error, "in_band_error", ttft_ms=ttft_ms, usage=usage, served=True)
            yield self.stream_error(error)
        finally:
            if self.current is flight and not handed_to_chain:  # the caller went away
                await self._cancelled(served=ttft_ms is not None, usage=usage, ttft_ms=ttft_ms)
            await _close_quietly(events)

    def _stream_request(
        self, target: Target, resume: Resume | None
    ) -> tuple[Request, StreamedAnswer | None]:
        """What the target is sent (a continuation: with the answer so far as the final
        assistant message), and the answer to gather for judging at the end, if anything will
        judge it (a continued one whole: the caller's part too)."""
        request = self._request_for(target)
        if resume is not None:
            request = resume.request(request)
        answer = StreamedAnswer() if self.contract is not None or request.tools else None
        if answer is not None and resume is not None:
            answer.add(TextDelta(resume.text))
        return request, answer

    def stream_error(self, error: AttemptError) -> StreamError:
        """The in-band event that tells the caller how its committed stream failed."""
        return StreamError(
            error.error_class, error.message, _anthropic_error_type(error), tuple(self.attempts)
        )

    async def _next_event(
        self, events: AsyncIterator[StreamEvent], *, committed: bool
    ) -> StreamEvent:
        if committed:
            limit = self.policy.idle_timeout_s
        else:
            limit = min(self.policy.first_token_timeout_s, self.usable(self._backups_left))
        try:
            async with self.clock.timeout(limit):
                return await anext(events)
        except StopAsyncIteration:
            raise classify.stream_fault(
                "stream_cut",
                "stream cut: the stream ended without its final event",
                status=_status(events),
            ) from None
        except TimeoutError:
            status = _status(events)
            if not committed and self.remaining() <= 0:
                error = self._out_of_time(limit)
                error.status = status
                raise error from None
            if committed:
                phase = "after the first content"
            elif status is None and hasattr(events, "http_status"):
                phase = "before the response headers"
            else:
                phase = "before the first content"
            raise classify.stream_fault(
                "stream_stalled",
                f"stream stalled: no stream event for {limit:g} s {phase}",
                status=status,
            ) from None
        except AttemptError:
            raise
        except Exception as exc:
            raise internal_error(self.current.target if self.current else None, exc) from exc


def _status(events: AsyncIterator[StreamEvent]) -> int | None:
    """The provider's HTTP status, None until its status line arrived: a stream that never got
    its headers records no status (and a provider that is no HTTP server never says one)."""
    return getattr(events, "http_status", None)


def internal_error(target: Target | None, exc: Exception) -> AttemptError:
    """A bug on our side of one provider (say, an answer shape the codec did not expect) must
    not fail a request that a backup can serve: log it loudly, treat it as a provider fault."""
    log.exception("unexpected error talking to %s", target.name if target else "a provider")
    return classify.classify_exception(exc, sent=True)


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
