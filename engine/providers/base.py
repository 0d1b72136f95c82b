"""The narrow interfaces of the provider layer: `Provider`, what the chain calls, and
`StreamDecoder`, what a dialect's stream state machine offers `engine.providers.stream`.

A leaf: protocols over the neutral types, no HTTP client and no dialect. `HttpProvider`
(engine.providers.http) is one implementation; the simulator's fakes are peers of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from engine.core.messages import Request, Response, StreamEvent

__all__ = ["Provider", "StreamDecoder"]


@runtime_checkable
class Provider(Protocol):
    """What the chain needs from a provider. Every failure is raised as an `AttemptError`.

    A stream may also say `http_status` (as `HttpStream` does): the response's status once
    its status line arrived, None before; a failure the chain itself times is recorded with
    it. A stream without the attribute (a provider that is no HTTP server) records none."""

    name: str  # the configured name, e.g. "claude"
    kind: str  # "anthropic" | "openai"

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response: ...

    def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...


class StreamDecoder(Protocol):
    """A dialect's stream state machine.

    `done`: the end marker arrived, nothing more is to be read. `finished`: the finish reason
    arrived, the answer is whole. `finish()`: the final events (ending with `MessageEnd`) of a
    finished stream whose end marker never came."""

    done: bool

    @property
    def finished(self) -> bool: ...

    def finish(self) -> list[StreamEvent]: ...
