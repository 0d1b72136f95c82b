"""Masks personal data (LGPD) in a neutral `Request` before any provider sees it.

Applied above the fallback chain, so every target, primary or backup, receives the same
masked request: CPF, CNPJ, e-mail, phone, card and bank-account numbers become placeholders
such as `[CPF_1]`, and `restore_response` (a streamed answer: `engine.behaviours.pii_stream`)
puts the originals back in the answer when the operator enables restore.

Pure: no I/O, no clock, no logging. It must never log, record or persist a value it masks;
the only copy of the originals is the `Masker`, which lives as long as one request, and whose
`repr` shows counts, never values. Detection is by pattern plus check digits (mod 11 for CPF
and CNPJ, Luhn for cards): it reduces exposure, it is not a guarantee (names, addresses and
numbers written out in words pass through).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from engine.behaviours.pii_stream import StreamRestorer
from engine.core import bounded_json
from engine.core.messages import Request, Response, Text, ToolCall, ToolResult

__all__ = [
    "PII_KINDS",
    "Masker",
    "PiiPolicy",
    "StreamRestorer",
    "mask_request",
    "restore_response",
]

PII_KINDS: tuple[str, ...] = ("cpf", "cnpj", "email", "phone", "card", "bank_account")


@dataclass(frozen=True, slots=True)
class PiiPolicy:
    kinds: frozenset[str] = field(default_factory=lambda: frozenset(PII_KINDS))
    restore: bool = False  # put the original values back in the answer

    def __post_init__(self) -> None:
        if isinstance(self.kinds, str):  # frozenset("cpf") would be {"c", "p", "f"}
            raise ValueError(f"PII kinds must be a collection of: {', '.join(PII_KINDS)}")
        kinds = frozenset(self.kinds)
        unknown = sorted(kinds - set(PII_KINDS))
        if unknown:
            raise ValueError(
                f"unknown PII kind(s) {', '.join(unknown)}; allowed: {', '.join(PII_KINDS)}"
            )
        object.__setattr__(self, "kinds", kinds)


# --- detection ---------------------------------------------------------------------------------
# A number is not PII when it is the middle of a longer number: no digit (or digit and
# separator, as in 1.234.567) just before, none just after. `+` before belongs to a phone, `@`
# after to an e-mail (WhatsApp ids such as 5511912345678@s.whatsapp.net are masked whole).
_START = r"(?<![\d+])(?<!\d[.,/-])"
_END = r"(?![\d@])(?![.,/-]\d)"
_SP = "[ \u00a0]"  # a space, never a newline: numbers on separate lines are separate numbers
# Each number pattern starts with a lookahead for the characters it can start with: `re` then
# rejects every other position at once instead of trying the lookbehinds there (2-3× faster).

_CARD = re.compile(rf"(?=\d){_START}(?:\d{{13,19}}|\d{{4}}(?:[ \u00a0-]\d{{2,6}}){{2,4}}){_END}")
_CNPJ = re.compile(
    rf"(?=[0-9A-Z]){_START}(?:\d{{2}}\.?\d{{3}}\.?\d{{3}}/?\d{{4}}-?\d{{2}}"
    # The alphanumeric CNPJ (Receita Federal, from July 2026), only when fully formatted:
    # fourteen bare letters and digits are too often some other identifier.
    rf"|(?<![A-Za-z])[0-9A-Z]{{2}}\.[0-9A-Z]{{3}}\.[0-9A-Z]{{3}}/[0-9A-Z]{{4}}-\d{{2}}){_END}"
)
_CPF = re.compile(rf"(?=\d){_START}\d{{3}}\.?\d{{3}}\.?\d{{3}}-?\d{{2}}{_END}")
_EMAIL = re.compile(
    r"(?<![\w.%+-])[\w.%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"
)
_PHONE_BR = re.compile(
    rf"(?=[\d+(]){_START}(?:(?:\+|00)?55{_SP}?)?"  # country code
    r"(?:\(0?[1-9]{2}\)|0?[1-9]{2})"  # area code (DDD), with or without trunk 0 and brackets
    rf"[ \u00a0.-]?(?:9{_SP}?\d{{4}}|[2-5]\d{{3}})[ \u00a0.-]?\d{{4}}{_END}"  # mobile | landline
)
# Without area code only the unmistakable mobile shape: 8 digits with a dash are as often
# a range of years (2019-2026) as a landline.
_PHONE_BR_LOCAL = re.compile(rf"(?=9){_START}9{_SP}?\d{{4}}-\d{{4}}{_END}")
_PHONE_INTL = re.compile(rf"(?=\+){_START}\+\d(?:[ \u00a0().-]{{0,2}}\d){{7,14}}{_END}")

# Bank details are recognised by their words; the digits after them are masked, the words kept.
_AGENCY = r"\bag(?:[eê]ncia\b|\.|\b)"
_ACCOUNT = r"(?:\b(?:conta(?:[ -](?:corrente|poupan[cç]a))?|c/c|cc)\b|\bc\.c\.)"
# Every `\s*` follows a required token: two adjacent ones would backtrack quadratically.
_LEAD = r"\s*(?:(?:n[º°o.]|n[úu]mero)\s*)?(?::\s*)?"
_AGENCY_NO = r"\d{3,5}(?:-[\dX])?(?!\w)"
_ACCOUNT_NO = r"(?:\d{1,3}(?:\.\d{3})+|\d{3,13})(?:-[\dX])?(?!\w)"
_ACCOUNT_NO_DV = r"(?:\d{1,3}(?:\.\d{3})+|\d{3,13})-[\dX](?!\w)"  # alone, a check digit is needed
_BETWEEN = r"[\s,;/|-]*(?:e\s+)?"
_BANK = re.compile(
    rf"{_AGENCY}{_LEAD}{_AGENCY_NO}{_BETWEEN}{_ACCOUNT}{_LEAD}{_ACCOUNT_NO}"
    rf"|{_ACCOUNT}{_LEAD}{_ACCOUNT_NO}{_BETWEEN}{_AGENCY}{_LEAD}{_AGENCY_NO}"
    rf"|{_ACCOUNT}{_LEAD}{_ACCOUNT_NO_DV}",
    re.IGNORECASE,
)
_BANK_NUMBER = re.compile(r"\d+(?:\.\d+)*(?:-[\dX])?", re.IGNORECASE)

_DIGIT = re.compile(r"\d")
_PLACEHOLDER = re.compile(r"\[(?:" + "|".join(k.upper() for k in PII_KINDS) + r")_\d+\]")
_FILLER = "\x00"  # stands in for a claimed span: matches no pattern, keeps offsets

Span = tuple[int, int]


def _digits(raw: str) -> list[int]:
    return [int(d) for d in _DIGIT.findall(raw)]


def _luhn_ok(digits: list[int]) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cpf_ok(digits: list[int]) -> bool:
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    for n in (9, 10):
        check = sum(d * w for d, w in zip(digits[:n], range(n + 1, 1, -1), strict=True))
        if check * 10 % 11 % 10 != digits[n]:
            return False
    return True


def _cnpj_ok(values: list[int]) -> bool:
    if len(values) != 14 or len(set(values)) == 1:
        return False
    for n in (12, 13):
        weights = [*range(n - 7, 1, -1), *range(9, 1, -1)]
        remainder = sum(v * w for v, w in zip(values[:n], weights, strict=True)) % 11
        if (0 if remainder < 2 else 11 - remainder) != values[n]:
            return False
    return True


def _card_spans(m: re.Match[str]) -> list[Span]:
    raw = m.group()
    # A card followed by its CVV or a stray group ("4111 1111 1111 1111 123") is still a card:
    # try the whole match, then drop trailing groups.
    ends = [len(raw), *(i for i in range(len(raw) - 1, 0, -1) if not raw[i].isdigit())]
    for end in ends:
        digits = _digits(raw[:end])
        if not 13 <= len(digits) <= 19 or not _luhn_ok(digits):
            continue
        # Only old Visa cards have 13 digits; a bare Brazilian mobile with country code
        # (55 11 91234 5678) has 13 too. A bare valid CNPJ is a CNPJ, not a rare 14-digit card.
        if (len(digits) == 13 and digits[0] != 4) or (raw[:end].isdigit() and _cnpj_ok(digits)):
            continue
        return [(m.start(), m.start() + end)]
    return []


def _cnpj_spans(m: re.Match[str]) -> list[Span]:
    values = [ord(c) - ord("0") for c in m.group() if c.isascii() and c.isalnum()]
    return [m.span()] if _cnpj_ok(values) else []


def _cpf_spans(m: re.Match[str]) -> list[Span]:
    return [m.span()] if _cpf_ok(_digits(m.group())) else []


def _bank_spans(m: re.Match[str]) -> list[Span]:
    return [(m.start() + n.start(), m.start() + n.end()) for n in _BANK_NUMBER.finditer(m.group())]


def _whole(m: re.Match[str]) -> list[Span]:
    return [m.span()]


# In this order, so that a longer or check-digit-validated number is claimed before a looser
# pattern can take part of it (a valid CPF is a CPF, not a phone).
_DETECTORS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], list[Span]]], ...] = (
    ("card", _CARD, _card_spans),
    ("cnpj", _CNPJ, _cnpj_spans),
    ("cpf", _CPF, _cpf_spans),
    ("bank_account", _BANK, _bank_spans),
    ("email", _EMAIL, _whole),
    ("phone", _PHONE_BR, _whole),
    ("phone", _PHONE_BR_LOCAL, _whole),
    ("phone", _PHONE_INTL, _whole),
)


def _find(text: str, kinds: frozenset[str]) -> list[tuple[int, int, str]]:
    """The spans to mask, in text order. A claimed span is blanked in a working copy, so no
    later pattern can match it or across it."""
    work = text
    found: list[tuple[int, int, str]] = []
    # Every kind holds digits, and an e-mail an @: most chat text can skip the patterns, whose
    # lookbehinds are tried at every character (20-70 µs per KB each, bench.shaping).
    has_digit = _DIGIT.search(text) is not None
    for kind, pattern, spans_of in _DETECTORS:
        if kind not in kinds or not (has_digit if kind != "email" else "@" in text):
            continue
        claimed = [span for m in pattern.finditer(work) for span in spans_of(m)]
        if not claimed:
            continue
        chars = list(work)  # one rebuild per pattern, not per match: tool results can be long
        for start, end in claimed:
            chars[start:end] = _FILLER * (end - start)
            found.append((start, end, kind))
        work = "".join(chars)
    return sorted(found)


# --- masking and restoring ---------------------------------------------------------------------


class Masker:
    """One request's masking: the same value gets the same placeholder throughout the request.

    Holds the originals (to restore them) for the life of one request; never log or store it.
    """

    def __init__(self, policy: PiiPolicy) -> None:
        self._policy = policy
        self._placeholder_of: dict[tuple[str, str], str] = {}
        self._original_of: dict[str, str] = {}
        self._next: dict[str, int] = dict.fromkeys(PII_KINDS, 1)
        # Placeholder-shaped text the caller wrote itself ("[CPF_1]" in a previous answer that
        # was not restored): never issued, so restoring never rewrites it.
        self._reserved: set[str] = set()
        self._counts: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"Masker(kinds={sorted(self._policy.kinds)}, counts={self._counts})"

    def mask_text(self, text: str) -> str:
        if not text or not self._policy.kinds:
            return text
        self._reserve(text)
        out: list[str] = []
        pos = 0
        for start, end, kind in _find(text, self._policy.kinds):
            out += [text[pos:start], self._placeholder(kind, text[start:end])]
            self._counts[kind] = self._counts.get(kind, 0) + 1
            pos = end
        return "".join(out) + text[pos:] if out else text

    def restore_text(self, text: str) -> str:
        if not self._original_of:
            return text
        return _PLACEHOLDER.sub(lambda m: self._original_of.get(m.group(), m.group()), text)

    @property
    def count(self) -> int:
        return sum(self._counts.values())

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    @property
    def issued(self) -> Collection[str]:
        """The placeholders this masker gave out (and can restore)."""
        return self._original_of.keys()

    def stream_restorer(self) -> StreamRestorer:
        return StreamRestorer(self)

    def _reserve(self, text: str) -> str:
        self._reserved.update(_PLACEHOLDER.findall(text))
        return text

    def _placeholder(self, kind: str, value: str) -> str:
        # Keyed by the exact text, not the digits: 123.456.789-09 and 12345678909 get two
        # placeholders, so that restoring gives back exactly what the user wrote.
        placeholder = self._placeholder_of.get((kind, value))
        if placeholder is None:
            while (placeholder := f"[{kind.upper()}_{self._next[kind]}]") in self._reserved:
                self._next[kind] += 1
            self._next[kind] += 1
            self._placeholder_of[(kind, value)] = placeholder
            self._original_of[placeholder] = value
        return placeholder


# --- requests and responses --------------------------------------------------------------------


def _map_json(value: Any, fn: Callable[[str], str], numbers: bool = False) -> Any:
    """`value` with `fn` applied to every string, recursively. With `numbers`, an integer that
    is PII (a CPF sent as a JSON number) becomes its placeholder, a string."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_json(v, fn, numbers) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map_json(v, fn, numbers) for v in value]
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        masked = fn(str(value))
        return value if masked == str(value) else masked
    return value


