"""What a route's behaviours cost per request: PII masking (and restoring), a prompt per
target, an output contract, and operator switches, each against the same route without it, in
the same run, through the real chain and provider adapter over the in-process fake provider.

    python -m bench.shaping [--quick]

CPU per request is what matters here (the fake answers at once, so a request's time is the
engine's own work): the ratio is the route with the behaviour over the plain route.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from engine.config import parse_config
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from engine.state.breaker import MemoryBreakerStore
from simulations.fakes import FakeTransport

PROVIDERS = """
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "K"
[prompts.gpt-support]
version = "1"
template = "{system}\\nAnswer in JSON."
"""
ROUTES = {
    "plain": 'targets = ["gpt/gpt-4.1-mini"]',
    "PII masked (every kind)": 'targets = ["gpt/gpt-4.1-mini"]\npii = true',
    "PII masked and restored": 'targets = ["gpt/gpt-4.1-mini"]\npii = true\npii_restore = true',
    "a prompt per target": 'targets = [{ target = "gpt/gpt-4.1-mini", prompt = "gpt-support" }]',
    "output contract (JSON Schema)": 'targets = ["gpt/gpt-4.1-mini"]\noutput_schema = '
    '{ type = "object", required = ["intent"], properties = { intent = { type = "string" } } }',
    "operator switches (data folder)": 'targets = ["gpt/gpt-4.1-mini"]',
}
# A support message of the kind the masking is for: ~1.2 KB with a CPF, a card, an e-mail and
# a phone number in it.
MESSAGE = (
    "Olá, meu nome é Ana e meu CPF é 123.456.789-09. Fiz uma compra com o cartão "
    "4111 1111 1111 1111 e não recebi o pedido 884213. Meu e-mail é ana.souza@example.com.br "
    "e meu telefone é +55 11 91234-5678. " * 4
)
ANSWER = '{"intent": "refund"}'


@dataclass(frozen=True, slots=True)
class Measured:
    name: str
    us_per_request: float  # median of the rounds


def measure(name: str, route: str, requests: int, rounds: int) -> Measured:
    data = Path(tempfile.mkdtemp(prefix="switchover-bench-shaping-"))
    config = parse_config(tomllib.loads(PROVIDERS + "[routes.r]\n" + route))
    fake = FakeTransport(reply_text=ANSWER)
    record_to = DataPaths(data) if name.startswith("operator") else None
    # The data folder would also share breakers through its SQLite file (bench/breakers.py
    # measures that): the memory store keeps this row to the switches alone.
    breakers = MemoryBreakerStore(config.policy.breaker_policy())
    sw = Switchover(config, transport=fake, environ={"K": "k"}, record_to=record_to,
                    breakers=breakers)  # fmt: skip
    if sw.recorder is not None:  # the switches, not the spool, are what this row measures
        sw.hooks.remove(sw.recorder)
        sw.chain("r").hooks.remove(sw.recorder)
    chain = sw.chain("r")
    request = Request(messages=(Message.user(MESSAGE),), system="You are a support agent.")

    async def run() -> list[float]:
        for _ in range(50):  # warm-up
            await chain.complete(request)
        per_round = []
        for _ in range(rounds):
            started = time.process_time()
            for _ in range(requests):
                await chain.complete(request)
            per_round.append((time.process_time() - started) / requests * 1e6)
        await sw.aclose()
        return per_round

    return Measured(name, statistics.median(asyncio.run(run())))


def section(rows: list[Measured], *, command: str, when: datetime, requests: int) -> str:
    base = rows[0].us_per_request
    lines = [
        "## Route behaviours",
        "",
        f"`{command}` on {when:%Y-%m-%d %H:%M} UTC: CPU per request through the real chain and "
        f"OpenAI adapter over the in-process fake (which answers at once), median of rounds of "
        f"{requests:,} requests, a 1.2 KB message with a CPF, a card, an e-mail and a phone "
        "number; each behaviour against the plain route of the same run.",
        "",
        "| route | CPU µs / request | ratio to plain | added µs |",
        "|---|--:|--:|--:|",
    ]
    for row in rows:
        us = row.us_per_request
        lines.append(f"| {row.name} | {us:,.0f} | {us / base:.2f}× | {us - base:+,.0f} |")
    return "\n".join(lines) + "\n"


def run(quick: bool, command: str) -> str:
    when = datetime.now(UTC)
    requests, rounds = (100, 3) if quick else (1000, 5)
    rows = [measure(name, route, requests, rounds) for name, route in ROUTES.items()]
    text = section(rows, command=command, when=when, requests=requests)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.shaping", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 requests a round, 3 rounds")
    args = parser.parse_args()
    run(args.quick, "python -m bench.shaping" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
