"""The narrow interface the chain calls, and the HTTP transport concerns every dialect shares.

`HttpProvider` does, once for all dialects: one pooled `httpx.AsyncClient` per provider (over
`engine.providers.transport`'s aiohttp transport unless `transport=` says otherwise), the
per-attempt timeout, POSTing JSON, lenient reading of bodies, SSE framing, closing responses
when a consumer stops early, and turning every failure into an `AttemptError` through
`engine.classify` (never by its own judgement). A dialect subclass supplies only the path, the
auth headers and its codec.

Never puts the API key in a log line, an exception message or a repr.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, suppress
from typing import Any, ClassVar, Protocol, runtime_checkable

import httpx

from engine import classify
from engine.clock import Clock, SystemClock
from engine.errors import AttemptError, LocalFault
from engine.providers.codec import MalformedAnswer, response_events
from engine.providers.sse import ServerSentEvent, aiter_sse
from engine.providers.transport import default_transport
from engine.types import MessageEnd, Request, Response, StreamEvent

__all__ = ["HttpProvider", "Provider", "StreamDecoder"]

log = logging.getLogger("switchover.providers")

# Failures before the request was fully written: the provider cannot have acted on it.
_NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
    httpx.WriteError,
    httpx.WriteTimeout,
)
# A body that broke off while being read is a truncated answer, not a lost connection.
_TRUNCATION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.DecodingError)
# After a stream's final event, how much more is read to keep its connection reusable.
_DRAIN_LIMIT_S = 0.25
_DRAIN_LIMIT_EVENTS = 16
# A stream may carry a few events nobody can read (a proxy that mangled a chunk) and still be
# whole; more than this many in one stream and it is broken: a cut (catalogue rows 26 and 21).
MAX_UNREADABLE_EVENTS = 3


class _UnreadableEvent(Exception):
    """An SSE event whose data is not JSON: `HttpProvider.stream` skips and counts it."""


@runtime_checkable
class Provider(Protocol):
    """What the chain needs from a provider. Every failure is raised as an `AttemptError`."""

    name: str  # the configured name, e.g. "claude"
    kind: str  # "anthropic" | "openai"

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response: ...

    def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...


class StreamDecoder(Protocol):
    """A dialect's stream state machine; `done` once the end-of-message marker arrived."""

    done: bool


