"""Fixtures for the fake providers: each wire-level test runs against the socket server and the
in-process transport alike (they must be indistinguishable to a client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, Streamed, an_body, oa_body, with_fault

from engine.core.clock import Clock, SystemClock, VirtualClock
from simulations.fakes import FakeProviders, FakeTransport
from simulations.fakes.app import Controlled


@dataclass
class Backend:
    kind: str  # "server" or "transport"
    fake: Controlled
    client: httpx.AsyncClient
    clock: Clock

    async def anthropic(
        self, text: str = "hello", fault: str | None = None, **body: Any
    ) -> httpx.Response:
        return await self.client.post(
            "/v1/messages", headers=with_fault(AN_HEADERS, fault), json=an_body(text, **body)
        )

    async def openai(
        self, text: str = "hello", fault: str | None = None, **body: Any
    ) -> httpx.Response:
        return await self.client.post(
            "/v1/chat/completions",
            headers=with_fault(OA_HEADERS, fault),
            json=oa_body(text, **body),
        )

    async def call(self, dialect: str, fault: str | None = None, **body: Any) -> httpx.Response:
        return await (self.anthropic if dialect == "anthropic" else self.openai)(
            fault=fault, **body
        )

    async def stream(
        self,
        dialect: str,
        fault: str | None = None,
        timeout: httpx.Timeout | None = None,
        **body: Any,
    ) -> Streamed:
        """Send with stream:true and read what arrives, keeping the error that ends it, if any
        (a `timeout` for the request replaces the client's)."""
        if dialect == "anthropic":
            path, headers, payload = "/v1/messages", AN_HEADERS, an_body(**{"stream": True, **body})
        else:
            path, headers, payload = (
                "/v1/chat/completions",
                OA_HEADERS,
                oa_body(**{"stream": True, **body}),
            )
        chunks: list[bytes] = []
        error: Exception | None = None
        timeout_ = self.client.timeout if timeout is None else timeout
        async with self.client.stream(
            "POST", path, headers=with_fault(headers, fault), json=payload, timeout=timeout_
        ) as response:
            try:
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
            except httpx.TransportError as e:
                error = e
        return Streamed(response, b"".join(chunks).decode(), error)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


async def _backend(kind: str, clock: Clock) -> AsyncIterator[Backend]:
    if kind == "server":
        async with (
            FakeProviders(clock=clock) as server,
            httpx.AsyncClient(base_url=server.base_url) as client,
        ):
            yield Backend("server", server, client, clock)
    else:
        transport = FakeTransport(clock=clock)
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            yield Backend("transport", transport, client, clock)


@pytest.fixture(params=["server", "transport"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A client and its fake, over loopback or in process. The clock is virtual and moved by
    hand (sleeps on it return at once), so schedule tests need no real waiting."""
    async for made in _backend(request.param, VirtualClock()):
        yield made


@pytest.fixture(params=["server", "transport"])
async def realtime(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Like `backend` but on the system clock, for faults about waits and timeouts."""
    async for made in _backend(request.param, SystemClock()):
        yield made


@pytest.fixture
async def server() -> AsyncIterator[FakeProviders]:
    """A server on the real clock, for the tests about real waits and sockets."""
    async with FakeProviders() as fake:
        yield fake
