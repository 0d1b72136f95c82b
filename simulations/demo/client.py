"""The demo's callers: its traffic sent to the gateway over HTTP, as applications on the
official SDKs send theirs.

Nothing here knows the chain: who served a request is read from the answer's headers
(`x-switchover-route`, `-provider`, `-model`, `-attempts`, `-fallback`), as any caller can, and
the gateway's own recorder records every attempt. A stream counts as answered only when it
ends as its dialect ends a stream (`message_stop`, `[DONE]`): one that breaks off, or carries
an in-band error event, failed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from simulations.demo.traffic import Call, Traffic

KEYS_ENV = "SWITCHOVER_GATEWAY_KEYS"  # engine.gateway.server: the keys the gateway wants
READY_POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request as its caller saw it."""

    route: str
    status: int  # 0: no answer at all (the gateway unreachable)
    failed: bool
    fallback: bool = False
    provider: str | None = None
    model: str | None = None
    attempts: int = 0


def gateway_client(base_url: str) -> httpx.AsyncClient:
    """A client of the gateway at `base_url` with the key it asks for, when it asks for one."""
    keys = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    secret = (keys[0].partition(":")[2] or keys[0]) if keys else ""  # `label:secret`, or bare
    headers = {"authorization": f"Bearer {secret}"} if secret else {}
    # Patient like the SDKs: a request's budget (up to 30 s on the demo routes) is the limit.
    return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60)


async def wait_until_ready(client: httpx.AsyncClient) -> None:
    """Until the gateway answers /readyz (its supervisor stops the wait if it dies)."""
    while True:
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(READY_POLL_S)


async def send(client: httpx.AsyncClient, call: Call) -> Outcome:
    """`call` through the gateway, and what its answer's headers say about it."""
    try:
        async with client.stream("POST", call.path, json=call.body, headers=call.headers) as answer:
            ended = await _read(answer, call)
    except httpx.HTTPError:
        return Outcome(call.route, 0, failed=True)
    headers = answer.headers
    return Outcome(
        route=headers.get("x-switchover-route", call.route),
        status=answer.status_code,
        failed=answer.status_code != 200 or not ended,
        fallback=headers.get("x-switchover-fallback") == "true",
        provider=headers.get("x-switchover-provider"),
        model=headers.get("x-switchover-model"),
        attempts=int(headers.get("x-switchover-attempts", "0")),
    )


async def _read(answer: httpx.Response, call: Call) -> bool:
    """Read the whole answer; whether it ended as a complete answer of its dialect."""
    if not call.stream or answer.status_code != 200:
        await answer.aread()
        return True
    ended = False
    async for line in answer.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":  # OpenAI's last line
            ended = True
            continue
        try:
            event = json.loads(data)
        except ValueError:
            return False  # not an event of either dialect: nothing a caller could use
        if event.get("type") == "error" or "error" in event:  # in-band: the stream failed
            return False
        ended = ended or event.get("type") == "message_stop"  # Anthropic's last event
    return ended


async def send_traffic(
    client: httpx.AsyncClient,
    traffic: Traffic,
    rate_per_s: float,
    on_outcome: Callable[[Outcome], None],
) -> None:
    """Poisson arrivals at `rate_per_s`, each request on its own task, until cancelled; the
    requests still in flight are cancelled with it (nothing is sent after a stop)."""
    in_flight: set[asyncio.Task[None]] = set()

    async def one(call: Call) -> None:
        on_outcome(await send(client, call))

    try:
        while True:
            task = asyncio.create_task(one(traffic.call()))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            await asyncio.sleep(traffic.rng.expovariate(rate_per_s))
    finally:
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
