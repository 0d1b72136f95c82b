"""A what-if simulation as a job in a process of its own. The dashboard starts one and polls
its folder; the Streamlit server never runs a simulation itself, which would hold its
interpreter for minutes and slow every viewer's page, and a job outlives the page that started
it (a reload, a closed tab, another viewer opening What-if).

    data/simulations/jobs/<id>/
        job.json      what to run: a title, the scenario's TOML, the candidates, the traffic scale
        status.json   running, done, failed or stopped; the share done and the run under way
        pid           the job's process, as its starter saw it
        partial.json  the baseline and the candidates finished so far, while it runs
        result.json   the comparison (simulations.whatif.results.as_json), once done
        runs/         the runs' results stores (only the newest KEEP_STORES jobs keep theirs)
        log.txt       the process's own output

    python -m simulations.whatif.job_process FOLDER   (job_process.py: the job itself)

The process, and the workers it starts for a large run (one per core but one: `workers`), run
on CPU time nobody else wants (SCHED_IDLE; nice 10 where that is not available), so that on a
small machine the dashboard's viewers come first. It never touches the live store: its stores
are under its folder. Each file is written aside and renamed (`atomic_write`), so a poll never
reads half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write
from simulations.whatif.results import Comparison, from_json

JOBS = Path("simulations") / "jobs"  # under the data folder
KEEP_STORES = 3  # finished jobs whose runs' stores are kept (each a few tens of MB)
KEEP_JOBS = 20  # job folders kept at all: their results stay readable on the page
PARTIAL = "partial.json"


@dataclass(frozen=True, slots=True)
class JobSpec:
    title: str  # what the page calls it: the scenario's name, or the incident replayed
    scenario: str  # the scenario as TOML (simulations.whatif.scenario)
    backups: tuple[str, ...]  # the candidates; empty: the scenario's own
    scale: float = 1.0  # the share of the scenario's traffic to send


@dataclass(frozen=True, slots=True)
class JobStatus:
    folder: Path
    title: str
    state: str  # "running", "done", "failed" or "stopped"
    share: float  # of the whole job, 0 to 1
    doing: str  # the run under way ("baseline", a candidate)
    started_at: datetime
    updated_at: datetime
    error: str = ""
    scale: float = 1.0
    pid: int | None = None  # the job's process, the leader of its process group

    @property
    def id(self) -> str:
        return self.folder.name

    @property
    def over(self) -> bool:
        return self.state != "running"

    def comparison(self) -> Comparison | None:
        path = self.folder / "result.json"
        return from_json(json.loads(path.read_text())) if self.state == "done" else None

    def partial(self) -> Comparison | None:
        """While it runs: the baseline and the candidates finished so far, once the baseline
        is (None before)."""
        path = self.folder / PARTIAL
        with contextlib.suppress(FileNotFoundError):
            return from_json(json.loads(path.read_text()))
        return None


def jobs_dir(data_root: Path) -> Path:
    return data_root / JOBS


def start(data_root: Path, spec: JobSpec) -> Path:
    """Start `spec` in a process of its own; its folder, which `status` reads."""
    folder = jobs_dir(data_root).resolve() / _new_id()
    folder.mkdir(parents=True)
    write_json(folder / "job.json", asdict(spec))
    now = datetime.now(UTC)
    write_status(folder, spec, "running", 0.0, "starting", now, pid=None)
    with open(folder / "log.txt", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "simulations.whatif.job_process", str(folder)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a stop ends it and nothing else
        )  # fmt: skip
    # Its number in a file of its own: a tiny job may already have written "done" to
    # status.json, which a status rewritten here would turn back to "running".
    atomic_write(folder / "pid", str(process.pid).encode(), durable=False)
    # Reaped here when it ends, or it lingers as a zombie that looks alive to `status`.
    threading.Thread(target=process.wait, daemon=True, name=f"job-{folder.name}").start()
    _prune(folder.parent, started=folder)
    return folder


def status(folder: Path) -> JobStatus:
    """What the job in `folder` is doing. A job whose process is gone without saying it ended
    (killed, the machine restarted) reads "stopped"."""
    body = json.loads((folder / "status.json").read_text())
    state, error = body["state"], body.get("error", "")
    pid = _pid(folder, body)
    if state == "running" and pid and not _alive(pid):
        # Gone, or seemed to be: whatever it wrote last is on disk now. Read it again (it may
        # have ended between the first read and the check), give a file being renamed into
        # place a moment, and look at the process again each time; only a process that stays
        # gone and left no word at all was stopped.
        for _ in range(10):
            body = json.loads((folder / "status.json").read_text())
            state, error = body["state"], body.get("error", "")
            if state != "running":
                break
            if (folder / "result.json").exists():
                state = "done"
                break
            if _alive(pid):
                break
            time.sleep(0.05)
        else:
            state, error = "stopped", "the simulation's process ended without a result"
    return JobStatus(
        folder,
        body["title"],
        state,
        float(body["share"]),
        body["doing"],
        datetime.fromisoformat(body["started_at"]),
        datetime.fromisoformat(body["updated_at"]),
        error,
        float(body.get("scale", 1.0)),
        pid,
    )


def recent(data_root: Path, limit: int = KEEP_JOBS) -> list[JobStatus]:
    """The jobs in `data_root`, newest first."""
    folder = jobs_dir(data_root)
    found = sorted((p for p in folder.glob("*") if (p / "status.json").exists()), reverse=True)
    return [status(p) for p in found[:limit]]


def running(data_root: Path) -> JobStatus | None:
    return next((job for job in recent(data_root) if job.state == "running"), None)


def stop(folder: Path) -> None:
    """End the job's process group, its workers too, and say it was stopped."""
    body = json.loads((folder / "status.json").read_text())
    pid = _pid(folder, body)
    if body["state"] == "running" and pid:
        _end_group(pid)
        body.update(
            state="stopped", error="stopped from the page", updated_at=datetime.now(UTC).isoformat()
        )
        write_json(folder / "status.json", body)


