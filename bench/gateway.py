"""`python -m bench.gateway`: what `switchover serve` adds over calling the provider directly, with
1, 2 and 4 workers, in one run.

Three kinds of real processes on loopback: the fake providers, `switchover serve` (one route with
one target on the fake, attempts spooled as in production) and this load generator
(bench.loadgen, aiohttp). For each number of workers, one gateway: open-loop load at fixed rates
(requests leave on a schedule whatever the answers do, so queueing shows in the latency as it
would for real callers), then closed loop, `CALLERS` callers back to back, for the most it
serves. Every phase alternates halves to the fake directly and through the gateway, so drifting
machine load weighs on both alike, and every gateway figure is read against the direct one of
its own block. The direct closed-loop phases are the load generator's own rate against the fake.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.cputime import machine_busy_s, tree_cpu_s
from bench.fake_process import REPO, FakeServerProcess, free_port, stop
from bench.gateway_report import section
from bench.loadgen import Load, Phase, combined

BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "How long does shipping to Lisbon take?"}],
    "max_tokens": 64,
}
KEY = "bench-gateway-key"
PATH = "/v1/chat/completions"
WORKERS = (1, 2, 4)
RATES = (100.0, 300.0)
CALLERS = 16
STARTED = "Application startup complete."  # uvicorn's line, once per worker


@dataclass(frozen=True)
class Sizes:
    open_s: float = 10.0  # per side and rate, in two alternating halves
    closed_s: float = 8.0  # per side, in two alternating halves
    warmup_s: float = 2.0


QUICK = Sizes(open_s=1.0, closed_s=1.0, warmup_s=0.5)


@dataclass(frozen=True)
class Side:
    """One side of a measurement: what the load generator saw, and the CPU time the server that
    answered it spent meanwhile (the fake for the direct side, serve's processes for the
    gateway's; None without /proc)."""

    phase: Phase
    server_cpu_s: float | None

    def server_busy(self) -> float | None:
        """The server's CPU time per second of the phase: CPUs it kept busy."""
        return None if self.server_cpu_s is None else self.server_cpu_s / self.phase.seconds

    def server_us_per_request(self) -> float | None:
        if self.server_cpu_s is None or not self.phase.requests:
            return None
        return self.server_cpu_s / self.phase.requests * 1e6


@dataclass(frozen=True)
class Block:
    """Everything measured with one gateway of `workers` workers."""

    workers: int
    callers: int  # of the closed loop
    open: dict[float, tuple[Side, Side]]  # rate → (direct, gateway)
    closed: tuple[Side, Side]
    others: float | None  # the share of the machine's CPUs other processes kept busy


@dataclass(frozen=True)
class Served:
    url: str
    pid: int
    data: Path  # its data folder (spool, and published/ once a scheduler runs on it)


@contextlib.contextmanager
def gateway(fake_url: str, workers: int) -> Iterator[Served]:
    """`switchover serve --workers N` on a free port, until every worker has started."""
    folder = Path(tempfile.mkdtemp(prefix="switchover-bench-gw-"))
    config = folder / "switchover.toml"
    config.write_text(
        f'[providers.fake]\nkind = "openai"\nbase_url = "{fake_url}/v1"\n'
        'api_key_env = "BENCH_FAKE_KEY"\n'
        '[routes.bench]\ntargets = ["fake/gpt-4.1-mini"]\n'
    )
    port, log = free_port(), folder / "serve.log"
    env = {**os.environ, "BENCH_FAKE_KEY": "k", "SWITCHOVER_GATEWAY_KEYS": KEY}
    with log.open("wb") as stderr:  # the access log goes to stdout, the rest here
        process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "serve", "-c", str(config), "--port", str(port),
             "--workers", str(workers), "--data-dir", str(folder / "data")],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_started(url, workers, process, log)
        yield Served(url, process.pid, folder / "data")
    finally:
        stop(process, signal.SIGTERM, 30)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_started(url: str, workers: int, process: subprocess.Popen[bytes], log: Path) -> None:
    # /readyz answers as soon as one worker does; a worker still starting would get no share
    # of the first phase's connections.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway exited at start-up:\n{log.read_text()[-2000:]}")
        if log.read_text(errors="replace").count(STARTED) >= workers:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"the gateway did not become ready:\n{log.read_text()[-2000:]}")


