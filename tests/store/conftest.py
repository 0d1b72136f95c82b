"""Fixtures for the store tests: a fresh store, a spool directory, a published directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from engine.store import open_store


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    path = tmp_path / "spool"
    path.mkdir()
    return path


@pytest.fixture
def published(tmp_path: Path) -> Path:
    return tmp_path / "published"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "switchover.duckdb"


@pytest.fixture
def store(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = open_store(db_path)
    yield con
    con.close()
