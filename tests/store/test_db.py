"""Opening the store: one owner, a clear refusal for anyone else."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store import StoreLockedError, open_store

DRIVER = Path(__file__).parents[1] / "helpers" / "store_driver.py"


@pytest.fixture
def held(db_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process (a second scheduler) holding the store open."""
    holder = subprocess.Popen(
        [sys.executable, str(DRIVER), "hold", str(db_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_second_process_gets_one_line_naming_the_file_and_the_rule(db_path, held):
    with pytest.raises(StoreLockedError) as caught:
        open_store(db_path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(db_path) in message
    assert f"PID {held.pid}" in message
    assert "only one Switchover scheduler may run" in message


def test_the_store_opens_once_the_other_process_is_gone(db_path, held):
    held.kill()
    held.wait()
    open_store(db_path).close()


def test_a_second_open_in_the_same_process_is_refused_too(store, db_path):
    with pytest.raises(StoreLockedError, match="already open in this process"):
        open_store(db_path)


def test_open_creates_the_data_directory(tmp_path):
    path = tmp_path / "a" / "b" / "switchover.duckdb"
    open_store(path).close()
    assert path.exists()


def test_a_cursor_for_another_thread_lands_in_the_store(store):
    cursor = store.cursor()
    assert cursor.execute("SELECT count(*) FROM attempts").fetchone() == (0,)
    cursor.execute("CREATE TABLE scratch (x INT)")
    assert store.execute("SELECT count(*) FROM scratch").fetchone() == (0,)


def test_the_store_works_in_utc(store):
    (zone,) = store.execute("SELECT current_setting('TimeZone')").fetchone()
    assert zone == "UTC"
