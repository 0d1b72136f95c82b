"""`make clean`, run for real on a copy of the tree: it leaves data/ as the repository ships it,
whatever the product and the demo wrote there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.core.paths import DataPaths
from simulations.demo.history import HISTORY_MARKER
from simulations.demo.up import CONSOLE_STATE, DEMO_MARKER, demo_text
from simulations.whatif.job import JOBS

ROOT = Path(__file__).resolve().parent.parent


def _unavailable(reason: str) -> None:
    """Skipped where the tool is missing, a failure in CI (CI=1), which has git and make."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run make clean's test", pytrace=False)
    pytest.skip(reason)


def _tracked_data() -> list[str]:
    """The files of data/ that the repository holds, as paths relative to data/."""
    if shutil.which("git") is None:
        _unavailable("git is not installed: no list of the files shipped in data/")
    listed = subprocess.run(
        ["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode:
        _unavailable(f"not a git checkout: {listed.stderr.strip()}")
    return sorted(str(Path(line).relative_to("data")) for line in listed.stdout.splitlines())


def _every_data_path(paths: DataPaths) -> list[Path]:
    """Every path DataPaths names (a file where the name has a suffix, else a folder), found by
    reading its properties, so that a path added there is covered without touching this test."""
    named = [
        getattr(paths, name)
        for name, member in vars(DataPaths).items()
        if isinstance(member, property) and isinstance(getattr(paths, name), Path)
    ]
    return sorted(named)


def _what_the_demo_writes(paths: DataPaths) -> None:
    """Every runtime file: each path of DataPaths (a folder with a file in it), the database's
    and the breakers' side files, the demo's markers, its configuration and console state,
    what-if results, jobs and saved scenarios, and the history's staging folder."""
    for path in _every_data_path(paths):
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("runtime")
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / "part-00000.parquet").write_text("runtime")
    for side in (f"{paths.database}.wal", f"{paths.breaker_states}-wal"):
        Path(side).write_text("runtime")
    for marker in (DEMO_MARKER, HISTORY_MARKER):
        (paths.root / marker).write_text("demo")
    paths.demo_config.write_text(demo_text(8700))
    (paths.breaker_states.parent / CONSOLE_STATE).write_text("{}")
    for folder in (
        JOBS / "job-1",
        Path("simulations") / "run-1",
        Path("scenarios"),
        Path(".history"),
    ):
        (paths.root / folder).mkdir(parents=True, exist_ok=True)
        (paths.root / folder / "file").write_text("runtime")


def test_make_clean_leaves_data_as_the_repository_ships_it(tmp_path):
    if shutil.which("make") is None:
        _unavailable("make is not installed")
    tracked = _tracked_data()
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tree / name)
    for name in tracked:
        (tree / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "data" / name, tree / "data" / name)
    _what_the_demo_writes(DataPaths(tree / "data"))

    done = subprocess.run(["make", "clean"], cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    left = sorted(str(p.relative_to(tree / "data")) for p in (tree / "data").rglob("*")
                  if p.is_file() or not any(p.iterdir()))  # fmt: skip
    assert left == tracked, "make clean keeps the shipped files (the Makefile's DATA_KEEP) only"
    for name in tracked:
        assert (tree / "data" / name).read_bytes() == (ROOT / "data" / name).read_bytes()
