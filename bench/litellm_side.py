"""`bench/.venv-litellm/bin/python -m bench.litellm_side URL [--sizes JSON]`: LiteLLM's Router
against a bare httpx call to the same fake provider, measured the way `bench.cases` measures the
chain, printed as JSON on stdout for `bench.peer`.

Runs only in the bench-only virtual environment that `make bench-venv` builds
(bench/.venv-litellm), because LiteLLM is never a dependency of Switchover; so it imports nothing
from `engine/`. The baseline is `bench.wire.Direct` and the timing loops are `bench.runner`: the
very code the chain's side is measured with. The router has one deployment, `openai/gpt-4o` at
the fake's OpenAI-compatible endpoint, and LiteLLM's defaults otherwise. Its telemetry is off
and it reads the price map it ships (`bench.peer` sets LITELLM_LOCAL_MODEL_COST_MAP and
LITELLM_OFFLINE_MODE before this process starts): nothing may leave the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from importlib.metadata import version
from time import perf_counter
from typing import Any

import httpx
import litellm
from litellm import Router

from bench.peer import Sizes
from bench.runner import Connections, Samples, bursts, sequential, warm_up
from bench.wire import API_KEY, MAX_TOKENS, MODELS, OPENAI, PROMPT, Direct

MODEL = MODELS["openai"]
MESSAGES = [{"role": "user", "content": PROMPT}]


class ThroughRouter:
    """The same call through `litellm.Router.acompletion`, read the way a caller would."""

    def __init__(self, root_url: str) -> None:
        self.name = f"litellm {version('litellm')} Router"
        deployment = {
            "model_name": MODEL,
            "litellm_params": {
                "model": f"openai/{MODEL}",
                "api_base": root_url + "/v1",
                "api_key": API_KEY,
            },
        }
        self.router = Router(model_list=[deployment])

    async def complete(self) -> None:
        response = await self.router.acompletion(
            model=MODEL, messages=MESSAGES, max_tokens=MAX_TOKENS
        )
        if not response.choices[0].message.content:
            raise RuntimeError(f"{self.name}: an answer without text")

    async def stream(self) -> float:
        first = 0.0
        response = await self.router.acompletion(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in response:
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = perf_counter()
        if not first:
            raise RuntimeError(f"{self.name}: a stream without text")
        return first


async def measure(url: str, sizes: Sizes, *, concurrent: bool = True) -> dict[str, Any]:
    conns = Connections()
    conns.install()
    direct, router = Direct(OPENAI, url), ThroughRouter(url)
    phases = []
    async with httpx.AsyncClient() as control:
        calls = {
            "answer": (direct.complete, router.complete),
            "stream": (direct.stream, router.stream),
        }
        for mode, (a, b) in calls.items():
            await control.post(url + "/_fake/reset")
            await warm_up(a, b, sizes.warmup, conns)
            await _same_bodies(control, url, mode)
            base, subject = await sequential(a, b, sizes.sequential, conns)
            phases.append(_phase(mode, 1, base, subject))
            if not concurrent:
                continue

            await control.post(url + "/_fake/reset")
            await warm_up(a, b, sizes.burst_warmup, conns, sizes.concurrency)
            base, subject = await bursts(
                a, b, sizes.burst, conns, concurrency=sizes.concurrency, rounds=sizes.rounds
            )
            phases.append(_phase(mode, sizes.concurrency, base, subject))
    await direct.aclose()
    return {"litellm": version("litellm"), "subject": router.name, "phases": phases}


async def _same_bodies(control: httpx.AsyncClient, url: str, mode: str) -> None:
    """Like `cases.Run._same_bodies`: both sides must have sent one and the same JSON."""
    response = await control.get(url + "/_fake/log")
    response.raise_for_status()
    bodies = {json.dumps(c["request"], sort_keys=True) for c in response.json()}
    if len(bodies) != 1:
        raise RuntimeError(f"{mode}: httpx and LiteLLM sent different bodies: {bodies}")


def _phase(mode: str, concurrency: int, base: Samples, subject: Samples) -> dict[str, Any]:
    return {
        "mode": mode,
        "concurrency": concurrency,
        "base": dataclasses.asdict(base),
        "subject": dataclasses.asdict(subject),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.litellm_side", description=__doc__)
    parser.add_argument("url", help="the fake server's root URL")
    parser.add_argument("--sizes", default="{}", help="JSON of Sizes fields")
    parser.add_argument("--one-at-a-time", action="store_true", help="no bursts")
    args = parser.parse_args()
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    sizes = Sizes(**json.loads(args.sizes))
    measured = measure(args.url, sizes, concurrent=not args.one_at_a_time)
    json.dump(asyncio.run(measured), sys.stdout)


if __name__ == "__main__":
    main()