def _mask_tool_call(call: ToolCall, fn: Callable[[str], str]) -> ToolCall:
    arguments = None if call.arguments is None else _map_json(dict(call.arguments), fn, True)
    raw = call.raw_arguments
    if raw is not None:
        try:
            parsed = bounded_json.loads(raw)
        except ValueError:  # JsonRejected too: not JSON any provider takes, masked as text
            raw = fn(raw)
        else:
            # The same arguments twice: mask once (one occurrence counted, one placeholder
            # each) and re-serialise, since a masked JSON number must become a string.
            same = call.arguments is not None and parsed == dict(call.arguments)
            masked = arguments if same else _map_json(parsed, fn, True)
            if masked != parsed:
                raw = json.dumps(masked, ensure_ascii=False)
    return replace(call, arguments=arguments, raw_arguments=raw)


def _map_parts(
    parts: tuple[Any, ...], fn: Callable[[str], str], call: Callable[[ToolCall], ToolCall]
) -> Iterator[Any]:
    for part in parts:
        if isinstance(part, Text):
            # `replace`, not the constructor: a field added to a part later is carried over.
            yield replace(part, text=fn(part.text))
        elif isinstance(part, ToolCall):
            yield call(part)
        elif isinstance(part, ToolResult):
            yield replace(part, content=tuple(_map_parts(part.content, fn, call)))
        else:  # an Image is left alone: masking it would need OCR
            yield part


