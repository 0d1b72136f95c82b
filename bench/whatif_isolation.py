"""Whether a what-if simulation slows the dashboard for everyone else: the Live page's render
(`bench.dashboard.live_render`, a new session and a refresh, through AppTest, which runs the
page's script as the server does) on the demo's history, while a simulation runs as the What-if
page runs it, a job in its own process (`simulations.whatif.job`), against idle.

Idle and busy alternate render by render: the job is paused (SIGSTOP to its process group) for
each idle render and resumed for each busy one, so that whatever else the machine runs weighs on
both sides alike. For contrast, the same simulation in a thread of the rendering process, as the
page ran it before (the server's interpreter shared between the simulation and every viewer).

    python -m bench.whatif_isolation [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.dashboard import Render, live_render
from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from simulations.demo.history import seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config
from simulations.whatif import job as jobs
from simulations.whatif import job_process
from simulations.whatif.scenario import SCENARIOS_DIR, load_scenario
from simulations.whatif.simulate import simulate

# A week of traffic with three backups: minutes of simulation, stopped once the renders are
# done, so that it runs throughout them however fast the simulator gets.
SCENARIO = "week-with-a-tuesday-outage"
TARGET = 0.20  # the issue's: Live within 20 % of idle while a simulation runs


@dataclass(frozen=True, slots=True)
class Measured:
    idle: Render  # the job paused
    job: Render  # the job running in its own process (interleaved with the idle renders)
    in_process: Render | None  # the simulation in a thread of this process
    job_ran_throughout: bool
    days: int
    load: float  # the machine's 1-minute load average at the end of the renders

    @staticmethod
    def median(render: Render, which: str) -> float:
        return statistics.median(getattr(render, which))

    def ratio(self, render: Render, which: str) -> float:
        """`render`'s median against idle's: for a condition measured apart from idle."""
        return self.median(render, which) / self.median(self.idle, which) - 1

    def paired(self, which: str) -> float:
        """The job's slowdown: the median of each busy render against the idle one just before
        it (a pair shares the machine's load of that moment)."""
        pairs = zip(getattr(self.job, which), getattr(self.idle, which), strict=True)
        return statistics.median(busy / idle for busy, idle in pairs) - 1


def published_history(root: Path, days: int) -> None:
    """`days` of the demo's history (its routes, fake providers, past incidents) through the
    real chain, then one scheduler cycle, which publishes it for the dashboard."""
    paths = DataPaths(root)
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    seed_history(paths, demo_config(8700), days=days, end=end, environ={DEMO_KEY_ENV: "bench"},
                 say=lambda _: None)  # fmt: skip
    pipeline = Pipeline(paths, now=lambda: end + timedelta(seconds=5))
    try:
        pipeline.cycle()
    finally:
        pipeline.close()


def measure(days: int, repeat: int, *, contrast: bool = True) -> Measured:
    root = Path(tempfile.mkdtemp(prefix="switchover-bench-whatif-"))
    try:
        published_history(root, days)
        live_render(root, 1)  # imports and first reads, outside the figures
        scenario_text = (SCENARIOS_DIR / f"{SCENARIO}.toml").read_text()
        folder = jobs.start(root, jobs.JobSpec(SCENARIO, scenario_text, ()))
        idle, busy = Render([], []), Render([], [])
        try:
            _under_way(folder)
            pid = jobs.status(folder).pid
            assert pid is not None
            for _ in range(repeat):
                os.killpg(pid, signal.SIGSTOP)
                try:
                    _add(idle, live_render(root, 1))
                finally:
                    os.killpg(pid, signal.SIGCONT)
                _add(busy, live_render(root, 1))
            ran = jobs.status(folder).state == "running"
            load = os.getloadavg()[0]
        finally:
            jobs.stop(folder)
        in_process = _in_a_thread(root, repeat) if contrast else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Measured(idle, busy, in_process, ran, days, load)


def _add(into: Render, render: Render) -> None:
    into.first_s.extend(render.first_s)
    into.refresh_s.extend(render.refresh_s)


def _under_way(folder: Path, timeout_s: float = 60) -> None:
    """Wait until the job has drawn its traffic and its chain runs (it reports progress)."""
    deadline = time.monotonic() + timeout_s
    while jobs.status(folder).doing == "starting" and time.monotonic() < deadline:
        time.sleep(0.2)


class _Enough(Exception):
    """Raised from the simulation's progress callback: the renders are done."""


def _in_a_thread(root: Path, repeat: int) -> Render:
    """The Live page rendered while the simulation runs in a thread of the same process."""
    scenario = load_scenario(SCENARIO)
    enough, started = threading.Event(), threading.Event()

    def progress(label: str, share: float) -> None:
        started.set()
        if enough.is_set():
            raise _Enough

    def simulation() -> None:
        with contextlib.suppress(_Enough):
            simulate(scenario, results_dir=root / "in-process", progress=progress)

    thread = threading.Thread(target=simulation, daemon=True)
    thread.start()
    started.wait(60)  # its traffic drawn, the chain under way
    try:
        return live_render(root, repeat)
    finally:
        enough.set()
        thread.join(120)


def _processes() -> int:
    return job_process.workers(load_scenario(SCENARIO))


def section(m: Measured, *, command: str, when: datetime) -> str:
    def row(name: str, render: Render, change=None) -> str:
        cells = []
        for which in ("first_s", "refresh_s"):
            said = "" if change is None else f" ({change(render, which):+.0%})"
            cells.append(f"{m.median(render, which):.3f} s{said}")
        return f"| {name} | {cells[0]} | {cells[1]} |"

    worst = max(m.paired("first_s"), m.paired("refresh_s"))
    met = "met" if worst <= TARGET and m.job_ran_throughout else "**not met**"
    intro = (
        f"`{command}` on {when:%Y-%m-%d %H:%M} UTC: the Live page (AppTest, a new session and "
        f"a refresh; median of {len(m.job.first_s)} each) on {m.days} day(s) of the demo's "
        f"history, while the library scenario `{SCENARIO}` (a week at 20 requests/s) runs "
        "with its three backups as the What-if page runs it: a job in its own process on idle "
        f"CPU time (SCHED_IDLE), in {_processes()} process(es): one per core but one. Idle and "
        "busy renders alternate (the job "
        "paused, then resumed), so the machine's other load (a load average of "
        f"{m.load:.1f} on {os.cpu_count()} cores meanwhile) weighs on both alike."
    )
    lines = [
        "## What-if isolation",
        "",
        textwrap.fill(intro, width=100),
        "",
        "| Live page | first render | refresh |",
        "|---|---|---|",
        row("idle (the job paused)", m.idle),
        row(
            "while the simulation runs as a job (the What-if page)",
            m.job,
            lambda _, which: m.paired(which),
        ),
    ]
    if m.in_process is not None:
        lines.append(row("the same simulation in a thread of the server (before)", m.in_process,
                         m.ratio))  # fmt: skip
    ended = "" if m.job_ran_throughout else " The job ended before the renders did."
    lines += [
        "",
        f"Target: within {TARGET:.0%} of idle while a simulation runs (the median of each "
        f"busy render against the idle one before it): {met} (worst {worst:+.0%}).{ended}",
    ]
    return "\n".join(lines) + "\n"


def run(quick: bool, command: str) -> str:
    when = datetime.now(UTC)
    measured = measure(days=1 if quick else 3, repeat=3 if quick else 15, contrast=not quick)
    text = section(measured, command=command, when=when)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.whatif_isolation", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a day of history, 3 renders")
    args = parser.parse_args()
    run(args.quick, "python -m bench.whatif_isolation" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
