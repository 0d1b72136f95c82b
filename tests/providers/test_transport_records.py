"""What an attempt records of a transport failure: no HTTP status when no status line arrived
(connect errors, resets and read timeouts before the headers), the response's status when one
did; and error texts that name what happened, never a status number the provider did not send.

The records come from the real chain and adapters: over the in-process fake on virtual time for
the statuses, over loopback through the aiohttp transport for the texts aiohttp writes."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import pytest
from helpers.chain_rig import PRIMARY, Rig

from engine.core.attempt import Attempt
from engine.core.errors import ChainError
from engine.core.messages import Message, Request
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers import AnthropicProvider, OpenAIProvider
from engine.providers.http import HttpProvider
from simulations.fakes import FakeProviders

ASK = Request(messages=(Message.user("where is my parcel?"),), max_tokens=64)


def primary_attempt(rig: Rig, fault: str, *, stream: bool) -> Attempt:
    """The first attempt at the primary, which answers with `fault` (a backup serves)."""
    rig.script(PRIMARY, fault)
    with contextlib.suppress(ChainError):
        rig.stream() if stream else rig.complete()
    return rig.attempts[0]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("fault", "error_class"),
    [
        ("connect_refused", "connect"),
        ("connect_timeout", "connect"),
        ("dns_failure", "connect"),
        ("reset", "reset"),
        ("reset:mode=fin", "reset"),
    ],
)
def test_a_failure_before_the_status_line_records_no_http_status(fault, error_class, stream):
    attempt = primary_attempt(Rig(primary_retries=0), fault, stream=stream)
    assert (attempt.error_class, attempt.http_status) == (error_class, None)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_the_chains_own_limit_before_the_status_line_records_no_http_status(stream):
    """The provider never answers and the chain's attempt or first-token limit ends the wait."""
    rig = Rig(primary_retries=0, first_token_timeout_s=3, attempt_timeout_s=3)
    attempt = primary_attempt(rig, "read_timeout", stream=stream)
    assert attempt.http_status is None
    assert attempt.error_class == ("stream_stalled" if stream else "read_timeout")
    if stream:
        assert attempt.error_message == (
            "stream stalled: no stream event for 3 s before the response headers"
        )


@pytest.mark.parametrize(
    ("fault", "error_class", "message"),
    [
        ("stream_cut:after_events=1", "stream_cut", "claude: stream cut: peer closed connection "
         "without sending complete message body (incomplete chunked read)"),
        ("slow_drip:interval=1,count=30", "stream_stalled",  # headers, then keep-alives only
         "stream stalled: no stream event for 3 s before the first content"),
        ("bad_event:after_events=1,count=4", "stream_cut",
         "claude: stream cut: 4 unreadable events"),
    ],
)  # fmt: skip
def test_a_stream_that_fails_after_its_status_line_records_that_status(fault, error_class, message):
    rig = Rig(primary_retries=0, first_token_timeout_s=3)
    attempt = primary_attempt(rig, fault, stream=True)
    assert (attempt.error_class, attempt.http_status, attempt.error_message) == (
        error_class,
        200,
        message,
    )


def test_an_http_error_keeps_its_status():
    attempt = primary_attempt(Rig(primary_retries=0), "529", stream=True)
    assert (attempt.error_class, attempt.http_status) == ("overloaded", 529)


# --- texts written by aiohttp, over loopback ---------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeProviders]:
    async with FakeProviders(port=0) as server:
        yield server


async def attempts_of(provider: HttpProvider, model: str, *, stream: bool) -> list[Attempt]:
    attempts: list[Attempt] = []
    chain = Chain("records", [Target(provider, model)], policy=Policy(primary_retries=0),
                  hooks=[attempts.append])  # fmt: skip
    async with provider:
        with contextlib.suppress(ChainError):
            if stream:
                async for _ in chain.stream(ASK):
                    pass
            else:
                await chain.complete(ASK)
    return attempts


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
@pytest.mark.parametrize(
    ("fault", "stream", "expected"),
    [
        ("stream_cut", True, "stream cut: the connection closed mid-body (transfer encoding)"),
        ("truncated_chunked", False, "truncated: the connection closed mid-body (transfer enc"),
        ("truncated", False, "truncated: the connection closed mid-body (content length)"),
    ],
)
async def test_a_body_cut_short_is_named_without_the_400_aiohttp_gives_it(
    fake, dialect, fault, stream, expected
):
    """aiohttp reports a cut body as `TransferEncodingError: 400, message=...`: recorded that
    way, a cut after a 200 read like an HTTP 400 from the provider."""
    provider = (
        AnthropicProvider("claude", base_url=fake.anthropic_url, api_key="k")
        if dialect == "anthropic"
        else OpenAIProvider("gpt", base_url=fake.openai_url, api_key="k")
    )
    (attempt,) = await attempts_of(provider, f"m#{fault}", stream=stream)
    assert attempt.http_status == 200
    assert attempt.error_message is not None and expected in attempt.error_message
    assert not re.search(r"\b400\b", attempt.error_message)
    assert "Error:" not in attempt.error_message


async def test_a_malformed_status_line_is_named_without_a_status():
    """A server that answers garbage: aiohttp's parser says `400, message='Bad status line'`."""

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.write(b"HTTP/1.1 abc Nope\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        provider = OpenAIProvider("gpt", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        (attempt,) = await attempts_of(provider, "m", stream=False)
    finally:
        server.close()
        await server.wait_closed()
    assert (attempt.error_class, attempt.http_status) == ("reset", None)
    assert attempt.error_message == (
        "RemoteProtocolError: a malformed HTTP answer: Bad status line: Invalid status code: "
        "b'HTTP/1.1 abc Nope' ^"
    )
