"""Mid-stream continuation: a committed stream that fails is finished by a later target.

A route with `on_stream_failure = "continue"` streams through `continued_stream`. Until the first
content it is the plain streamed attempt (a failure falls back unseen, in `engine.fallback.chain`).
After
the commit, a provider-side failure (a cut, a stall, an in-band error event) no longer ends the
caller's stream if the answer so far is text: the next target that continues a final assistant
message (`supports_continuation`) is sent the same request with the text the caller holds as
that message, and its text deltas are appended to the caller's stream. The caller sees one
stream: one StreamStart, the deltas of every part, one MessageEnd whose usage is the sum of the
parts' recorded usage.

    the caller holds           the failure            what follows
    text only                  any provider fault     the next capable target, admitted by
                                                      its breaker, with budget left, continues
    a tool call's deltas       any                    the in-band error, as without the option
    a continuation refused     before its content     the next capable target; never shown
    (a prefill 400, a 529)                            to the caller
    nothing left to try                               the in-band error of the FIRST failure

Records: the attempt whose text was continued is `continue_elsewhere` (served: the caller got
its text); a continuation carries `continues_attempt` (the attempt it picks up from) and
`continued_chars` (the characters the caller held); a refused one is `fall_back`, or
`give_up` when no capable target follows. Each attempt is priced by its own usage; the part a
continuation carried on whose usage never arrived (an OpenAI stream sends it last) is estimated
from its text and prompt, and flagged `tokens_estimated`.

Never here: choosing the order of the route's targets, the decisions before the commit, any
storage. This module only goes on from where a committed stream broke.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.core.attempt import Attempt, Step
from engine.core.errors import AttemptError
from engine.core.messages import (
    MessageEnd,
    Request,
    StreamEvent,
    StreamStart,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from engine.core.skips import SkipReason
from engine.fallback.admission import Admitted
from engine.fallback.policy import too_little
from engine.fallback.run import RequestRun
from engine.fallback.run_stream import CommittedFailure, Resume, attempt_stream, stream_error

if TYPE_CHECKING:
    from engine.fallback.target import Target

__all__ = [
    "CONTINUE_ELSEWHERE",
    "continued_parts",
    "continued_stream",
    "supports_continuation",
]

# The decision recorded on an attempt whose committed text another target went on with.
CONTINUE_ELSEWHERE = Step.CONTINUE_ELSEWHERE
# Characters a token, as the fakes and `Request.estimated_input_tokens` count: enough to price
# the text of a part whose usage never came, flagged as an estimate.
_CHARS_PER_TOKEN = 4

Admit = Callable[["Target"], Awaitable[Admitted]]
Alert = Callable[["Target", AttemptError], Awaitable[None]]


def supports_continuation(target: Target) -> bool:
    """Whether the target continues a final assistant message (assistant prefill): as the
    configuration says (`supports_prefill` of its provider), else by kind: the Anthropic
    Messages API does, an OpenAI-compatible server only where declared."""
    if target.prefill is not None:
        return target.prefill
    return target.provider.kind == "anthropic"


@dataclass
class _Held:
    """What the caller holds of the answer: its text, whether a tool call began, the summed
    usage of the parts recorded so far, and the characters of the part under way."""

    text: str = ""
    tool_calls: bool = False
    usage: Usage = dataclasses.field(default_factory=Usage)
    part_chars: int = 0

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.text += event.text
            self.part_chars += len(event.text)
        elif isinstance(event, ToolCallStart | ToolCallDelta):
            self.tool_calls = True


async def continued_stream(
    run: RequestRun,
    targets: Sequence[Target],
    depth: int,
    admitted: Admitted,
    *,
    backups_left: bool,
    admit: Admit,
    alert: Alert,
) -> AsyncIterator[StreamEvent]:
    """The stream of `targets[depth]`, finished by the later targets that can continue it
    when it fails after its first content. A failure before the commit is raised, as the plain
    attempt raises it, for the chain to fall back. `admit` is the chain's own admission
    (`engine.fallback.admission`); `alert` its credential alert, for a continuation's 401."""
    held = _Held()
    events = attempt_stream(
        run, targets[depth], depth, admitted, backups_left=backups_left, continuable=True
    )
    try:
        async with aclosing(events):
            async for event in events:
                held.add(event)
                yield event
        return
    except CommittedFailure as failure:
        first = failure
    await run.report(first.error)
    later = [(i, t) for i, t in enumerate(targets) if i > depth and supports_continuation(t)]
    async with aclosing(_go_on(run, first, held, later, admit, alert)) as rest:
        async for event in rest:
            yield event


