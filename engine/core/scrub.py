"""Scrubbing what a provider says before it is stored, logged, alerted on or sent back.

A provider's error text is foreign: some quote the key they were sent (`invalid x-api-key
sk-ant-api03-…`), some quote the request (`Invalid value: 'the customer's message…'`). Error
texts go into attempt records (DuckDB, spool files, published snapshots), log lines, alerts,
reports and the gateway's answers, none of which may hold a secret or the caller's content.
`Scrubber.error_text` is applied once, where an attempt's failure is recorded
(engine.fallback.run), so everything downstream reads the clean text.

Removed: the configured keys' values exactly; anything shaped like a key (`sk-…`, `key-…`,
Google's `AIza…`, AWS's `AKIA…`, GitHub's `ghp_…`, bearer tokens, `api_key=…`); and any run
of 24 characters or more that also occurs in the request's text. Then the text is cut to
MESSAGE_LIMIT characters. Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.messages import Request

__all__ = ["MESSAGE_LIMIT", "Scrubber", "request_texts"]

MESSAGE_LIMIT = 300
QUOTE_MIN = 24  # shorter runs are words and names, not the caller's content
# At most this much of the request is searched for quotes: an error path, kept cheap.
_HAYSTACK_LIMIT = 1_000_000
_CUT = "[…]"
_MASK = "***"

_KEY_PATTERNS = (
    # a prefix kept, so that a person still sees which kind of key it was
    (re.compile(r"\b(sk-(?:ant-|proj-)?|key-|AIza|AKIA|gh[pousr]_|xox[abpr]-)[A-Za-z0-9*_.\-]{4,}"),
     r"\1" + _MASK),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"), r"\1" + _MASK),
    (re.compile(r"(?i)\b((?:x-)?api[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{6,}"), r"\1" + _MASK),
)  # fmt: skip


class Scrubber:
    """Removes secrets from text: `secrets` exactly (the configured keys), and key shapes."""

    def __init__(self, secrets: Collection[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        for pattern, replacement in _KEY_PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def error_text(self, text: str, request: Request | None = None) -> str:
        """A provider's error message as it may be kept: no secret, no quoted request text,
        at most MESSAGE_LIMIT characters."""
        text = self(text[: 4 * MESSAGE_LIMIT])
        if request is not None:
            text = cut_quotes(text, request_texts(request))
        return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def request_texts(request: Request) -> Iterable[str]:
    """Every piece of text the caller sent: the system prompt, message text, tool results and
    tool-call arguments."""
    from engine.core.messages import Text, ToolCall, ToolResult

    if request.system:
        yield request.system
    for message in request.messages:
        for part in message.content:
            if isinstance(part, Text):
                yield part.text
            elif isinstance(part, ToolResult):
                yield from (p.text for p in part.content if isinstance(p, Text))
            elif isinstance(part, ToolCall) and part.raw_arguments:
                yield part.raw_arguments


def cut_quotes(text: str, pieces: Iterable[str]) -> str:
    """`text` with every run of QUOTE_MIN or more characters that occurs in `pieces` cut."""
    haystack = "\x00".join(p for p in pieces if len(p) >= QUOTE_MIN)
    if len(text) < QUOTE_MIN or not haystack:
        return text
    if len(haystack) > _HAYSTACK_LIMIT:
        half = _HAYSTACK_LIMIT // 2
        haystack = haystack[:half] + "\x00" + haystack[-half:]
    # Any quote of QUOTE_MIN or more holds a whole window of half that length on the step's
    # grid, wherever it starts; a window found is grown to the longest run around it in the
    # request, and cut only if that run is a quote's length.
    out, start, i = [], 0, 0
    width = QUOTE_MIN // 2
    while i + width <= len(text):
        if text[i : i + width] not in haystack:
            i += width
            continue
        lo, hi = _longest_run(text, i, i + width, haystack, floor=start)
        if hi - lo < QUOTE_MIN:
            i += width
            continue
        out += [text[start:lo], _CUT]
        start = i = hi
    out.append(text[start:])
    return "".join(out)


def _longest_run(text: str, lo: int, hi: int, haystack: str, *, floor: int) -> tuple[int, int]:
    """The longer of the runs around text[lo:hi] that are in haystack, grown left first or
    right first (greedy either way can stop short of a run the other way finds)."""
    left = _grow_left(text, lo, hi, haystack, floor=floor)
    one = (left, _grow_right(text, left, hi, haystack))
    right = _grow_right(text, lo, hi, haystack)
    other = (_grow_left(text, lo, right, haystack, floor=floor), right)
    return max(one, other, key=lambda run: run[1] - run[0])


def _grow_right(text: str, lo: int, hi: int, haystack: str) -> int:
    """The largest end ≥ hi with text[lo:end] in haystack."""
    return hi + _most(lambda n: text[lo : hi + n] in haystack, len(text) - hi)


def _grow_left(text: str, lo: int, hi: int, haystack: str, *, floor: int) -> int:
    """The smallest start ≥ floor with text[start:hi] in haystack."""
    return lo - _most(lambda n: text[lo - n : hi] in haystack, lo - floor)


def _most(fits: Callable[[int], bool], limit: int) -> int:
    """The largest n in [0, limit] that `fits`, for a `fits` true at 0 and true up to some n
    only (a longer run in the haystack holds every shorter one): galloping, then bisection,
    so a quote of any length costs a few searches of the haystack."""
    good, jump = 0, 1
    while good + jump <= limit and fits(good + jump):
        good, jump = good + jump, jump * 2
    bad = min(good + jump, limit + 1)
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
