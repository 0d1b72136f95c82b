"""A scripted provider endpoint for adapter tests: answers with the given handler and keeps
every request it received, so tests can read the wire body the adapter sent."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from engine.core.clock import VirtualClock
from engine.providers.http import HttpProvider


class Recorder:
    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)

    @property
    def body(self) -> dict:
        return json.loads(self.requests[-1].content)


def make_provider(
    factory: type[HttpProvider],
    name: str,
    api_key: str,
    answer: Callable[[httpx.Request], httpx.Response],
    **kwargs,
) -> tuple:
    recorder = Recorder(answer)
    provider = factory(
        name, api_key=api_key, transport=httpx.MockTransport(recorder), clock=VirtualClock(),
        **kwargs,
    )  # fmt: skip
    return provider, recorder
