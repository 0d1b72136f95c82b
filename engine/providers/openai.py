"""OpenAI Chat Completions, and any OpenAI-compatible server, as a `Provider`: path, auth
headers and the codec, nothing else (transport and failure handling live in `HttpProvider`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from engine.core.clock import Clock
from engine.core.messages import Request, Response, StreamEvent
from engine.providers import openai_codec as codec
from engine.providers.http import HttpProvider
from engine.providers.sse import ServerSentEvent

__all__ = ["OpenAIProvider", "max_tokens_field_for"]

# Hosts known to take `max_completion_tokens` (and to need it for o-series models).
_COMPLETION_TOKENS_HOSTS = ("api.openai.com", ".openai.azure.com")


def max_tokens_field_for(base_url: str) -> codec.MaxTokensField:
    """OpenAI deprecated `max_tokens` in favour of `max_completion_tokens`, and its o-series
    models reject the old name; but many compatible servers (older vLLM, llama.cpp, proxies)
    know only `max_tokens` and some silently ignore the new one. So OpenAI's own hosts (and
    Azure OpenAI) get the new name and every other base_url the old one."""
    host = httpx.URL(base_url).host.lower()
    if any(host == h or (h.startswith(".") and host.endswith(h)) for h in _COMPLETION_TOKENS_HOSTS):
        return "max_completion_tokens"
    return "max_tokens"


class OpenAIProvider(HttpProvider):
    kind = "openai"
    path = "/chat/completions"

    def __init__(
        self,
        name: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        connect_timeout_s: float = 5.0,
        extra_headers: Mapping[str, str] | None = None,
        default_max_tokens: int | None = None,
        max_tokens_field: codec.MaxTokensField | None = None,
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
        # OpenAI needs no limit, so by default none is sent unless the request sets one.
        self.default_max_tokens = default_max_tokens
        self.max_tokens_field = max_tokens_field or max_tokens_field_for(base_url)

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        # None: a local compatible server (vLLM, Ollama) that wants no key
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def _encode(self, request: Request, model: str, *, stream: bool) -> dict[str, Any]:
        return codec.encode_request(
            request,
            model,
            max_tokens_field=self.max_tokens_field,
            default_max_tokens=self.default_max_tokens,
            stream=stream,
        )

    def _decode(self, obj: Any, model: str, request_id: str | None) -> Response:
        return codec.decode_response(
            obj, requested_model=model, provider=self.name, provider_request_id=request_id
        )

    def _new_decoder(self, model: str, request_id: str | None) -> codec.OpenAIStreamDecoder:
        return codec.OpenAIStreamDecoder(model, request_id)

    def _feed(
        self, decoder: codec.OpenAIStreamDecoder, sse: ServerSentEvent, response: httpx.Response
    ) -> list[StreamEvent]:
        if sse.data.strip() == "[DONE]":
            return decoder.feed_done()
        data = self._stream_data(sse, response)
        return decoder.feed(data) if isinstance(data, Mapping) else []
