"""Request bodies and SSE reading for the fake-provider tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

AN_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
OA_HEADERS = {"authorization": "Bearer sk-test"}
SEARCH_AN = {
    "name": "search",
    "description": "Search the web",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
}
SEARCH_OA = {
    "type": "function",
    "function": {"name": "search", "parameters": SEARCH_AN["input_schema"]},
}


@dataclass
class Streamed:
    response: httpx.Response
    text: str
    error: Exception | None

    @property
    def events(self) -> list[tuple[str | None, str]]:
        return sse(self.text)

    @property
    def names(self) -> list[str | None]:
        return [name for name, _ in self.events]

    @property
    def data(self) -> list[Any]:
        return sse_json(self.text)


def with_fault(headers: dict[str, str], fault: str | None) -> dict[str, str]:
    return {**headers, "x-fake-fault": fault} if fault else headers


def an_body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def oa_body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": text}], **extra}


def sse(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each SSE event; comments as (":", text)."""
    events = []
    for block in filter(None, text.split("\n\n")):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                name = ":"
                data.append(line[1:].strip())
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
        events.append((name, "\n".join(data)))
    return events


def sse_json(text: str) -> list[Any]:
    return [json.loads(d) for name, d in sse(text) if name != ":" and d != "[DONE]"]
