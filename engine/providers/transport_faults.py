"""Every exception of the transport becomes one `AttemptError`, here and nowhere else (the
answers that did arrive are `engine.core.classify`'s).

The httpx exception types are the table: each maps to the fault it stands for, whether the
request can have reached the provider (`sent`: nothing billed when it cannot have) and the
decision that follows (`engine.core.errors`). Pure: an exception in, an error out; no I/O.
Catalogue rows 14-16 are tested in `tests/core/test_classify.py`.
"""

from __future__ import annotations

import httpx

from engine.core.classify import MESSAGE_LIMIT
from engine.core.errors import AmbiguousFault, AttemptError, ProviderFault

__all__ = ["classify_exception"]


def classify_exception(
    exc: BaseException, *, sent: bool, status: int | None = None
) -> AttemptError:
    """A transport failure. `sent` is False when the request cannot have reached the provider;
    `status` is the response's, when its status line arrived before the failure (a read
    timeout mid-body), else None: no number is recorded for an answer that never came."""
    message = f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
    if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError | httpx.UnsupportedProtocol):
        return ProviderFault("connect", message, sent=False)
    if isinstance(exc, httpx.PoolTimeout):
        return ProviderFault("pool_timeout", message, sent=False)
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout | TimeoutError):
        return AmbiguousFault("read_timeout", message, sent=sent, status=status)
    if isinstance(exc, httpx.DecodingError):
        return AmbiguousFault("truncated", message, sent=sent, status=status)
    if isinstance(exc, httpx.TransportError):
        if not sent:
            return ProviderFault("connect", message, sent=False)
        return AmbiguousFault("reset", message, status=status)
    return ProviderFault("internal", message, sent=sent, status=status)
