"""One attempt's edges: a bug on our side of one provider is contained, recorded and logged."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from engine.core.messages import (
    Message,
    MessageEnd,
    Request,
    Response,
    StreamEvent,
    Text,
    TextDelta,
    Usage,
)
from engine.fallback.chain import Chain
from engine.fallback.target import Target


class BrokenCodecProvider:
    """A provider peer whose decoding blows up, as a codec would on an unforeseen shape."""

    kind = "openai"

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response:
        raise KeyError("choices")

    async def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]:
        raise KeyError("delta")
        yield  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        pass


class HealthyProvider(BrokenCodecProvider):
    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response:
        return Response((Text("fine"),), "end_turn", Usage(3, 1), model)

    async def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]:
        yield TextDelta("fine")
        yield MessageEnd("end_turn", Usage(3, 1), model)


REQUEST = Request(messages=(Message.user("hi"),))


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_unexpected_error_in_one_provider_falls_back_and_is_logged(
    streaming: bool, caplog: pytest.LogCaptureFixture
):
    attempts = []
    chain = Chain(
        "r",
        [Target(BrokenCodecProvider("broken"), "m"), Target(HealthyProvider("ok"), "m")],
        hooks=[attempts.append],
    )
    with caplog.at_level(logging.ERROR, logger="switchover.chain"):
        if streaming:
            events = [e async for e in chain.stream(REQUEST)]
            assert isinstance(events[-1], MessageEnd)
        else:
            assert (await chain.complete(REQUEST)).text == "fine"
    assert [(a.target, a.error_class) for a in attempts] == [
        ("broken/m", "internal"),
        ("broken/m", "internal"),
        ("ok/m", None),
    ]
    assert "unexpected error talking to broken/m" in caplog.text
