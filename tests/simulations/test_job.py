"""A what-if simulation as a job in a process of its own: what it writes, that it is the
simulator's own result, and how it ends (done, failed, stopped, vanished)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from simulations.whatif import job as jobs
from simulations.whatif.report import table_rows
from simulations.whatif.scenario import SCENARIOS_DIR, parse_scenario
from simulations.whatif.simulate import simulate

TINY = """
name = "tiny outage"
duration = "20m"
start = "2026-11-23T12:00:00Z"
backups = ["gpt/gpt-4.1-mini"]

[providers.claude]
kind = "anthropic"

[providers.gpt]
kind = "openai"

[routes.support]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]

[traffic]
rate_per_s = 1

[traffic.routes.support]
share = 1
input_tokens = 1200
output_tokens = 150

[[faults]]
target = "claude/claude-sonnet-4-5"
kind = "overloaded"
start = "5m"
end = "10m"
"""
WEEK = (SCENARIOS_DIR / "week-with-a-tuesday-outage.toml").read_text()  # minutes of work


def _gone(pid: int, timeout_s: float = 30, *, group: bool = False) -> bool:
    """Whether process `pid` (with `group`: every process of its group) has ended and been
    reaped within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            (os.killpg if group else os.kill)(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _under_way(folder, timeout_s: float = 60) -> None:
    """Until the job reports progress: its traffic drawn, its runs (in workers) going."""
    deadline = time.monotonic() + timeout_s
    while jobs.status(folder).doing == "starting" and time.monotonic() < deadline:
        time.sleep(0.1)


def _pid(folder) -> int:
    return jobs.status(folder).pid


def test_a_job_runs_in_its_own_process_and_its_result_is_the_simulators_own(tmp_path):
    folder = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, ("gpt/gpt-4.1-mini",)))
    assert folder.parent == (tmp_path / "simulations" / "jobs").resolve()
    assert _pid(folder) != os.getpid()
    job = jobs.wait(folder, timeout_s=120)
    assert (job.state, job.share, job.title) == ("done", 1.0, "tiny outage")
    shown = job.comparison()
    expected = simulate(parse_scenario(tomllib.loads(TINY)), ["gpt/gpt-4.1-mini"],
                        results_dir=tmp_path / "direct")  # fmt: skip
    # Every figure but the wall time each run took.
    assert table_rows(shown)[:-1] == table_rows(expected)[:-1]
    assert (folder / "runs").is_dir(), "its stores are under its own folder"
    assert jobs.recent(tmp_path)[0].id == folder.name


def test_a_job_shows_each_candidate_compared_as_soon_as_its_run_is_done(tmp_path):
    """Partial results: the baseline and the candidates finished so far, compared, while the
    other runs go on; once over, they are the result's."""
    backups = ("gpt/gpt-4.1-mini", "claude/claude-haiku-4-5")
    told = []
    comparison = simulate(parse_scenario(tomllib.loads(TINY)), list(backups),
                          results_dir=tmp_path / "direct", on_run=told.append)  # fmt: skip
    assert sorted(r.label for r in told) == sorted(["baseline", *backups])
    assert {r.label: r.cost_usd for r in told} == {
        r.label: r.cost_usd for r in [comparison.baseline, *comparison.candidates]
    }
    folder = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, backups))
    job = jobs.wait(folder, timeout_s=120)
    assert job.state == "done"
    partial, done = job.partial(), job.comparison()
    assert partial is not None and done is not None
    assert table_rows(partial)[:-1] == table_rows(done)[:-1]


def test_a_job_at_a_share_of_the_traffic_runs_the_scaled_scenario(tmp_path):
    folder = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, (), scale=0.25))
    job = jobs.wait(folder, timeout_s=120)
    assert job.state == "done" and job.scale == 0.25
    shown = job.comparison()
    full = parse_scenario(tomllib.loads(TINY))
    expected = simulate(full.scaled(0.25), results_dir=tmp_path / "direct")
    assert shown.scale == 0.25
    assert shown.baseline.requests == expected.baseline.requests < 0.5 * 20 * 60


