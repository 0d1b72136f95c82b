"""The HTTP transport under concurrency: httpx's default pool against the alternatives, through a
bare client and through the chain, against the fake server in its own process.

`python -m bench.transports [--quick]` prints a markdown table. For every transport and every
concurrency, the bare `Direct` client and `ThroughChain` (one OpenAI target) each run `rounds`
bursts of non-streaming calls; the transports take turns within each round, in a rotated order,
so that a drift over the run falls on all of them. Streaming is measured at one concurrency, as
time to the first text. Throughput is requests over the bursts' wall time.

Transports: httpx's default `AsyncHTTPTransport` (HTTP/1.1; httpx enables HTTP/2 only on
request, so "HTTP/1.1 only" is the default), the same with a pool as large as the highest
concurrency (no request ever waits for a connection, all stay kept alive), the engine's own
`engine.providers.transport.AiohttpTransport` (aiohttp underneath, httpx's timeouts and
exceptions on top; the providers' default), and, when installed, the two published adapters it
was chosen over: `httpx_aiohttp.AiohttpTransport` as it ships (its error mapping records a reset
after sending as a connect timeout) and `httpx_curl_cffi.AsyncCurlTransport` (libcurl; its read
timeout is a limit on the whole response, it has no pool or write timeout). httpx2/httpcore2
are not measured: their pool is httpcore's, line for line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from bench.contenders import Direct, ThroughChain
from bench.fake_process import FakeServerProcess
from bench.runner import Call, Connections, Samples, _burst
from bench.stats import percentile
from engine.providers.transport import AiohttpTransport

CONCURRENCIES = (1, 8, 32, 64)
STREAM_CONCURRENCY = 32
DIALECT = "openai"


@dataclass(frozen=True)
class Sizes:
    burst: int = 400  # requests per burst
    rounds: int = 3  # bursts per contender and concurrency
    warmup: int = 200  # one burst per contender before each concurrency


QUICK = Sizes(burst=64, rounds=1, warmup=32)


def transports() -> dict[str, Callable[[], httpx.AsyncBaseTransport]]:
    big = max(CONCURRENCIES)
    made: dict[str, Callable[[], httpx.AsyncBaseTransport]] = {
        "httpx default": httpx.AsyncHTTPTransport,
        f"httpx pool {big}/{big}": lambda: httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=big, max_keepalive_connections=big)
        ),
        "engine (aiohttp)": AiohttpTransport,
    }
    try:
        from httpx_aiohttp import AiohttpTransport as StockAiohttpTransport
    except ImportError:
        print("httpx-aiohttp is not installed: its rows are left out", file=sys.stderr)
    else:
        made["httpx-aiohttp"] = StockAiohttpTransport
    try:
        from httpx_curl_cffi import AsyncCurlTransport
    except ImportError:
        print("httpx-curl-cffi is not installed: its rows are left out", file=sys.stderr)
    else:  # httpx's default pool size, not the adapter's 10
        made["httpx-curl-cffi"] = lambda: AsyncCurlTransport(max_connections=100)
    return made


@dataclass
class Cell:
    transport: str
    via: str  # "bare" | "chain"
    mode: str  # "answer" | "stream"
    concurrency: int
    samples: Samples


async def _rounds(
    calls: dict[tuple[str, str], Call], n: int, c: int, rounds: int, warmup: int, mode: str
) -> list[Cell]:
    conns = Connections()  # never installed: connections are not counted here
    out = {key: Samples() for key in calls}
    keys = list(calls)
    for key in keys:
        await _burst(calls[key], warmup, c, Samples(), conns)
    for r in range(rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            gc.collect()
            await _burst(calls[key], n, c, out[key], conns)
    return [Cell(t, via, mode, c, s) for (t, via), s in out.items()]


async def measure(url: str, sizes: Sizes) -> list[Cell]:
    started = time.monotonic()
    made = transports()
    clients: dict[tuple[str, str], Direct | ThroughChain] = {}
    for name, factory in made.items():
        clients[(name, "bare")] = Direct(DIALECT, url, transport=factory())
        clients[(name, "chain")] = ThroughChain.single(DIALECT, url, transport=factory())
    cells: list[Cell] = []
    try:
        answers = {key: client.complete for key, client in clients.items()}
        for c in CONCURRENCIES:
            print(f"[{time.monotonic() - started:5.1f} s] answers at c={c}", file=sys.stderr)
            n = sizes.burst if c > 1 else sizes.burst // 2
            cells += await _rounds(answers, n, c, sizes.rounds, sizes.warmup, "answer")
        print(f"[{time.monotonic() - started:5.1f} s] streams", file=sys.stderr)
        streams = {key: client.stream for key, client in clients.items()}
        cells += await _rounds(
            streams, sizes.burst, STREAM_CONCURRENCY, sizes.rounds, sizes.warmup, "stream"
        )
    finally:
        for client in clients.values():
            await client.aclose()
    return cells


def table(cells: list[Cell]) -> str:
    names = list(dict.fromkeys(cell.transport for cell in cells))
    head = "| via | mode | conc. | " + " | ".join(names) + " |"
    lines = [head, "|---|---|--:|" + "--:|" * len(names)]
    base = {
        (c.via, c.mode, c.concurrency): c.samples.throughput
        for c in cells
        if c.transport == names[0]
    }
    rows: dict[tuple[str, str, int], dict[str, Cell]] = {}
    for cell in cells:
        rows.setdefault((cell.via, cell.mode, cell.concurrency), {})[cell.transport] = cell
    for (via, mode, conc), by_name in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0])):
        values = []
        for name in names:
            s = by_name[name].samples
            what = s.ttft_s if mode == "stream" else s.latency_s
            rate = s.throughput
            ratio = rate / base[(via, mode, conc)] if base[(via, mode, conc)] else 0.0
            values.append(
                f"{rate:.0f} req/s ({ratio:.2f}×), "
                f"{percentile(what, 50) * 1000:.2f} / {percentile(what, 99) * 1000:.2f} ms"
            )
        label = "answer p50 / p99" if mode == "answer" else "stream TTFT p50 / p99"
        lines.append(f"| {via} | {label} | {conc} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.transports", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check it runs")
    args = parser.parse_args()
    sizes = QUICK if args.quick else Sizes()
    with FakeServerProcess() as fake:
        cells = asyncio.run(measure(fake.url, sizes))
        pinned = fake.pinned or "not pinned"
    print(f"Transports against the fake server in its own process ({pinned}); {DIALECT}, ")
    print(
        f"{sizes.rounds} bursts of {sizes.burst} per cell (half that at c=1) after a warm-up "
        f"burst of {sizes.warmup}. Each cell: throughput (ratio to httpx default), p50 / p99.\n"
    )
    print(table(cells))


if __name__ == "__main__":
    main()