async def _go_on(
    run: RequestRun,
    first: CommittedFailure,
    held: _Held,
    later: list[tuple[int, Target]],
    admit: Admit,
    alert: Alert,
) -> AsyncIterator[StreamEvent]:
    """After the committed failure `first`: continuations until one ends the answer, or the
    in-band error that names `first`. `pending` is a committed part not yet recorded: its
    decision depends on whether a continuation begins."""
    pending: CommittedFailure | None = first
    continues = 0  # the attempt number of the last part recorded as continued
    try:
        while True:
            found = None if held.tool_calls else await _next_admitted(run, later, admit)
            if found is None:
                if pending is not None:
                    _record_part(run, pending, held, Step.IN_BAND_ERROR, estimate=False)
                    pending = None
                yield stream_error(first.error, run.attempts)
                return
            index, target, admitted = found
            if pending is not None:
                _record_part(run, pending, held, CONTINUE_ELSEWHERE, estimate=True)
                pending = None
                continues = run.attempts[-1].attempt_number
            prefill = held.text.rstrip()
            resume = Resume(prefill, continues, len(held.text), held.usage.output_tokens)
            joint = _Joint(held.text[len(prefill) :], held.usage)
            held.part_chars = 0
            events = attempt_stream(
                run,
                target,
                index,
                admitted,
                backups_left=bool(later),
                continuable=True,
                resume=resume,
            )
            try:
                async with aclosing(events):
                    async for event in events:
                        joined = joint.convert(event)
                        if joined is not None:
                            held.add(joined)
                            yield joined
                return
            except CommittedFailure as failure:  # this part broke too: go on from here
                await run.report(failure.error)
                pending = failure
            except AttemptError as error:  # refused before its first content: never shown
                await run.report(error)
                run.failed(error, Step.FALL_BACK if later else Step.GIVE_UP)
                if error.credential_alert:
                    await alert(target, error)
    finally:
        if pending is not None:  # the caller went away while a continuation was sought
            _record_part(run, pending, held, Step.CANCELLED, estimate=False)


async def _next_admitted(
    run: RequestRun, later: list[tuple[int, Target]], admit: Admit
) -> tuple[int, Target, Admitted] | None:
    """The next capable target with budget left whose breaker lets it through (taken off
    `later`, as the ones passed over are, each recorded with why), or None."""
    while later:
        index, target = later.pop(0)
        if too_little(run.remaining(), run.policy):  # the budget only shrinks: none has more
            for i, t in [(index, target), *later]:
                run.pass_over(t, i, SkipReason.NO_BUDGET)
            later.clear()
            return None
        admitted = await admit(target)
        if admitted.skip is None:
            return index, target, admitted
        run.pass_over(target, index, admitted.skip)
    return None


def _record_part(
    run: RequestRun, part: CommittedFailure, held: _Held, decision: Step, *, estimate: bool
) -> None:
    """Record the committed part under way as failed with `decision`. A part that is carried
    on (`estimate`) is priced for the work the provider did, when its usage never arrived."""
    usage, estimated = part.usage, False
    if estimate:
        usage, estimated = _billed(part.usage, held.part_chars, run.request)
    run.failed(
        part.error,
        decision,
        ttft_ms=part.ttft_ms,
        usage=usage,
        served=True,
        tokens_estimated=estimated,
    )
    held.usage = _plus(held.usage, usage)


def _billed(seen: Usage, chars: int, request: Request) -> tuple[Usage, bool]:
    """The usage of a part cut before its usage arrived: at least its text's tokens out, and
    its prompt in when no input was reported; whether anything was estimated."""
    output = max(seen.output_tokens, math.ceil(chars / _CHARS_PER_TOKEN))
    estimated = output > seen.output_tokens
    usage = dataclasses.replace(seen, output_tokens=output)
    if seen.total_input_tokens == 0:
        usage = dataclasses.replace(usage, input_tokens=request.estimated_input_tokens())
        estimated = True
    return usage, estimated


class _Joint:
    """A continuation's events as the rest of the caller's stream: no second StreamStart,
    the whitespace the caller holds but the prefill left out not repeated at the start of the
    text, usage counted on from the parts before."""

    def __init__(self, held_whitespace: str, base: Usage) -> None:
        self._tail = held_whitespace
        self._base = base

    def convert(self, event: StreamEvent) -> StreamEvent | None:
        if isinstance(event, StreamStart):
            return None
        if isinstance(event, TextDelta):
            text = self._trim(event.text)
            return TextDelta(text) if text else None
        if isinstance(event, ToolCallStart | ToolCallDelta):
            self._tail = ""
            return event
        if isinstance(event, UsageUpdate):
            return UsageUpdate(_plus(self._base, event.usage))
        if isinstance(event, MessageEnd):
            return dataclasses.replace(event, usage=_plus(self._base, event.usage))
        return event

    def _trim(self, text: str) -> str:
        """Drop from the start of the continuation the whitespace the caller already has
        (the model usually begins with the space the prefill lost), and no more."""
        kept = 0
        while self._tail and kept < len(text) and text[kept] == self._tail[0]:
            self._tail = self._tail[1:]
            kept += 1
        if kept < len(text):
            self._tail = ""  # the first character that differs ends the overlap
        return text[kept:]


def _plus(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
    )


def continued_parts(attempts: Sequence[Attempt]) -> tuple[Attempt, Attempt] | None:
    """(the attempt whose committed stream failed first, the continuation that finished the
    answer) of a request answered by continuation; None for any other."""
    last = next((a for a in reversed(attempts) if a.continues_attempt is not None), None)
    if last is None or last.outcome != "success":
        return None
    first = next((a for a in attempts if a.decision == CONTINUE_ELSEWHERE), None)
    return None if first is None else (first, last)
