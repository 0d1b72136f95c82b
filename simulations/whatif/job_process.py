"""A what-if job's own process (`python -m simulations.whatif.job_process FOLDER`): it runs the
scenario in the folder that simulations.whatif.job set up, and writes its status and result there.

Apart from simulations.whatif.job, which the dashboard imports to start and poll jobs, because this
is the side that runs the engine, the store and the scheduler: the dashboard's process never loads
them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import tomllib
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from engine.core.errors import ConfigError
from simulations.whatif.job import PARTIAL, JobSpec, write_json, write_status
from simulations.whatif.results import Comparison, RunResult, as_json
from simulations.whatif.scenario import Scenario

NICE = 10  # where SCHED_IDLE is not available
_STATUS_EVERY_S = 0.25  # progress is written at most this often


def run(folder: Path) -> int:
    """Run the job in `folder` (in this process); 0 when its result is written."""
    from simulations.whatif.scenario import parse_scenario
    from simulations.whatif.simulate import simulate

    body = json.loads((folder / "job.json").read_text())
    spec = JobSpec(body["title"], body["scenario"], tuple(body["backups"]), body["scale"])
    started = datetime.fromisoformat(json.loads((folder / "status.json").read_text())["started_at"])
    done: dict[str, float] = {}
    last = 0.0
    try:
        scenario = parse_scenario(tomllib.loads(spec.scenario), source=spec.title)
        scenario = scenario.scaled(spec.scale)
        runs = 1 + (len(spec.backups) or len(scenario.backups) or 1)

        def progress(label: str, share: float) -> None:
            nonlocal last
            done[label] = share
            if time.monotonic() - last >= _STATUS_EVERY_S or share >= 1:
                last = time.monotonic()
                write_status(
                    folder,
                    spec,
                    "running",
                    min(1.0, sum(done.values()) / runs),
                    label,
                    started,
                    pid=os.getpid(),
                )

        comparison = simulate(
            scenario,
            list(spec.backups) or None,
            processes=workers(scenario),
            results_dir=folder / "runs",
            progress=progress,
            on_run=_partial(folder, scenario.name),
        )
        write_json(folder / "result.json", as_json(comparison))
        write_status(folder, spec, "done", 1.0, "", started, pid=os.getpid())
        return 0
    except (ConfigError, tomllib.TOMLDecodeError) as exc:
        write_status(
            folder,
            spec,
            "failed",
            0.0,
            "",
            started,
            pid=os.getpid(),
            error=f"This scenario cannot run: {exc}",
        )
        return 1
    except Exception as exc:  # told on the page (and the trace in log.txt), never lost
        traceback.print_exc()
        write_status(
            folder,
            spec,
            "failed",
            sum(done.values()),
            "",
            started,
            pid=os.getpid(),
            error=f"The simulation failed: {type(exc).__name__}: {exc}",
        )
        return 1


def _partial(folder: Path, name: str) -> Callable[[RunResult], None]:
    """What writes `partial.json` as runs finish: the baseline and the candidates done so far,
    compared (from the baseline's end on: a candidate alone compares with nothing)."""
    from simulations.whatif.simulate import AS_RECORDED, BASELINE

    done: list[RunResult] = []

    def finished(result: RunResult) -> None:
        done.append(result)
        baseline = next((r for r in done if r.label == BASELINE), None)
        if baseline is None:
            return
        candidates = [r for r in done if r.label not in (BASELINE, AS_RECORDED)]
        write_json(folder / PARTIAL, as_json(Comparison(name, baseline, candidates)))

    return finished


def workers(scenario: Scenario) -> int:
    """Processes for the job's runs: one per core but one, for a run large enough to pay for
    starting them. The core left alone is the dashboard's: even on idle CPU time, a busy
    neighbour core slows a page render (measured on 2 cores: one busy core +12 %, both +39 %,
    bench/whatif_isolation.py), so the viewers keep one to themselves."""
    from simulations.whatif.simulate import PARALLEL_FROM

    sent = scenario.rate_per_s * scenario.traffic_scale * scenario.duration_s  # at most
    spare = max(1, (os.cpu_count() or 1) - 1)
    return spare if sent >= PARALLEL_FROM else 1


def main(argv: list[str] | None = None) -> int:
    [folder] = argv if argv is not None else sys.argv[1:]
    yield_the_cpu()
    return run(Path(folder))


def yield_the_cpu() -> str:
    """Run this process (and the workers it starts, which inherit it) only on CPU time nobody
    else wants: Linux's SCHED_IDLE, where there is one, else nice NICE. What it got."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE"
    except (AttributeError, OSError):  # not Linux, or not allowed
        with contextlib.suppress(OSError):
            os.nice(NICE)
        return f"nice {NICE}"


if __name__ == "__main__":
    sys.exit(main())
