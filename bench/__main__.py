"""`python -m bench [--quick] [--no-write] [--output PATH]`: run every case, print the table and
rewrite the generated section of docs/benchmarks.md."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench import report
from bench.cases import QUICK, Run, Sizes
from bench.fake_process import REPO, FakeServerProcess
from bench.stats import Row


async def _measure(fake: FakeServerProcess, sizes: Sizes) -> tuple[list[Row], float | None]:
    async with httpx.AsyncClient() as control:
        run = Run(fake, control, sizes)
        rows = await run.all()
        return rows, run.server_busy_peak


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run with small sizes (implies --no-write)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--no-pin", action="store_true", help="leave CPU placement to the OS")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    sizes = QUICK if args.quick else Sizes()

    started, when = time.monotonic(), datetime.now(UTC)
    with FakeServerProcess(pin=not args.no_pin) as fake:
        rows, server_busy = asyncio.run(_measure(fake, sizes))
        pinned = fake.pinned
    runtime_s = time.monotonic() - started

    generated = report.section(
        rows, sizes, runtime_s=runtime_s, when=when, pinned=pinned, server_busy=server_busy
    )
    print(generated.split("### How to read this")[0].rstrip())
    if not (args.quick or args.no_write):
        report.write(args.output, generated)
        print(f"\nwritten to {args.output.relative_to(REPO)}")


if __name__ == "__main__":
    main()
