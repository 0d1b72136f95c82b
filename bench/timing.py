"""Timing engine code from outside, for the benches: wrap a function for the length of a block,
or a DuckDB connection, and add up the seconds per label. Never changes engine code: the
wrapper is removed when the block ends, and the connection is only handed in where the engine
takes one (`Pipeline.con`, `ingest_spool(con, ...)`)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Laps:
    """Seconds spent per label, in the order first seen."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds


@contextlib.contextmanager
def timing(owner: Any, name: str, laps: Laps, label: Callable[..., str]) -> Iterator[None]:
    """Replace `owner.name` with a wrapper that adds each call's time to `laps` under
    `label(*args)`, until the block ends."""
    original = getattr(owner, name)
    own = name in vars(owner)  # else a method of the class: the instance's copy is deleted

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            laps.add(label(*args, **kwargs), time.perf_counter() - started)

    setattr(owner, name, timed)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


class TimedConnection:
    """A DuckDB connection that times every `execute` by its statement, and `commit` (where
    DuckDB may checkpoint), so that a slow step can be pinned on one SQL statement."""

    def __init__(self, con: Any, laps: Laps) -> None:
        self._con, self._laps = con, laps

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._con.execute(sql, *args, **kwargs)
        finally:
            self._laps.add(statement(sql), time.perf_counter() - started)

    def commit(self) -> Any:
        started = time.perf_counter()
        try:
            return self._con.commit()
        finally:
            self._laps.add("COMMIT", time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def statement(sql: str) -> str:
    return " ".join(sql.split())


def describe(sql: str, width: int = 110) -> str:
    """A statement in one line: a COPY by the snapshot it publishes, without its temp path, and
    a long list of column names as their number."""
    words = statement(sql)
    words = re.sub(
        r"(?<=SELECT )(?:\w+, ){5,}\w+(?= FROM)",
        lambda m: f"<{m.group(0).count(',') + 1} columns>",
        words,
    )
    copy = re.fullmatch(r"COPY \((.*)\) TO '.*?/\.(\w+)\.tmp\.parquet'.*", words)
    if copy:
        words = f"publish {copy.group(2)}: {copy.group(1)}"
    return words if len(words) <= width else words[: width - 1] + "…"