class HttpProvider(ABC):
    """The transport half every dialect shares; a dialect fills in the abstract methods."""

    kind: ClassVar[str]
    path: ClassVar[str]  # appended to base_url
    end_marker: ClassVar[str]  # what a complete stream ends with, for the stream_cut message

    def __init__(
        self,
        name: str,
        *,
        base_url: str,
        api_key: str | None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        connect_timeout_s: float = 5.0,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.clock: Clock = clock or SystemClock()
        self.connect_timeout_s = connect_timeout_s
        headers = {"user-agent": "switchover", **self._auth_headers(api_key)}
        headers.update(extra_headers or {})
        if transport is None:
            transport = default_transport()
        # The key lives only inside the client's default headers, never on `self`.
        self._client = httpx.AsyncClient(transport=transport, headers=headers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    async def __aenter__(self) -> HttpProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    # --- the dialect's part ------------------------------------------------------------------

    @abstractmethod
    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers that authenticate (none when `api_key` is None)."""

    @abstractmethod
    def _encode(self, request: Request, model: str, *, stream: bool) -> dict[str, Any]:
        """The wire body for `request`."""

    @abstractmethod
    def _decode(self, obj: Any, model: str, request_id: str | None) -> Response:
        """A parsed 2xx body as a Response; raises MalformedAnswer."""

    @abstractmethod
    def _new_decoder(self, model: str, request_id: str | None) -> StreamDecoder:
        """A fresh stream state machine for one response."""

    @abstractmethod
    def _feed(
        self, decoder: Any, sse: ServerSentEvent, response: httpx.Response
    ) -> list[StreamEvent]:
        """One SSE event through the dialect's decoder (parse it with `_stream_data`)."""

    # --- the calls ---------------------------------------------------------------------------

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response:
        response = await self._send(self._build(request, model, stream=False, timeout_s=timeout_s))
        try:
            body = await self._read_body(response)
        finally:
            await response.aclose()
        return self._answer(response, body, model)

    async def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]:
        # An async generator: nothing is sent until the first iteration, and `aclose()` (or
        # leaving an `async for` early) closes the HTTP response through the finally below.
        response = await self._send(self._build(request, model, stream=True, timeout_s=timeout_s))
        try:
            if _is_json(response):  # `stream: true` answered with plain JSON: adapt
                body = await self._read_body(response)
                for event in response_events(self._answer(response, body, model)):
                    yield event
                return
            decoder = self._new_decoder(model, classify.provider_request_id(response.headers))
            unreadable = 0  # events skipped because their data did not parse (row 26)
            async with aclosing(aiter_sse(response.aiter_bytes())) as events:
                while True:
                    try:
                        sse = await anext(events)
                    except StopAsyncIteration:
                        break
                    except httpx.TimeoutException as exc:
                        raise classify.classify_exception(exc, sent=True) from exc
                    except httpx.HTTPError as exc:  # the connection broke mid-stream (row 21)
                        raise classify.stream_fault(
                            "stream_cut", f"{self.name}: the stream broke off ({exc})"
                        ) from exc
                    try:
                        decoded = self._feed(decoder, sse, response)
                    except MalformedAnswer as exc:
                        raise self._empty(response, exc) from exc
                    except _UnreadableEvent as exc:
                        unreadable += 1
                        if unreadable > MAX_UNREADABLE_EVENTS:
                            raise classify.stream_fault(
                                "stream_cut", f"{self.name}: {unreadable} unreadable events"
                            ) from exc
                        continue
                    if decoder.done:
                        # Before the last events go out: the consumer may close this stream
                        # as soon as it sees the end, and an unread body costs the connection.
                        await self._drain(events)
                        if unreadable:
                            decoded = _counted(decoded, unreadable)
                    for event in decoded:
                        yield event
                    if decoder.done:
                        return
            skipped = f", after {unreadable} unreadable events" if unreadable else ""
            raise classify.stream_fault(
                "stream_cut", f"{self.name}: the stream ended before {self.end_marker}{skipped}"
            )
        finally:
            await response.aclose()

    async def _drain(self, events: AsyncIterator[ServerSentEvent]) -> None:
        """Read what follows the final event (normally just the end of the chunked body), so
        httpx can return the connection to the pool: closing a response that still has unread
        body throws its connection away, and the next stream pays a new TCP+TLS handshake."""
        with suppress(Exception):  # StopAsyncIteration, a timeout, a broken tail: all fine
            async with self.clock.timeout(_DRAIN_LIMIT_S):
                for _ in range(_DRAIN_LIMIT_EVENTS):
                    await anext(events)

    # --- transport ---------------------------------------------------------------------------

    def _build(
        self, request: Request, model: str, *, stream: bool, timeout_s: float
    ) -> httpx.Request:
        """The HTTP request, encoded. Nothing has left the process if this raises, so its
        failure is ours, never the provider's: a LocalFault, which no breaker counts."""
        timeout = httpx.Timeout(timeout_s, connect=min(self.connect_timeout_s, timeout_s))
        try:
            payload = self._encode(request, model, stream=stream)
            return self._client.build_request(
                "POST", self.base_url + self.path, json=payload, timeout=timeout
            )
        except (UnicodeEncodeError, ValueError) as exc:  # a lone surrogate, a NaN
            raise LocalFault.unencodable(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            log.exception("encoding a request for %s failed", self.name)
            raise LocalFault.internal(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """POST and return a 2xx response with its body still unread; raise anything else."""
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise classify.classify_exception(exc, sent=not isinstance(exc, _NOT_SENT)) from exc
        if response.is_success:
            return response
        try:
            body = await response.aread()
        except httpx.HTTPError:
            body = b""  # the status alone still classifies the failure
        finally:
            await response.aclose()
        raise classify.classify_response(
            response.status_code, response.headers, body, now=self.clock.wall()
        )

    async def _read_body(self, response: httpx.Response) -> bytes:
        request_id = classify.provider_request_id(response.headers)
        try:
            body = await response.aread()
        except _TRUNCATION as exc:
            raise classify.protocol_fault(
                "truncated",
                f"{self.name}: the body broke off ({type(exc).__name__})",
                status=response.status_code,
                provider_request_id=request_id,
            ) from exc
        except httpx.HTTPError as exc:
            raise classify.classify_exception(exc, sent=True) from exc
        # h11 itself raises on a short body; this catches transports that do not. A compressed
        # body's length cannot be compared with its decoded bytes, so only identity is checked.
        expected = response.headers.get("content-length", "")
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if expected.isdigit() and not encoded and len(body) < int(expected):
            raise classify.protocol_fault(
                "truncated",
                f"{self.name}: {len(body)} of {expected} bytes arrived",
                status=response.status_code,
                provider_request_id=request_id,
            )
        return body

    def _answer(self, response: httpx.Response, body: bytes, model: str) -> Response:
        obj = self._parse_body(response, body)
        try:
            return self._decode(obj, model, classify.provider_request_id(response.headers))
        except MalformedAnswer as exc:
            raise self._empty(response, exc) from exc

    def _empty(self, response: httpx.Response, exc: MalformedAnswer) -> AttemptError:
        return classify.protocol_fault(
            "empty",
            f"{self.name}: {exc}",
            status=response.status_code,
            provider_request_id=classify.provider_request_id(response.headers),
        )

    def _parse_body(self, response: httpx.Response, body: bytes) -> Any:
        """The JSON of a 2xx body. Lenient about the content-type when the body parses anyway;
        an error object inside is classified as the error it names."""
        request_id = classify.provider_request_id(response.headers)
        status = response.status_code
        if not body.strip():
            raise classify.protocol_fault(
                "empty", f"{self.name}: empty body", status=status, provider_request_id=request_id
            )
        try:
            obj = json.loads(body)
        except ValueError as exc:
            content_type = response.headers.get("content-type", "")
            kind = "invalid_json" if not content_type or _is_json(response) else "not_json"
            raise classify.protocol_fault(
                kind,
                f"{self.name}: unreadable body ({content_type or 'no content-type'})",
                status=status,
                provider_request_id=request_id,
            ) from exc
        self._raise_embedded_error(obj, response)
        return obj

    def _stream_data(self, sse: ServerSentEvent, response: httpx.Response) -> Any:
        """The JSON of one stream event; an error event (`event: error`, or a data object
        that is an error) is raised as the error it names, even when its data is not JSON.
        Any other data that is not JSON raises `_UnreadableEvent`, for `stream` to skip."""
        try:
            obj = json.loads(sse.data)
        except ValueError as exc:
            if sse.event == "error":
                self._raise_error({"message": sse.data}, response)
            raise _UnreadableEvent(sse.data[:80]) from exc
        self._raise_embedded_error(obj, response)
        if sse.event == "error":
            self._raise_error({"message": sse.data}, response)
        return obj

    def _raise_embedded_error(self, obj: Any, response: httpx.Response) -> None:
        error = classify.embedded_error(obj)
        if error is not None:
            self._raise_error(error, response)

    def _raise_error(self, error: Mapping[str, Any], response: httpx.Response) -> None:
        # status None: the 200 says nothing; the error's own type or code decides.
        raise classify.error_from_object(
            error, status=None, headers=response.headers, now=self.clock.wall()
        )


def _counted(events: list[StreamEvent], unreadable: int) -> list[StreamEvent]:
    """A stream's final events, its MessageEnd telling how many unreadable events it skipped."""
    return [
        dataclasses.replace(e, unreadable_events=unreadable) if isinstance(e, MessageEnd) else e
        for e in events
    ]


def _is_json(response: httpx.Response) -> bool:
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")