def _map_request(request: Request, fn: Callable[[str], str]) -> Request:
    def call(c: ToolCall) -> ToolCall:
        return _mask_tool_call(c, fn)

    messages = tuple(
        replace(m, content=tuple(_map_parts(m.content, fn, call))) for m in request.messages
    )
    system = None if request.system is None else fn(request.system)
    # The end-user id goes to OpenAI-dialect servers too; on WhatsApp it is often a phone.
    user = None if request.user is None else fn(request.user)
    return request.replace(system=system, messages=messages, user=user)


def mask_request(request: Request, policy: PiiPolicy) -> tuple[Request, Masker]:
    """The request with PII masked in the system prompt, text, tool results, the tool-call
    arguments of the history and the end-user id; images and tool definitions untouched."""
    masker = Masker(policy)
    if not policy.kinds:
        return request, masker
    _map_request(request, masker._reserve)  # first pass: no placeholder may collide
    return _map_request(request, masker.mask_text), masker


def restore_response(response: Response, masker: Masker) -> Response:
    """The answer with this request's placeholders replaced by the originals."""
    fn = masker.restore_text

    def call(c: ToolCall) -> ToolCall:
        arguments = None if c.arguments is None else _map_json(dict(c.arguments), fn)
        # Restoring inside the raw JSON is safe: no original holds a quote or a backslash.
        raw = None if c.raw_arguments is None else fn(c.raw_arguments)
        return replace(c, arguments=arguments, raw_arguments=raw)

    return response.replace(content=tuple(_map_parts(response.content, fn, call)))
