"""A data folder that takes tens of seconds of CPU to build (the dashboard's dataset, the
fixture week, the demo's fortnight), built once per test run, not once per xdist worker.

The first worker to ask builds it in a folder all workers share (the run's base temporary
folder, the one xdist gives each worker a folder in), under an exclusive lock; every worker,
the builder included, then gets a copy of its own, so a test that writes into its data
changes nothing another worker reads. A worker that asks while another builds waits on the
lock: the builder has the cores to itself meanwhile, so the wait costs no more than building
it again would. A build that fails leaves nothing behind, and the next worker to ask builds
it again (and fails the same way, in its own tests)."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
_DONE = "built.pickle"


def built_once(
    factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]
) -> tuple[Path, T]:
    """`build(folder)` fills the empty `folder` and returns what its tests need to know about
    it (picklable; folder-independent: the caller rebases any path on the folder returned);
    returns this worker's copy of the folder, and that value."""
    base = factory.getbasetemp()
    shared_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = shared_root / f"built-once-{name}"
    with (shared_root / f"built-once-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (shared / _DONE).exists():
            shutil.rmtree(shared, ignore_errors=True)  # a build that failed half-way
            shared.mkdir()
            try:
                value = build(shared)
                (shared / _DONE).write_bytes(pickle.dumps(value))
            except BaseException:
                shutil.rmtree(shared, ignore_errors=True)
                raise
    own = factory.mktemp(name)
    shutil.copytree(shared, own, dirs_exist_ok=True, ignore=shutil.ignore_patterns(_DONE))
    return own, pickle.loads((shared / _DONE).read_bytes())
