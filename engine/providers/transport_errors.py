"""How an aiohttp failure reads as httpx's: the translation table of
engine.providers.transport (its docstring draws the table), kept apart from the transport
that raises them. Pure: an exception in, an exception or words out."""

from __future__ import annotations

import aiohttp
import httpx
from aiohttp.http_exceptions import (
    ContentLengthError,
    HttpProcessingError,
    PayloadEncodingError,
    TransferEncodingError,
)

__all__ = ["FOREIGN", "WriteTimedOut", "describe", "httpx_class", "translate"]

_CONNECTING: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerFingerprintMismatch, httpx.ConnectError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
)
_AFTER_SENDING: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.ClientError, httpx.ReadError),
    (OSError, httpx.ReadError),
)
# What a transport can fail with; anything else (a bug, a cancellation) passes unchanged.
FOREIGN = (aiohttp.ClientError, OSError)
# How a body that ended early was framed, in the words of `describe`.
_FRAMING: dict[type[BaseException], str] = {
    TransferEncodingError: "transfer encoding",
    ContentLengthError: "content length",
}


class WriteTimedOut(Exception):
    """One write of the request body waited longer than the write timeout."""


def translate(exc: BaseException, request: httpx.Request, *, sent: bool) -> httpx.TransportError:
    """The httpx exception for an aiohttp failure; `sent` is True once the whole request was
    handed to the socket."""
    timed_out = _cause(exc, WriteTimedOut)
    if timed_out is not None:
        return httpx.WriteTimeout(str(timed_out), request=request)
    ours = httpx_class(type(exc), sent=sent)
    return ours(describe(exc), request=request)


def describe(exc: BaseException) -> str:
    """aiohttp's account of a failure, without the status it borrows from HTTP. Its parser
    reports a body cut short or a malformed head as `400, message='...'` (the 400 it would
    answer as a server), which in a record or a log line reads like the provider's own 400: a
    stream cut after a 200 once said "TransferEncodingError: 400". The kind of failure is
    named instead, and the library's words kept where they carry no such number."""
    cut = _cause(exc, PayloadEncodingError)
    if isinstance(cut, PayloadEncodingError):
        framing = _FRAMING.get(type(cut), "body encoding")
        return f"the connection closed mid-body ({framing}): {cut.message}"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the connection closed mid-body"
    malformed = _cause(exc, HttpProcessingError)
    if isinstance(malformed, HttpProcessingError):
        return _malformed(malformed.message)
    if isinstance(exc, aiohttp.ClientResponseError):
        return _malformed(exc.message)
    return str(exc) or type(exc).__name__


def _malformed(words: str) -> str:
    # aiohttp's parser writes its complaint over several lines, a caret under the fault.
    return "a malformed HTTP answer: " + " ".join(str(words).split())


def httpx_class(failure: type[BaseException], *, sent: bool) -> type[httpx.TransportError]:
    """The table's row for a class of aiohttp failure (engine.providers.transport's
    docstring draws it)."""
    for foreign, ours in _CONNECTING:
        if issubclass(failure, foreign):
            return ours
    if not sent:
        return httpx.WriteTimeout if issubclass(failure, TimeoutError) else httpx.WriteError
    for foreign, ours in _AFTER_SENDING:
        if issubclass(failure, foreign):
            return ours
    return httpx.ReadError


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """`exc` or the exception it was raised from, at any depth, when it is a `kind`."""
    seen: BaseException | None = exc
    for _ in range(8):  # aiohttp wraps at most twice; a cycle must not hang us
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None