class _Meter:
    """CPU seconds one server's processes spend while a coroutine runs, added up."""

    def __init__(self, cpu_s: Callable[[], float | None]) -> None:
        self.cpu_s = cpu_s
        self.total: float | None = 0.0

    async def around(self, measurement: Coroutine[None, None, Phase]) -> Phase:
        before = self.cpu_s()
        phase = await measurement
        after = self.cpu_s()
        if self.total is None or before is None or after is None:
            self.total = None
        else:
            self.total += after - before
        return phase


Servers = tuple[Callable[[], float | None], Callable[[], float | None]]


async def _alternate(
    direct: Load, through: Load, servers: Servers, start: Callable[[Load], Coroutine]
) -> tuple[Side, Side]:
    """The fake directly and through the gateway, each in two halves, alternating."""
    meters = _Meter(servers[0]), _Meter(servers[1])
    halves: tuple[list[Phase], list[Phase]] = ([], [])
    for _ in range(2):
        for side, load in enumerate((direct, through)):
            halves[side].append(await meters[side].around(start(load)))
    return Side(combined(halves[0]), meters[0].total), Side(combined(halves[1]), meters[1].total)


async def _block(fake: FakeServerProcess, served: Served, workers: int, sizes: Sizes) -> Block:
    headers = {"authorization": f"Bearer {KEY}"}
    direct, through = Load(fake.url + PATH, BODY, headers), Load(served.url + PATH, BODY, headers)
    servers: Servers = (fake.cpu_s, lambda: tree_cpu_s(served.pid))
    await through.open_loop(50, sizes.warmup_s)  # connections, imports, caches
    busy, ours, began = machine_busy_s(), tree_cpu_s(os.getpid()), time.perf_counter()
    rows = {}
    half_open, half_closed = sizes.open_s / 2, sizes.closed_s / 2
    for rate in RATES:
        rows[rate] = await _alternate(
            direct, through, servers, lambda load, r=rate: load.open_loop(r, half_open)
        )
    closed = await _alternate(
        direct, through, servers, lambda load: load.closed_loop(CALLERS, half_closed)
    )
    return Block(workers, CALLERS, rows, closed, _others(busy, ours, time.perf_counter() - began))


def _others(busy: float | None, ours: float | None, wall_s: float) -> float | None:
    """The share of the machine's CPUs that processes other than this bench's kept busy."""
    after_busy, after_ours = machine_busy_s(), tree_cpu_s(os.getpid())
    if busy is None or ours is None or after_busy is None or after_ours is None:
        return None
    theirs = (after_busy - busy) - (after_ours - ours)
    return max(0.0, theirs / (wall_s * (os.cpu_count() or 1)))


def measure(sizes: Sizes, say: Callable[[str], None] = print) -> list[Block]:
    blocks = []
    with FakeServerProcess(pin=False) as fake:
        for workers in WORKERS:
            say(f"gateway with {workers} worker(s)")
            with gateway(fake.url, workers) as served:
                blocks.append(asyncio.run(_block(fake, served, workers, sizes)))
    return blocks


BEGIN = "<!-- begin: gateway, generated by `make bench`; edits here are overwritten -->"
END = "<!-- end: gateway -->"


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

    def say(what: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {what}", file=sys.stderr, flush=True)

    blocks = measure(QUICK if quick else Sizes(), say)
    text = section(blocks, command=command, runtime_s=time.monotonic() - started, when=when)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 s phases instead of 8-10 s")
    args = parser.parse_args()
    run(args.quick, "python -m bench.gateway" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