def test_a_scenario_that_cannot_run_fails_its_job_with_the_reason(tmp_path):
    broken = TINY.replace('kind = "overloaded"', 'kind = "meteor"')
    job = jobs.wait(jobs.start(tmp_path, jobs.JobSpec("broken", broken, ())), timeout_s=60)
    assert job.state == "failed"
    assert job.error.startswith("This scenario cannot run:") and "must be one of" in job.error
    assert job.comparison() is None


def test_a_stopped_job_ends_its_process_and_says_so(tmp_path):
    folder = jobs.start(tmp_path, jobs.JobSpec("a week", WEEK, ()))
    assert jobs.running(tmp_path).id == folder.name
    _under_way(folder)  # its runs under way, in workers where the machine has cores to spare
    jobs.stop(folder)
    assert _gone(_pid(folder), group=True), "its process and every worker it started ended"
    job = jobs.status(folder)
    assert (job.state, job.error) == ("stopped", "stopped from the page")
    assert jobs.running(tmp_path) is None


def test_a_job_whose_process_died_reads_as_stopped_not_running(tmp_path):
    folder = jobs.start(tmp_path, jobs.JobSpec("a week", WEEK, ()))
    os.killpg(_pid(folder), signal.SIGKILL)  # as the kernel's OOM killer would
    assert _gone(_pid(folder))
    job = jobs.status(folder)
    assert job.state == "stopped" and "ended without a result" in job.error


def _job_folder_of(tmp_path, process) -> Path:
    """A job folder as a starter leaves it, its process `process` not yet heard from."""
    folder = tmp_path / "simulations" / "jobs" / "20261201T000000000000-abcdef"
    folder.mkdir(parents=True)
    (folder / "status.json").write_text(json.dumps({
        "title": "t", "state": "running", "share": 0.0, "doing": "starting", "pid": None,
        "started_at": "2026-12-01T00:00:00+00:00", "updated_at": "2026-12-01T00:00:00+00:00",
    }))  # fmt: skip
    (folder / "pid").write_text(str(process.pid))
    return folder


def test_a_job_process_still_importing_reads_as_running(tmp_path):
    # Alive and silent (a loaded machine can take seconds over the imports): not stopped.
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                "simulations.whatif.job"])  # fmt: skip
    try:
        assert jobs.status(_job_folder_of(tmp_path, process)).state == "running"
    finally:
        process.kill()
        process.wait()


def test_a_job_process_that_ended_unreaped_reads_as_stopped(tmp_path):
    # A zombie still answers a signal; it is over all the same.
    process = subprocess.Popen([sys.executable, "-c", "pass", "simulations.whatif.job"])
    deadline = time.monotonic() + 30
    while _state_of(process.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state_of(process.pid) == "Z"
    job = jobs.status(_job_folder_of(tmp_path, process))
    assert job.state == "stopped" and "ended without a result" in job.error
    process.wait()


def _state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_only_the_newest_jobs_keep_their_stores(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "KEEP_STORES", 1)
    first = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, ()))
    assert jobs.wait(first, timeout_s=120).state == "done"
    second = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, ()))
    assert jobs.wait(second, timeout_s=120).state == "done"
    third = jobs.start(tmp_path, jobs.JobSpec("tiny outage", TINY, ()))
    assert jobs.wait(third, timeout_s=120).state == "done"
    assert not (first / "runs").exists(), "pruned when the third started"
    assert (second / "runs").is_dir() and (third / "runs").is_dir()
    assert jobs.status(first).comparison() is not None, "its result stays readable"


@pytest.fixture(autouse=True)
def _no_job_left_running(tmp_path):
    """A test that fails half-way must not leave a week's simulation behind it."""
    yield
    for job in jobs.recent(tmp_path):
        jobs.stop(job.folder)
