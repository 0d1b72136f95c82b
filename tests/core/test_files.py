"""Files written aside then renamed: a reader sees the old file or the new one, a failed write
leaves nothing behind, and what a killed writer left is found by whoever cleans up."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core import files
from engine.core.files import atomic_write, leftovers, written_aside


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    path = tmp_path / "status.json"
    atomic_write(path, "old", durable=False)
    with pytest.raises(RuntimeError), written_aside(path, durable=True) as temp:
        temp.write_text("half")
        raise RuntimeError("disk full")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_the_temporary_is_a_dot_name_beside_the_file(tmp_path: Path):
    path = tmp_path / "spool" / "a.parquet"
    with written_aside(path, durable=False) as temp:
        assert temp.parent == path.parent and temp.name.startswith(".a.parquet.")
        assert temp.suffix == ".tmp"
        temp.write_bytes(b"x")
    assert path.read_bytes() == b"x"


def test_a_writer_of_many_files_may_sync_their_folder_once(tmp_path: Path, monkeypatch):
    synced: list[Path] = []
    monkeypatch.setattr(files, "fsync_path", synced.append)
    path = tmp_path / "a.parquet"
    with written_aside(path, durable=True, sync_folder=False) as temp:
        temp.write_bytes(b"x")
    assert [p.parent for p in synced] == [tmp_path]  # the file's data only, not the folder
    atomic_write(path, b"y", durable=True)
    assert synced[-1] == tmp_path  # by default the rename is on disk when the call returns


def test_what_a_killed_writer_left_is_found_beside_its_file(tmp_path: Path):
    path = tmp_path / "2026-10-03-1.parquet"
    stray = tmp_path / ".2026-10-03-1.parquet.4242-a1b2c3.tmp"
    stray.write_bytes(b"half")
    (tmp_path / ".2026-10-03-11.parquet.4242-a1b2c3.tmp").write_bytes(b"another part's")
    assert leftovers(path) == [stray]
