"""What recording costs: the hook on the request's path, and a flush on the recorder's thread.

`python -m bench.recorder [--quick]` prints the table; `run()` returns its rows for the report.

- enqueue: 200,000 hook calls, each timed alone (`perf_counter_ns` around the call; the cost of
  the timer itself is measured and shown as its own row), once back to back with the flusher
  idle, and once paced (bursts of 50 calls, 1 ms idle between: ~45,000 calls/s) while the
  flusher writes a 1,000-row file every ~22 ms (pricing and fsync on), so the two threads
  contend for the GIL as in production. Target: p99 ≤ 20 µs.
- flush: `Recorder.flush()` of 1,000 buffered attempts, repeated, with fsync on/off and pricing
  on/off (pricing only when engine.core.pricing is importable), the flusher thread idle; then the
  stages of a flush in memory, to show where the time goes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.stats import percentile
from engine.core.attempt import Attempt
from engine.telemetry import columns as records
from engine.telemetry.recorder import Recorder

ENQUEUE_CALLS = 200_000
FLUSH_ROWS = 1_000
FLUSH_REPEATS = 60
BURST, BURST_GAP_S = 50, 0.001  # paced: 50 calls, then 1 ms idle (~45,000 calls/s)
_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Sizes:
    calls: int = ENQUEUE_CALLS  # hook calls, per enqueue case
    repeats: int = FLUSH_REPEATS  # flushes per configuration (the first 3 are warm-up)


QUICK = Sizes(calls=20_000, repeats=10)


def attempt(n: int) -> Attempt:
    return Attempt(
        request_id=f"bench-{n:08d}",
        attempt_number=1 + n % 3,
        route="default",
        target="anthropic/claude-sonnet-4-5",
        provider="anthropic",
        provider_kind="anthropic",
        model="claude-sonnet-4-5",
        key_kind="managed",
        process_id=1,
        started_at=_START + timedelta(milliseconds=n),
        latency_ms=800.0 + n % 97,
        ttft_ms=None,
        streamed=False,
        outcome="error" if n % 10 == 0 else "success",
        decision="fall_back" if n % 10 == 0 else "served",
        error_class="overloaded" if n % 10 == 0 else None,
        fault_kind="provider" if n % 10 == 0 else None,
        http_status=529 if n % 10 == 0 else 200,
        error_type=None,
        error_code=None,
        error_message=None,
        retry_after_s=None,
        breaker_state="closed",
        served=n % 10 != 0,
        fallback_depth=0,
        input_tokens=1200 + n % 500,
        output_tokens=300,
        cache_read_tokens=4000,
        feature="search",
    )


def _pricer() -> Any | None:
    try:
        from engine.core.pricing import Pricer
    except ImportError:
        return None
    return Pricer()


def _summary(name: str, samples_ns: list[int], note: str = "") -> dict[str, Any]:
    return {
        "case": name,
        "n": len(samples_ns),
        "p50_us": percentile(samples_ns, 50) / 1000,
        "p99_us": percentile(samples_ns, 99) / 1000,
        "p999_us": percentile(samples_ns, 99.9) / 1000,
        "max_us": max(samples_ns) / 1000,
        "note": note,
    }


def _timer_overhead(n: int) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(n):
        t0 = clock()
        samples.append(clock() - t0)
    return samples


def _enqueue(
    spool: Path, calls: int, *, paced: bool, pricer: Any | None
) -> tuple[list[int], Recorder]:
    """Time each hook call. Paced: bursts with idle gaps (a busy gateway), so the flusher
    writes 1,000-row files while the hook runs and the two threads share the GIL."""
    pool = [attempt(n) for n in range(FLUSH_ROWS)]
    recorder = Recorder(
        spool,
        pricer=pricer,
        flush_rows=FLUSH_ROWS if paced else 10**9,
        flush_interval_s=1.0 if paced else 3600,
        max_buffered=10**9,
    )
    clock = time.perf_counter_ns
    samples = [0] * calls
    for i in range(calls):
        if paced and i % BURST == 0:
            time.sleep(BURST_GAP_S)  # idle like an event loop in epoll: the GIL is free
        item = pool[i % FLUSH_ROWS]
        t0 = clock()
        recorder(item)
        samples[i] = clock() - t0
    recorder.close()
    return samples, recorder


def _flushes(spool: Path, repeats: int, pricer: Any | None) -> list[dict[str, Any]]:
    """`flush()` of 1,000 buffered attempts per configuration, the configurations interleaved
    repeat by repeat so that a noisy neighbour on the machine hits them all alike."""
    batch = [attempt(n) for n in range(FLUSH_ROWS)]
    recorders: dict[str, Recorder] = {}
    for fsync in (True, False):
        for priced in (False, True) if pricer else (False,):
            name = f"flush 1,000: fsync {'on' if fsync else 'off'}, pricing "
            name += "on" if priced else "off"
            recorders[name] = Recorder(
                spool / name.replace(" ", "").replace(",", "_").replace(":", "_"),
                pricer=pricer if priced else None,
                fsync=fsync,
                flush_interval_s=3600,
                flush_rows=10**9,
            )
    samples: dict[str, list[int]] = {name: [] for name in recorders}
    for _ in range(repeats):
        for name, recorder in recorders.items():
            for item in batch:
                recorder(item)
            t0 = time.perf_counter_ns()
            written = recorder.flush()
            samples[name].append(time.perf_counter_ns() - t0)
            assert written == FLUSH_ROWS, recorder.stats()
            for file in recorder.spool_dir.glob("*.parquet"):  # the scheduler's part
                file.unlink()
    for recorder in recorders.values():
        recorder.close()
    # The first flushes warm caches and the page cache.
    return [_summary(name, values[3:]) for name, values in samples.items()]


def run(sizes: Sizes = Sizes()) -> list[dict[str, Any]]:
    pricer = _pricer()
    rows = [_summary("perf_counter_ns pair (timer cost)", _timer_overhead(sizes.calls))]
    with tempfile.TemporaryDirectory(prefix="switchover-bench-") as tmp:
        spool = Path(tmp)
        samples, _ = _enqueue(spool / "idle", sizes.calls, paced=False, pricer=None)
        rows.append(_summary("enqueue, flusher idle", samples, "back to back, includes the timer"))
        samples, recorder = _enqueue(spool / "busy", sizes.calls, paced=True, pricer=pricer)
        stats = recorder.stats()
        note = f"{BURST} calls / {BURST_GAP_S * 1e3:g} ms; {stats.files} files written meanwhile"
        rows.append(_summary("enqueue, flusher writing", samples, note))
        rows.extend(_flushes(spool, sizes.repeats, pricer))
    rows.extend(_stages(sizes.repeats, pricer))
    if pricer is None:
        print("engine.core.pricing is not importable: pricing not measured")
    return rows


def _stages(repeats: int, pricer: Any | None) -> list[dict[str, Any]]:
    """Where a flush's time goes, stage by stage, in memory (no file, no fsync)."""
    batch = [attempt(n) for n in range(FLUSH_ROWS)]
    timings: dict[str, list[int]] = {}

    def timed(name: str, fn: Any) -> Any:
        t0 = time.perf_counter_ns()
        result = fn()
        timings.setdefault(name, []).append(time.perf_counter_ns() - t0)
        return result

    for _ in range(repeats):
        if pricer is not None:
            timed("stage: pricing x1,000", lambda: [pricer.price(a) for a in batch])
        rows = timed("stage: to_row x1,000", lambda: [records.to_row(a, None, None) for a in batch])
        table = timed("stage: to_table", lambda rows=rows: records.to_table(rows))
        timed(
            "stage: Parquet to memory", lambda t=table: pq.write_table(t, pa.BufferOutputStream())
        )
    return [_summary(name, samples[3:]) for name, samples in timings.items()]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | n | p50 µs | p99 µs | p99.9 µs | max µs | note |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['n']:,} | {r['p50_us']:,.2f} | {r['p99_us']:,.2f} | "
            f"{r['p999_us']:,.2f} | {r['max_us']:,.1f} | {r['note']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recorder", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the calls and flushes")
    args = parser.parse_args()
    started = time.monotonic()
    rows = run(QUICK if args.quick else Sizes())
    print(table(rows))
    print(f"\nrecorder bench: {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
