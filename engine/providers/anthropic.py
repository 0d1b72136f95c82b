"""The Anthropic Messages API as a `Provider`: path, auth headers and the codec, nothing else
(transport and failure handling live in `HttpProvider`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from engine.core.clock import Clock
from engine.core.messages import Request, Response, StreamEvent
from engine.providers import anthropic_codec as codec
from engine.providers.http import HttpProvider
from engine.providers.sse import ServerSentEvent

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
    kind = "anthropic"
    path = "/v1/messages"

    def __init__(
        self,
        name: str,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        connect_timeout_s: float = 5.0,
        extra_headers: Mapping[str, str] | None = None,
        default_max_tokens: int = 4096,
    ) -> None:
        super().__init__(
            name,
            base_url=base_url,
            api_key=api_key,
            transport=transport,
            clock=clock,
            connect_timeout_s=connect_timeout_s,
            extra_headers=extra_headers,
        )
        self.default_max_tokens = default_max_tokens

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:  # None: a server that wants no key
            headers["x-api-key"] = api_key
        return headers

    def _encode(self, request: Request, model: str, *, stream: bool) -> dict[str, Any]:
        return codec.encode_request(
            request, model, default_max_tokens=self.default_max_tokens, stream=stream
        )

    def _decode(self, obj: Any, model: str, request_id: str | None) -> Response:
        return codec.decode_response(
            obj, requested_model=model, provider=self.name, provider_request_id=request_id
        )

    def _new_decoder(self, model: str, request_id: str | None) -> codec.AnthropicStreamDecoder:
        return codec.AnthropicStreamDecoder(model, request_id)

    def _feed(
        self,
        decoder: codec.AnthropicStreamDecoder,
        sse: ServerSentEvent,
        response: httpx.Response,
    ) -> list[StreamEvent]:
        data = self._stream_data(sse, response)
        return decoder.feed(data, sse.event) if isinstance(data, Mapping) else []
