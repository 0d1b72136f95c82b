"""The baseline every comparison is made against: a bare `httpx.AsyncClient` posting a dialect's
JSON by hand, and the one request all sides send.

Imports nothing from `engine/`, so that the LiteLLM side (`bench.litellm_side`, in its own
virtual environment without Switchover's dependencies) measures its baseline with this very
code. The baseline does what a minimal hand-written client would: `response.json()` for an
answer, `json.loads` of every SSE data line for a stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import httpx

API_KEY = "bench-key"
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5"}
MAX_TOKENS = 256
# The fake echoes the prompt in ~12-character deltas, so this length makes a stream of about
# twenty text events: enough for per-event costs to show in the whole-stream time.
PROMPT = (
    "Summarise the delivery status of order 4471 for the customer in two short sentences, "
    "mention the carrier and the expected date, and apologise for the delay without promising "
    "a refund or a discount of any kind."
)


@dataclass(frozen=True)
class Wire:
    """One dialect as a hand-written client speaks it."""

    dialect: str
    path: str
    headers: dict[str, str]

    def body(self, model: str, *, stream: bool) -> dict[str, Any]:
        if self.dialect == "openai":
            body: dict[str, Any] = {
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": MAX_TOKENS,
            }
            if stream:  # usage in the stream, as the adapter asks for it
                body |= {"stream": True, "stream_options": {"include_usage": True}}
            return body
        body = {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
        }
        return body | {"stream": True} if stream else body


OPENAI = Wire("openai", "/v1/chat/completions", {"authorization": f"Bearer {API_KEY}"})


def text_of(dialect: str, event: Any) -> str:
    if dialect == "openai":
        choices = event.get("choices") or [{}]
        return choices[0].get("delta", {}).get("content") or ""
    if event.get("type") == "content_block_delta":
        return event["delta"].get("text") or ""
    return ""


class Direct:
    """`httpx.AsyncClient.post` of the dialect's JSON: what every contender is compared with."""

    def __init__(
        self,
        wire: Wire,
        root_url: str,
        *,
        model: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = f"httpx {wire.dialect}"
        self.dialect = wire.dialect
        self._url = root_url + wire.path
        model = model or MODELS[wire.dialect]
        self._body = wire.body(model, stream=False)
        self._stream_body = wire.body(model, stream=True)
        self._client = httpx.AsyncClient(transport=transport, headers=wire.headers)

    async def complete(self) -> None:
        response = await self._client.post(self._url, json=self._body)
        response.raise_for_status()
        response.json()

    async def stream(self) -> float:
        first = 0.0
        async with self._client.stream("POST", self._url, json=self._stream_body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                text = text_of(self.dialect, json.loads(line[5:]))
                if text and not first:
                    first = perf_counter()
        if not first:
            raise RuntimeError(f"{self.name}: a stream without text")
        return first

    async def aclose(self) -> None:
        await self._client.aclose()
