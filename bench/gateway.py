"""`python -m bench.gateway`: what the gateway process adds over calling the provider directly.

Three real processes on loopback: the fake providers, `switchover serve` (one route with one
target on the fake, telemetry spooled as in production) and this load generator. Open-loop
load at fixed rates (requests are sent on a schedule, whatever the answers do, so queueing
shows up in the latency as it would for real users), the same body to the fake directly and
through the gateway, alternating; then the maximum throughput, closed-loop at a fixed
concurrency, for 1 and 2 gateway workers. Ratios against the direct calls of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.fake_process import REPO, FakeServerProcess, free_port
from bench.stats import percentile

BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "How long does shipping to Lisbon take?"}],
    "max_tokens": 64,
}
KEY = "bench-gateway-key"
# httpx's own pool degrades past ~16 concurrent requests per client (see docs/benchmarks.md):
# more callers would measure the load generator, not the gateway.
CALLERS = 16


@dataclass(frozen=True)
class Result:
    case: str
    direct_p50: float
    direct_p99: float
    gateway_p50: float
    gateway_p99: float
    errors: int

    def line(self) -> str:
        return (
            f"| {self.case} | {self.direct_p50:.2f} / {self.direct_p99:.2f} | "
            f"{self.gateway_p50:.2f} / {self.gateway_p99:.2f} | "
            f"+{self.gateway_p50 - self.direct_p50:.2f} / +{self.gateway_p99 - self.direct_p99:.2f}"
            f" | {self.gateway_p50 / self.direct_p50:.2f}× / "
            f"{self.gateway_p99 / self.direct_p99:.2f}× | {self.errors} |"
        )


@contextlib.contextmanager
def gateway(fake_url: str, workers: int) -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="switchover-bench-gw-"))
    config = folder / "switchover.toml"
    config.write_text(
        f'[providers.fake]\nkind = "openai"\nbase_url = "{fake_url}/v1"\n'
        'api_key_env = "BENCH_FAKE_KEY"\n'
        '[routes.bench]\ntargets = ["fake/gpt-4.1-mini"]\n'
    )
    port = free_port()
    env = {**os.environ, "BENCH_FAKE_KEY": "k", "SWITCHOVER_GATEWAY_KEYS": KEY}
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "-c", str(config), "--port", str(port),
         "--workers", str(workers), "--data-dir", str(folder / "data")],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError("the gateway did not become ready")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


async def _post(client: httpx.AsyncClient, url: str, latencies: list[float]) -> bool:
    started = time.perf_counter()
    response = await client.post(url, json=BODY, headers={"authorization": f"Bearer {KEY}"})
    latencies.append((time.perf_counter() - started) * 1000)
    return response.status_code == 200


async def open_loop(url: str, rate: float, seconds: float) -> tuple[list[float], int]:
    """Send at `rate` per second on a fixed schedule, whatever the answers do."""
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        tasks = []
        start = time.perf_counter()
        for n in range(int(rate * seconds)):
            delay = start + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_post(client, url, latencies)))
        results = await asyncio.gather(*tasks)
    return latencies, results.count(False)


async def closed_loop(url: str, concurrency: int, seconds: float) -> tuple[float, int]:
    """Requests per second with `concurrency` callers sending back to back."""
    done = errors = 0
    end = time.perf_counter() + seconds
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def caller() -> None:
            nonlocal done, errors
            while time.perf_counter() < end:
                ok = await _post(client, url, latencies)
                done, errors = done + 1, errors + (not ok)

        await asyncio.gather(*(caller() for _ in range(concurrency)))
    return done / seconds, errors


def measure(seconds: float, rates: tuple[float, ...]) -> list[str]:
    lines = [
        "| load | direct p50 / p99 ms | gateway p50 / p99 ms | added ms | ratio | errors |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    with FakeServerProcess(pin=False) as fake, gateway(fake.url, workers=1) as gw:
        direct_url, gateway_url = f"{fake.url}/v1/chat/completions", f"{gw}/v1/chat/completions"
        asyncio.run(open_loop(gateway_url, 50, 2))  # warm-up: connections, imports, caches
        for rate in rates:
            direct = gateway_lat = []
            errors = 0
            for _ in range(2):  # alternate, so drifting machine load hits both sides alike
                d, e1 = asyncio.run(open_loop(direct_url, rate, seconds / 2))
                g, e2 = asyncio.run(open_loop(gateway_url, rate, seconds / 2))
                direct, gateway_lat, errors = direct + d, gateway_lat + g, errors + e1 + e2
            lines.append(
                Result(
                    f"{rate:g} req/s open loop",
                    percentile(direct, 50),
                    percentile(direct, 99),
                    percentile(gateway_lat, 50),
                    percentile(gateway_lat, 99),
                    errors,
                ).line()
            )
        direct_rps, _ = asyncio.run(closed_loop(direct_url, CALLERS, seconds))
        one_rps, one_err = asyncio.run(closed_loop(gateway_url, CALLERS, seconds))
    with FakeServerProcess(pin=False) as fake, gateway(fake.url, workers=2) as gw:
        asyncio.run(open_loop(f"{gw}/v1/chat/completions", 50, 2))
        two_rps, two_err = asyncio.run(closed_loop(f"{gw}/v1/chat/completions", CALLERS, seconds))
    lines += [
        "",
        f"| maximum throughput, {CALLERS} callers back to back | req/s | errors |",
        "|---|--:|--:|",
        f"| fake provider directly | {direct_rps:,.0f} | 0 |",
        f"| gateway, 1 worker | {one_rps:,.0f} ({one_rps / direct_rps:.2f}×) | {one_err} |",
        f"| gateway, 2 workers | {two_rps:,.0f} ({two_rps / direct_rps:.2f}×) | {two_err} |",
    ]
    return lines


BEGIN = "<!-- begin: gateway, generated by `make bench`; edits here are overwritten -->"
END = "<!-- end: gateway -->"


def section(lines: list[str], *, command: str, runtime_s: float, when: datetime) -> str:
    return "\n".join(
        [
            "## Gateway",
            "",
            f"- Command: `{command}` (this part ran {runtime_s / 60:.1f} min)",
            f"- Date: {when:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs shared by the load "
            "generator, `switchover serve` and the fake provider (three processes)",
            "- Open loop: requests leave on a fixed schedule whatever the answers do, the same "
            "body to the fake provider directly and through the gateway (one route, one "
            "target, attempts spooled as in production), alternating halves of each phase",
            "",
            *lines,
            "",
            "How to read this: *added* is what a caller waits for on top of the provider, at "
            "that load; the throughput rows are the most the gateway serves on this machine "
            f"with {CALLERS} callers, against what the same load generator gets from the fake "
            "provider directly.",
        ]
    )


def write(path: Path, text: str) -> None:
    """Replace the gateway section of docs/benchmarks.md (or add it at the end)."""
    doc = path.read_text()
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + block + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


def run(quick: bool, command: str) -> str:
    started, when = time.monotonic(), datetime.now(UTC)
    lines = measure(2.0 if quick else 20.0, (50.0, 200.0))
    text = section(lines, command=command, runtime_s=time.monotonic() - started, when=when)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 s phases instead of 20 s")
    args = parser.parse_args()
    run(args.quick, "python -m bench.gateway" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
