"""What a shared breaker store costs per request: the SQLite file (one host) against the
in-memory store, measured in the same run.

    python -m bench.breakers [--quick]

Three measures, each as a ratio to the memory store of the same run:
- a request through the real chain and OpenAI adapter over the in-process fake provider (which
  answers at once, so a request's time is the engine's own work), CPU per request: the
  breaker's share of a request;
- the store's calls alone, as a request makes them (one `admit` on a closed breaker, one
  `record(Success)`): wall time per call, median and p99, and the longest single call, which
  is how long one call held the event loop;
- the same calls from two processes at once on one key, as two gateway workers make them:
  the write lock is then contended, and waiting for it yields to the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import tempfile
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.stats import percentile
from engine.config import parse_config
from engine.core.messages import Message, Request
from engine.runtime.switchover import Switchover
from engine.state.breaker import BreakerStore, MemoryBreakerStore, Success
from engine.state.breaker_sqlite import SQLiteBreakerStore
from simulations.fakes import FakeTransport

CONFIG = """
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "K"
[routes.r]
targets = ["gpt/gpt-4.1-mini", "gpt/gpt-4.1"]
"""
KEY = "gpt/gpt-4.1-mini"


@dataclass(frozen=True, slots=True)
class Sizes:
    requests: int = 2000  # per round, through the chain
    rounds: int = 5
    calls: int = 20_000  # store calls alone, per process


QUICK = Sizes(requests=200, rounds=3, calls=2000)


@dataclass(frozen=True, slots=True)
class Calls:
    """Per store call, in µs: wall time (median; p99 of the writes), and the longest the event
    loop was held by one call, in CPU time: the most CPU spent between two turns of a task
    that yields beside the calls (CPU, not wall time, so that the OS running other processes
    does not count; a call waiting for another process's write lock yields to the loop)."""

    admit_p50_us: float
    record_p50_us: float
    record_p99_us: float
    longest_hold_us: float


@dataclass(frozen=True, slots=True)
class Measured:
    store: str
    request_cpu_us: float  # median of the rounds
    calls: Calls  # one process
    contended: Calls | None  # two processes on one key (None for memory: nothing is shared)


def _store(kind: str, folder: Path) -> BreakerStore:
    if kind == "memory":
        return MemoryBreakerStore()
    return SQLiteBreakerStore(folder / "state" / "breakers.sqlite")


def through_chain(kind: str, sizes: Sizes) -> float:
    """CPU µs per request through the chain on `kind`'s store (median of the rounds)."""
    folder = Path(tempfile.mkdtemp(prefix="switchover-bench-breakers-"))
    breakers = _store(kind, folder)
    sw = Switchover(parse_config(tomllib.loads(CONFIG)), transport=FakeTransport(),
                    environ={"K": "k"}, breakers=breakers)  # fmt: skip
    chain = sw.chain("r")
    request = Request(messages=(Message.user("Where is my order?"),))

    async def run() -> list[float]:
        for _ in range(100):  # warm-up
            await chain.complete(request)
        rounds = []
        for _ in range(sizes.rounds):
            started = time.process_time()
            for _ in range(sizes.requests):
                await chain.complete(request)
            rounds.append((time.process_time() - started) / sizes.requests * 1e6)
        await sw.aclose()
        close = getattr(breakers, "aclose", None)
        if close is not None:
            await close()
        return rounds

    return statistics.median(asyncio.run(run()))


async def _calls(store: BreakerStore, calls: int) -> Calls:
    """`calls` pairs of admit + record(Success), as a request on a closed breaker makes them,
    each call followed by a turn of the loop (a gateway's requests await I/O between them)."""
    seen: dict[str, list[float]] = {"admit": [], "record": []}
    now = time.monotonic()
    longest = 0.0
    done = False

    async def beside() -> None:  # the loop's other work: how long must it wait for a turn?
        nonlocal longest
        while not done:
            turn = time.thread_time()
            await asyncio.sleep(0)
            longest = max(longest, time.thread_time() - turn)

    other = asyncio.create_task(beside())
    await asyncio.sleep(0)
    for _ in range(calls // 2):
        for name in ("admit", "record"):
            call = store.admit(KEY, now) if name == "admit" else store.record(KEY, Success(), now)
            started = time.perf_counter()
            await call
            seen[name].append((time.perf_counter() - started) * 1e6)
            await asyncio.sleep(0)
    done = True
    await other
    return Calls(
        percentile(seen["admit"], 50),
        percentile(seen["record"], 50),
        percentile(seen["record"], 99),
        longest * 1e6,
    )


def store_calls(kind: str, sizes: Sizes) -> Calls:
    folder = Path(tempfile.mkdtemp(prefix="switchover-bench-breakers-"))
    return asyncio.run(_calls_on(kind, folder, sizes.calls))


async def _calls_on(kind: str, folder: Path, calls: int) -> Calls:
    store = _store(kind, folder)
    await _calls(store, 200)  # warm-up: the file is open and prepared
    measured = await _calls(store, calls)
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()
    return measured


def _worker(folder: str, calls: int, start: object, out: object) -> None:
    out.put(asyncio.run(_after(start, _calls_on("sqlite", Path(folder), calls))))  # type: ignore[attr-defined]


async def _after(start: object, work: object) -> Calls:
    start.wait()  # type: ignore[attr-defined]
    return await work  # type: ignore[misc]


def contended_calls(sizes: Sizes, processes: int = 2) -> Calls:
    """The SQLite store's calls from `processes` processes at once, on one key: the slowest
    process's figures."""
    folder = tempfile.mkdtemp(prefix="switchover-bench-breakers-")
    spawn = multiprocessing.get_context("spawn")
    start, out = spawn.Barrier(processes), spawn.Queue()
    workers = [
        spawn.Process(target=_worker, args=(folder, sizes.calls, start, out))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    measured = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    return max(measured, key=lambda c: c.record_p99_us)


def measure(sizes: Sizes) -> list[Measured]:
    return [
        Measured("memory", through_chain("memory", sizes), store_calls("memory", sizes), None),
        Measured(
            "sqlite",
            through_chain("sqlite", sizes),
            store_calls("sqlite", sizes),
            contended_calls(sizes),
        ),
    ]


def section(rows: list[Measured], *, command: str, when: datetime, sizes: Sizes) -> str:
    memory = rows[0]
    lines = [
        "## Breaker stores",
        "",
        f"`{command}` on {when:%Y-%m-%d %H:%M} UTC: the SQLite file of one host "
        "(engine/state/breaker_sqlite.py, WAL, `synchronous=OFF`, one `BEGIN IMMEDIATE` per "
        "change) "
        "against the in-memory store, in the same run. A request: CPU through the real chain "
        f"and OpenAI adapter over the in-process fake, median of {sizes.rounds} rounds of "
        f"{sizes.requests:,}. Store calls: each `admit` (a read, on a closed breaker) and "
        f"`record(Success)` (a write) as a request makes them, {sizes.calls:,} per process: "
        "wall time, and the longest the event loop was held by one call (the most CPU time "
        "between two turns of a task beside them; a call waiting for another process's write "
        "lock yields to the loop). Two processes: the slower one's figures. Not in CPU time: "
        "SQLite's own sleeps while a read races a writer for the WAL index, at most ~2 ms each "
        "with two processes writing back to back (`strace -T`).",
        "",
        "| store | CPU µs / request | ratio to memory | admit p50 µs | record p50 / p99 µs "
        "| longest loop hold, CPU µs |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        ratio = row.request_cpu_us / memory.request_cpu_us
        lines.append(
            f"| {row.store}, one process | {row.request_cpu_us:,.0f} | {ratio:.2f}× | "
            + _cells(row.calls)
        )
        if row.contended is not None:
            lines.append(f"| {row.store}, two processes on one key | | | " + _cells(row.contended))
    return "\n".join(lines) + "\n"


def _cells(calls: Calls) -> str:
    return (
        f"{calls.admit_p50_us:,.1f} | {calls.record_p50_us:,.1f} / {calls.record_p99_us:,.1f} | "
        f"{calls.longest_hold_us:,.0f} |"
    )


def run(quick: bool, command: str) -> str:
    when = datetime.now(UTC)
    sizes = QUICK if quick else Sizes()
    text = section(measure(sizes), command=command, when=when, sizes=sizes)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.breakers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    args = parser.parse_args()
    run(args.quick, "python -m bench.breakers" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
