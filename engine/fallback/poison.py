"""Poison requests: what a request's own content says against a target counts once.

Some payloads make a provider fail (a 500, a dropped connection) whoever sends them, and the
official SDKs resend a request twice more on a 5xx: one bad payload arrives three times, each
retried once by the chain. Counted as they come, five such payloads open every breaker of the
route for everyone. Two rules keep the evidence honest (issue 35):

- **One piece per content.** A failure of a request whose content (its fingerprint: a 16-byte
  digest of the request as sent, whatever its target) already charged this target within the
  breaker's window is no new evidence: the retry of the same call, and the SDK's resends,
  release the breaker instead of failing it again. `ChargedContent` remembers the pairs, per
  process and bounded (the oldest forgotten first).
- **The same failure everywhere is the request's.** A request that fails on a later target in
  the same way (error class and status) as on the first target it charged is a suspected
  request fault there: that attempt is recorded as `fault_kind = "suspected_request"` (no
  incident counts it) and its breaker's charge is held. A request that fails that way on every
  target it reaches charges no breaker beyond the first; one that meets anything else after
  (an answer, another failure) charges the held ones then: they failed where others did not.

Overloads and waits that ran out are outside both rules (`CONTENT_BLIND`). The price of the
first rule: a route whose requests are byte for byte alike charges a breaker once per breaker
window for a fast failure (a 500, a reset) and opens it on other evidence (other content, an
overload, a probe); each such request still falls back at the cost of one quick failed call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from engine.core.errors import AttemptError
from engine.core.messages import Request
from engine.fallback.steps import WAITED_OUT

__all__ = [
    "CONTENT_BLIND",
    "SUSPECTED_REQUEST",
    "ChargedContent",
    "Evidence",
    "FirstCharge",
    "RequestEvidence",
    "fingerprint",
]

SUSPECTED_REQUEST = "suspected_request"  # the fault_kind recorded on an uncharged attempt
FINGERPRINT_BYTES = 16
CAPACITY = 4096  # (target, content) pairs remembered per process: ~0.5 MB
# Failures outside both rules, evidence however often the same content meets them. Capacity
# says nothing of content: an overload (a 529, OpenAI's "engine overloaded") is the provider's,
# and a job queue rerunning one job against it must open its breaker. A wait that ran out
# (WAITED_OUT) is the costliest failure to keep meeting: a route whose
# requests are alike (a health check, a fixed prompt) would wait out every one of them.
CONTENT_BLIND = frozenset({"overloaded"}) | WAITED_OUT
# Who asks and how it is delivered, not what is asked: a resend streamed or not is the same.
_NOT_CONTENT = ("stream", "feature", "key_label", "user")


def fingerprint(request: Request) -> bytes:
    """A digest of everything the request asks (messages, system, tools, parameters): equal
    for a resend of the same body, different for any other content."""
    asked = dataclasses.asdict(request)
    for who in _NOT_CONTENT:
        asked.pop(who, None)
    body = json.dumps(asked, sort_keys=True, default=_plain)
    return hashlib.blake2b(body.encode(), digest_size=FINGERPRINT_BYTES).digest()


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return hashlib.blake2b(value, digest_size=FINGERPRINT_BYTES).hexdigest()
    return repr(value)


class Evidence(Enum):
    NEW = "new"  # charge the breaker
    SEEN = "seen"  # this content already charged this target: no new evidence
    REPEATED = "repeated"  # the request's first failure again, on another target: held


@dataclass(frozen=True, slots=True)
class FirstCharge:
    """The first failure of a request that charged a breaker: where, and how it failed."""

    target: str
    error_class: str
    status: int | None

    @classmethod
    def of(cls, target: str, error: AttemptError) -> FirstCharge:
        return cls(target, error.error_class, error.status)

    def repeated_by(self, target: str, error: AttemptError) -> bool:
        """Whether `error` on `target` is the same failure on another target."""
        return (
            target != self.target
            and error.error_class not in CONTENT_BLIND
            and (error.error_class, error.status) == (self.error_class, self.status)
        )


class ChargedContent:
    """The (target, content) pairs a breaker was charged with, each for `window_s` (the
    breaker's window: older evidence has left the breaker's count anyway)."""

    def __init__(self, window_s: float, capacity: int = CAPACITY) -> None:
        self.window_s = window_s
        self.capacity = capacity
        self._at: OrderedDict[tuple[str, bytes], float] = OrderedDict()

    def charge(self, target: str, content: bytes, now: float) -> bool:
        """Note that `content` failed on `target` at `now`; whether it is new evidence (not
        charged within the window before)."""
        key = (target, content)
        before = self._at.pop(key, None)
        if before is not None and now - before < self.window_s:
            self._at[key] = before  # the window counts from the charge, not from the resends
            return False
        self._at[key] = now
        while len(self._at) > self.capacity:
            self._at.popitem(last=False)
        return True


@dataclass
class RequestEvidence:
    """What one request's provider failures charged: its first (where, how), and the later
    targets that repeated it, whose charge is held (`release_held` when anything else
    follows)."""

    charged: ChargedContent
    request: Request
    first: FirstCharge | None = None
    held: list[str] = field(default_factory=list)
    _content: bytes | None = None

    def judge(self, target: str, error: AttemptError, now: float) -> Evidence:
        """Whether `error` on `target` charges its breaker (the failure's fault_kind is set to
        SUSPECTED_REQUEST when it repeats the request's first)."""
        if error.error_class in CONTENT_BLIND:
            return Evidence.NEW
        if self.first is not None and self.first.repeated_by(target, error):
            error.fault_kind = SUSPECTED_REQUEST
            self.held.append(target)
            return Evidence.REPEATED
        if self._content is None:
            self._content = fingerprint(self.request)
        new = self.charged.charge(target, self._content, now)
        if self.first is None:  # charged now, or by the same content before
            self.first = FirstCharge.of(target, error)
        return Evidence.NEW if new else Evidence.SEEN

    def release_held(self) -> list[str]:
        held, self.held = self.held, []
        return held
