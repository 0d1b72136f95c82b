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

from engine.core.attempt import Attempt
from engine.core.errors import AccountFault, AttemptError, DrillFault
from engine.core.messages import (
    Message,
    MessageEnd,
    Request,
    StreamEvent,
    StreamStart,
    Text,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from engine.fallback.policy import too_little
from engine.state.breaker import Admission

if TYPE_CHECKING:
    from engine.fallback.run import RequestRun
    from engine.fallback.target import Target

__all__ = [
    "CONTINUE_ELSEWHERE",
    "CommittedFailure",
    "Resume",
    "continued_parts",
    "continued_stream",
    "supports_continuation",
]

# The decision recorded on an attempt whose committed text another target went on with.
CONTINUE_ELSEWHERE = "continue_elsewhere"
# Characters a token, as the fakes and `Request.estimated_input_tokens` count: enough to price
# the text of a part whose usage never came, flagged as an estimate.
_CHARS_PER_TOKEN = 4

Admit = Callable[["Target", "RequestRun"], Awaitable[tuple[Admission, str]]]
Alert = Callable[["Target", AttemptError], Awaitable[None]]


def supports_continuation(target: Target) -> bool:
    """Whether the target continues a final assistant message (assistant prefill): as the
    configuration says (`supports_prefill` of its provider), else by kind: the Anthropic
    Messages API does, an OpenAI-compatible server only where declared."""
    if target.prefill is not None:
        return target.prefill
    return target.provider.kind == "anthropic"


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
    """A continuable stream (`RequestRun.attempt_stream(continuable=True)`) failed after its
    commit. The attempt is still under way, neither reported to its breaker nor recorded:
    `continued_stream` decides what follows and records it with that decision."""

    def __init__(self, error: AttemptError, ttft_ms: float, usage: Usage) -> None:
        super().__init__(error.message)
        self.error = error
        self.ttft_ms = ttft_ms
        self.usage = usage


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
    breaker_state: str,
    *,
    backups_left: bool,
    admit: Admit,
    alert: Alert,
) -> AsyncIterator[StreamEvent]:
    """The stream of `targets[depth]`, finished by the later targets that can continue it
    when it fails after its first content. A failure before the commit is raised, as the plain
    attempt raises it, for the chain to fall back. `admit` asks a target's breaker (the chain's
    own admission); `alert` is the chain's credential alert, for a continuation's 401."""
    held = _Held()
    events = run.attempt_stream(
        targets[depth], depth, breaker_state, backups_left=backups_left, continuable=True
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
                    _record_part(run, pending, held, "in_band_error", estimate=False)
                    pending = None
                yield run.stream_error(first.error)
                return
            index, target, state = found
            if pending is not None:
                _record_part(run, pending, held, CONTINUE_ELSEWHERE, estimate=True)
                pending = None
                continues = run.attempts[-1].attempt_number
            prefill = held.text.rstrip()
            resume = Resume(prefill, continues, len(held.text), held.usage.output_tokens)
            joint = _Joint(held.text[len(prefill) :], held.usage)
            held.part_chars = 0
            events = run.attempt_stream(
                target, index, state, backups_left=bool(later), continuable=True, resume=resume
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
                run.failed(error, "fall_back" if later else "give_up")
                if isinstance(error, AccountFault) and not isinstance(error, DrillFault):
                    await alert(target, error)
    finally:
        if pending is not None:  # the caller went away while a continuation was sought
            _record_part(run, pending, held, "cancelled", estimate=False)


async def _next_admitted(
    run: RequestRun, later: list[tuple[int, Target]], admit: Admit
) -> tuple[int, Target, str] | None:
    """The next capable target with budget left whose breaker lets it through (taken off
    `later`, as the ones passed over are), or None."""
    while later:
        index, target = later.pop(0)
        if too_little(run.remaining(), run.policy):
            return None  # the budget only shrinks: no later target has more
        admission, state = await admit(target, run)
        if admission.allowed:
            return index, target, state
    return None


def _record_part(
    run: RequestRun, part: CommittedFailure, held: _Held, decision: str, *, estimate: bool
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