def _end_group(pgid: int, grace_s: float = 2.0) -> None:
    """SIGTERM to the group, then SIGKILL to what is left after `grace_s`: a worker spawned
    while multiprocessing's resource tracker started inherits SIGTERM blocked, and a job has
    nothing to save (its half-written stores are its own)."""
    deadline = time.monotonic() + grace_s
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def wait(folder: Path, timeout_s: float) -> JobStatus:
    """The job's status once it is over, or when `timeout_s` have passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = status(folder)
        if job.over or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


# --- files -----------------------------------------------------------------------------------


def _new_id() -> str:
    """Sortable by start time, unique across viewers starting jobs in the same second."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{secrets.token_hex(3)}"


def write_json(path: Path, body: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(body, indent=1).encode(), durable=False)


def write_status(
    folder: Path,
    spec: JobSpec,
    state: str,
    share: float,
    doing: str,
    started: datetime,
    *,
    pid: int | None,
    error: str = "",
) -> None:
    write_json(
        folder / "status.json",
        {
            "title": spec.title,
            "state": state,
            "share": share,
            "doing": doing,
            "pid": pid,
            "started_at": started.isoformat(),
            "updated_at": datetime.now(UTC).isoformat(),
            "error": error,
            "scale": spec.scale,
        },
    )


def _pid(folder: Path, body: dict[str, Any]) -> int | None:
    """The job's process: as the job wrote it, else as its starter did (the job writes its
    status first after its imports)."""
    if body.get("pid"):
        return int(body["pid"])
    with contextlib.suppress(OSError, ValueError):
        return int((folder / "pid").read_text())
    return None


def _alive(pid: int) -> bool:
    """Whether `pid` is still a simulation job (not a process that took its number since, nor
    one that ended and waits to be reaped)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.exists():  # not Linux: the signal's answer is all there is
        return True
    with contextlib.suppress(OSError, IndexError):
        # The state follows the name in parentheses, which may itself hold spaces.
        if proc.joinpath("stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
            return False
        cmdline = proc.joinpath("cmdline").read_bytes()
        # Empty while the kernel is still setting up the exec that Popen has already
        # returned from (the parent learns of an exec before its arguments are in place).
        return not cmdline or b"simulations.whatif.job" in cmdline
    return False  # gone between the signal and the read


def _prune(folder: Path, started: Path) -> None:
    """Keep KEEP_JOBS job folders, and the runs' stores of the newest KEEP_STORES only; a
    running job keeps everything, and so does the one just `started` (done already or not)."""
    finished = [
        p
        for p in sorted(folder.glob("*"), reverse=True)
        if p != started and (p / "status.json").exists() and status(p).over
    ]
    for old in finished[KEEP_STORES:]:
        shutil.rmtree(old / "runs", ignore_errors=True)
    for old in finished[KEEP_JOBS:]:
        shutil.rmtree(old, ignore_errors=True)
