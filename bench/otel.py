"""What the OpenTelemetry export costs a request: the in-process chain against the in-process
fake provider, p50 and p99 per request with the export off and on.

`python -m bench.otel [--quick]` prints the table; `run()` returns its rows.

- off: no request hook (the chain's `finishing` does nothing).
- on, in memory: the exporter with the SDK's in-memory span exporter behind its
  BatchSpanProcessor and an in-memory metric reader: the hook, this module's thread making
  spans and metrics, the SDK's span thread.
- on, unreachable: OTLP/HTTP to a closed loopback port (export timeout 0.5 s): the same, with
  the SDK's exporter failing and retrying on its own thread.

The cases run interleaved in rounds of `batch` requests, so a noisy neighbour hits them alike;
one request at a time on one event loop, each timed alone (perf_counter around the await).
Target (issue 25): at most +0.1 ms p50 per request. Never asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import time
import tomllib
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.stats import percentile
from engine.config import parse_config
from engine.core.clock import SystemClock
from engine.core.pricing import Pricer
from engine.runtime.switchover import Switchover, request_of
from engine.telemetry.otel import OtelExporter, otlp_exporter
from simulations.fakes import FakeTransport

TARGET_MS = 0.1
CONFIG = """
[providers.claude]
kind = "anthropic"
base_url = "http://anthropic.fake"
api_key_env = "BENCH_KEY"
[routes.support]
targets = ["claude/claude-sonnet-4-5"]
"""


@dataclass(frozen=True)
class Sizes:
    rounds: int = 20
    batch: int = 1_000  # requests per case per round


QUICK = Sizes(rounds=4, batch=250)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exporters() -> dict[str, OtelExporter | None]:
    pricer = Pricer()
    pricer.warm()
    url = f"http://127.0.0.1:{_closed_port()}"
    return {
        "off": None,
        "on, in memory": OtelExporter(
            span_exporter=_Forgetful(), metric_reader=InMemoryMetricReader(), pricer=pricer
        ),
        "on, unreachable collector": otlp_exporter(
            traces_url=f"{url}/v1/traces",
            metrics_url=f"{url}/v1/metrics",
            service_name="bench",
            headers={},
            timeout_s=0.5,
            pricer=pricer,
        ),
    }


class _Forgetful(InMemorySpanExporter):
    """The in-memory exporter, emptied at each export (a long run would hold every span)."""

    def export(self, spans: Any) -> Any:
        result = super().export(spans)
        self.clear()
        return result


async def _measure(sizes: Sizes) -> dict[str, list[float]]:
    config = parse_config(tomllib.loads(CONFIG))
    exporters = _exporters()
    hosts = {}
    for name, exporter in exporters.items():
        fake = FakeTransport(clock=SystemClock())
        sw = Switchover(config, transport=fake, environ={"BENCH_KEY": "k"})
        if exporter is not None:
            sw.chain("support").request_hooks.append(exporter)
        hosts[name] = sw
    samples: dict[str, list[float]] = {name: [] for name in hosts}
    clock, request = time.perf_counter, request_of("hello", {"max_tokens": 16})
    for sw in hosts.values():  # warm-up: connections, codecs, the first spans
        for _ in range(200):
            await sw.complete("support", "hello", max_tokens=16)
    for _ in range(sizes.rounds):
        for name, sw in hosts.items():
            chain, out = sw.chain("support"), samples[name]
            for _ in range(sizes.batch):
                t0 = clock()
                await chain.complete(request)
                out.append(clock() - t0)
    for name, sw in hosts.items():
        await sw.aclose()
        exporter = exporters[name]
        if exporter is not None:
            exporter.shutdown(0.5)
    return samples


def run(sizes: Sizes = Sizes()) -> list[dict[str, Any]]:
    samples = asyncio.run(_measure(sizes))
    base = samples["off"]
    base_p50 = percentile(base, 50)
    rows = []
    for name, values in samples.items():
        p50 = percentile(values, 50)
        rows.append(
            {
                "case": name,
                "n": len(values),
                "p50_ms": p50 * 1000,
                "p99_ms": percentile(values, 99) * 1000,
                "added_p50_ms": (p50 - base_p50) * 1000,
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | requests | p50 ms | p99 ms | added p50 ms (target ≤ 0.1) |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in rows:
        added = "" if r["case"] == "off" else f"{r['added_p50_ms']:+.3f}"
        lines.append(
            f"| {r['case']} | {r['n']:,} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {added} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.otel", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a fifth of the requests")
    args = parser.parse_args()
    # The SDK says each failed export of the unreachable case; the table is the output.
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
    started = time.monotonic()
    print(table(run(QUICK if args.quick else Sizes())))
    print(f"\notel bench: {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
