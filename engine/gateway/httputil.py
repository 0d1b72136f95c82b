"""HTTP plumbing the gateway's handlers share: bounded body reads, noticing a caller who hung
up, streams that close their source, safe header values, gateway keys, and scrubbing provider
keys out of any text that leaves the process. No dialect and no chain logic here."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

T = TypeVar("T")

GONE = object()  # what `unless_disconnected` returns when the caller hung up first


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes | None:
    """The body, or None when it is over `limit` bytes (the rest is read and dropped, up to a
    bound, so that the client sees the 413 rather than a reset mid-upload). TimeoutError when
    the whole of it has not arrived within `timeout_s` (a caller stalling mid-body would
    otherwise hold the connection for good)."""
    declared = request.headers.get("content-length", "")
    over = declared.isdigit() and int(declared) > limit
    chunks: list[bytes] = []
    size = 0
    with anyio.fail_after(timeout_s):
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                over = True
            if over:
                if size > 4 * limit + 64 * 1024 * 1024:
                    break
                continue
            chunks.append(chunk)
    return None if over else b"".join(chunks)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | object:
    """`work`'s result, or GONE when the caller hangs up first (then `work` is cancelled:
    a chain under it records its attempt as cancelled). Call only once the body is read."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request.receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if gone.done() and not task.done() and gone.exception() is not None:
            await asyncio.wait({task})  # hang-ups cannot be watched here: just wait
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    return GONE if task.cancelled() else task.result()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class ClosingStream(StreamingResponse):
    """A stream that, however the response ends (the body finished, the caller hung up, or
    the body never began), closes its body and then awaits `on_close` (shielded from
    cancellation), so the chain under it stops now rather than when the GC gets to it."""

    def __init__(
        self, content: AsyncIterator[bytes], on_close: Callable[[], Awaitable[None]], **kw: Any
    ) -> None:
        super().__init__(content, **kw)
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._content.aclose()  # type: ignore[attr-defined]
                await self._on_close()


def route_headers(
    route: str, provider: str | None, model: str | None, attempts: int, fallback: bool | None
) -> dict[str, str]:
    """The x-switchover-* headers; those given as None are left out."""
    headers = {"x-switchover-route": route, "x-switchover-attempts": str(attempts)}
    if provider is not None:
        headers["x-switchover-provider"] = provider
    if model is not None:
        headers["x-switchover-model"] = model
    if fallback is not None:
        headers["x-switchover-fallback"] = "true" if fallback else "false"
    return {k: header_safe(v) for k, v in headers.items()}


def header_safe(value: str) -> str:
    """A caller-chosen name (`provider/model` is free text) as a header value: printable
    ASCII, everything else percent-escaped, so no name can break or inject a header line."""
    value = value[:256]
    # RFC 9110 field values neither start nor end with a blank; a client (h11 among them)
    # refuses such a header, which costs the caller the whole answer: those are escaped too.
    edges = value[:1].isspace() or value[-1:].isspace()
    if not edges and all(" " <= c <= "~" for c in value):
        return value
    escaped = "".join(c if " " <= c <= "~" and c != "%" else quote(c, safe="") for c in value)
    stripped = escaped.strip(" ")
    lead = len(escaped) - len(escaped.lstrip(" "))
    trail = len(escaped) - len(escaped.rstrip(" "))
    return "%20" * lead + stripped + "%20" * trail if stripped else "%20" * len(escaped)


def key_accepted(headers: Headers, keys: Collection[str]) -> bool:
    """A gateway key in `x-api-key` (Anthropic SDK) or `Authorization: Bearer` (OpenAI SDK);
    any caller when no keys are configured."""
    return not keys or matched_key(headers, keys) is not None


def matched_key(headers: Headers, keys: Collection[str]) -> str | None:
    """Which of `keys` the caller presented (in `x-api-key` or `Authorization: Bearer`); None
    when none, or no key at all. Every key compared, each in constant time: no early exit that
    times which one matched."""
    presented = headers.get("x-api-key") or ""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if not presented and scheme.lower() == "bearer":
        presented = token.strip()
    if not presented:
        return None
    given = presented.encode()
    found = None
    for key in keys:
        if hmac.compare_digest(given, key.encode()):
            found = key
    return found


# The official SDKs say how long they will wait for the head (600 s by default); past it they
# give up and retry while the chain is still working. Finish the chain a little before that:
# a second, or a fifth of a short wait (a whole second of 1.1 s left less than an attempt's
# minimum, and every target was skipped at once).
READ_TIMEOUT_HEADER = "x-stainless-read-timeout"
READ_TIMEOUT_MARGIN_S = 1.0
READ_TIMEOUT_MARGIN_SHARE = 0.2


def caller_budget_s(headers: Mapping[str, str]) -> float | None:
    """The time the caller will wait, less a margin; None when it does not say (or says
    nonsense)."""
    raw = headers.get(READ_TIMEOUT_HEADER)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        return None
    return seconds - min(READ_TIMEOUT_MARGIN_S, READ_TIMEOUT_MARGIN_SHARE * seconds)
