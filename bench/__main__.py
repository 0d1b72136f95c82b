"""`python -m bench [--quick] [--only chain|incident|telemetry|simulator|shaping|breakers|
whatif_isolation|freshness|gateway|otel] [--no-write] [--output PATH]`: run the chain's cases (with
LiteLLM's Router beside them), the outage figures, the telemetry, the simulator, the route
behaviours, the breaker stores, the Live page beside a what-if simulation, the scheduler's
freshness under gateway load and the gateway, print the tables,
and rewrite the generated sections of
docs/benchmarks.md (with `--only`, only that part)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench import (
    breakers,
    freshness,
    gateway,
    incident,
    otel,
    peer,
    report,
    shaping,
    simulator,
    telemetry,
    whatif_isolation,
)
from bench.cases import QUICK, Run, Sizes
from bench.fake_process import REPO, FakeServerProcess
from bench.stats import Row


async def _measure(fake: FakeServerProcess, sizes: Sizes) -> tuple[list[Row], float | None]:
    async with httpx.AsyncClient() as control:
        run = Run(fake, control, sizes)
        rows = await run.all()
        return rows, run.server_busy_peak


def _progress(began: float) -> Callable[[str], None]:
    def say(what: str) -> None:
        print(f"[{time.monotonic() - began:6.1f} s] {what}", file=sys.stderr, flush=True)

    return say


def chain(quick: bool, pin: bool, command: str) -> str:
    sizes = QUICK if quick else Sizes()
    started, when = time.monotonic(), datetime.now(UTC)
    with FakeServerProcess(pin=pin) as fake:
        rows, server_busy = asyncio.run(_measure(fake, sizes))
        _progress(started)("LiteLLM's Router, in its own virtual environment")
        measured = peer.measure(fake.url, peer.QUICK if quick else peer.Sizes())
        pinned = fake.pinned
    runtime_s = time.monotonic() - started
    venv = str(peer.VENV.relative_to(REPO))
    generated = report.section(
        rows,
        sizes,
        command=command,
        runtime_s=runtime_s,
        when=when,
        pinned=pinned,
        server_busy=server_busy,
        peer=report.peer_section(measured, peer.compare(measured, rows), venv),
    )
    print(generated.split("### How to read this")[0].rstrip(), flush=True)
    return generated


def incident_part(quick: bool, pin: bool, command: str) -> str:
    started, when = time.monotonic(), datetime.now(UTC)
    sizes = incident.QUICK if quick else incident.Sizes()
    with FakeServerProcess(pin=pin) as fake:
        outcomes = asyncio.run(incident.measure(fake.url, sizes, _progress(started)))
        pinned = fake.pinned
    generated = report.incident_section(
        outcomes,
        command=command,
        runtime_s=time.monotonic() - started,
        when=when,
        pinned=pinned,
    )
    print("\n" + generated.split("### How to read")[0].rstrip(), flush=True)
    return generated


def telemetry_part(quick: bool, command: str) -> str:
    started, when = time.monotonic(), datetime.now(UTC)
    measured = telemetry.run(telemetry.QUICK if quick else telemetry.Sizes())
    generated = report.telemetry_section(
        measured.figures,
        telemetry.notes(measured),
        command=command,
        runtime_s=time.monotonic() - started,
        when=when,
    )
    print("\n" + generated.split("### How to read")[0].rstrip(), flush=True)
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run with small sizes (implies --no-write)"
    )
    parser.add_argument(
        "--only", choices=(*report.PARTS, "gateway", "otel"), help="run one part only"
    )
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    parser.add_argument("--no-pin", action="store_true", help="leave CPU placement to the OS")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    command = "make bench" if len(sys.argv) == 1 else "python -m bench " + " ".join(sys.argv[1:])

    started = time.monotonic()
    generated: dict[str, str] = {}
    if args.only in (None, "chain"):
        generated["chain"] = chain(args.quick, not args.no_pin, command)
    if args.only in (None, "incident"):
        generated["incident"] = incident_part(args.quick, not args.no_pin, command)
    if args.only in (None, "telemetry"):
        generated["telemetry"] = telemetry_part(args.quick, command)
    if args.only in (None, "simulator"):
        generated["simulator"] = simulator.run(args.quick, command)
    if args.only in (None, "shaping"):
        generated["shaping"] = shaping.run(args.quick, command)
    if args.only in (None, "breakers"):
        generated["breakers"] = breakers.run(args.quick, command)
    if args.only in (None, "whatif_isolation"):
        generated["whatif_isolation"] = whatif_isolation.run(args.quick, command)
    if args.only in (None, "freshness"):
        generated["freshness"] = freshness.run(args.quick, command)
    if args.only in (None, "otel"):  # printed only: docs/benchmarks.md takes it by hand
        print("\n" + otel.table(otel.run(otel.QUICK if args.quick else otel.Sizes())), flush=True)
    gateway_text = None
    if args.only in (None, "gateway"):
        gateway_text = gateway.run(args.quick, command)
    print(f"\nbench ran in {(time.monotonic() - started) / 60:.1f} min")
    if not (args.quick or args.no_write):
        if generated:
            report.write(args.output, generated)
        if gateway_text:
            gateway.write(args.output, gateway_text)
        print(f"written to {args.output.relative_to(REPO)}")


if __name__ == "__main__":
    main()
