"""`HttpProvider`: the HTTP transport concerns every dialect shares.

It does, once for all dialects: one pooled `httpx.AsyncClient` per provider (over
`engine.providers.transport`'s aiohttp transport unless `transport=` says otherwise), the
per-attempt timeout, POSTing JSON, lenient reading of bodies, SSE framing (a stream read to its
end by `engine.providers.stream`), closing responses when a consumer stops early, and turning
every failure into an `AttemptError` through `engine.core.classify` (never by its own judgement). A
dialect subclass supplies only the path, the auth headers and its codec. The interface the chain
calls is `engine.providers.base.Provider`.

Never puts the API key in a log line, an exception message or a repr.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any, ClassVar

import httpx

from engine.core import classify
from engine.core.clock import Clock, SystemClock
from engine.core.errors import AttemptError, LocalFault
from engine.core.messages import Request, Response, StreamEvent
from engine.providers.base import StreamDecoder
from engine.providers.codec import MalformedAnswer, response_events
from engine.providers.sse import ServerSentEvent, aiter_sse
from engine.providers.stream import HttpStream, UnreadableEvent, read_events
from engine.providers.transport import default_transport
from engine.providers.transport_faults import classify_exception

__all__ = ["HttpProvider"]

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


class HttpProvider(ABC):
    """The transport half every dialect shares; a dialect fills in the abstract methods."""

    kind: ClassVar[str]
    path: ClassVar[str]  # appended to base_url

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

    def stream(self, request: Request, model: str, *, timeout_s: float) -> HttpStream:
        # Nothing is sent until the first iteration, and `aclose()` (or leaving an `async for`
        # early) closes the HTTP response through the finally in `_stream_events`.
        return HttpStream(lambda head: self._stream_events(request, model, timeout_s, head))

    async def _stream_events(
        self, request: Request, model: str, timeout_s: float, head: HttpStream
    ) -> AsyncGenerator[StreamEvent, None]:
        response = await self._send(self._build(request, model, stream=True, timeout_s=timeout_s))
        head.http_status = response.status_code
        try:
            if _is_json(response):  # `stream: true` answered with plain JSON: adapt
                body = await self._read_body(response)
                for event in response_events(self._answer(response, body, model)):
                    yield event
                return
            decoder = self._new_decoder(model, classify.provider_request_id(response.headers))

            def feed(sse: ServerSentEvent) -> list[StreamEvent]:
                try:
                    return self._feed(decoder, sse, response)
                except MalformedAnswer as exc:
                    raise self._empty(response, exc) from exc

            async with (
                aclosing(aiter_sse(response.aiter_bytes())) as events,
                aclosing(
                    read_events(
                        events,
                        decoder,
                        feed,
                        name=self.name,
                        status=response.status_code,
                        clock=self.clock,
                    )
                ) as decoded,
            ):
                async for event in decoded:
                    yield event
        finally:
            await response.aclose()

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
            raise classify_exception(exc, sent=not isinstance(exc, _NOT_SENT)) from exc
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
                f"{self.name}: truncated: {exc}",
                status=response.status_code,
                provider_request_id=request_id,
            ) from exc
        except httpx.HTTPError as exc:
            raise classify_exception(exc, sent=True) from exc
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
        Any other data that is not JSON raises `UnreadableEvent`, for `read_events` to skip."""
        try:
            obj = json.loads(sse.data)
        except ValueError as exc:
            if sse.event == "error":
                self._raise_error({"message": sse.data}, response)
            raise UnreadableEvent(sse.data[:80]) from exc
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


def _is_json(response: httpx.Response) -> bool:
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")
