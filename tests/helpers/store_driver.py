"""A stand-in scheduler (or dashboard) run as a real process by the store tests.

    python tests/helpers/store_driver.py hold DB
    python tests/helpers/store_driver.py ingest DB SPOOL MAX_FILES
    python tests/helpers/store_driver.py pipeline DB SPOOL PUBLISHED SECONDS [DONE_FILE]
    python tests/helpers/store_driver.py reader PUBLISHED SECONDS INTERVAL [MIN_QUERIES]

Each prints "ready" once it holds what it needs, and a JSON summary as its last line.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.published import partitions
from engine.published.partitions import append as publish_recent_attempts
from engine.published.partitions import compact as compact_recent_attempts
from engine.published.read import PublishedData
from engine.store import ingest_spool, open_store
from engine.store.ingest import pending_files


def say(line: str) -> None:
    print(line, flush=True)


def hold(db: str) -> None:
    con = open_store(Path(db))
    say("ready")
    time.sleep(3600)
    con.close()


def ingest(db: str, spool: str, max_files: str) -> None:
    con = open_store(Path(db))
    say("ready")
    files = rows = skipped = 0
    while pending_files(Path(spool))[0]:
        result = ingest_spool(con, Path(spool), max_files=int(max_files))
        files, rows, skipped = files + result.files, rows + result.rows, skipped + result.skipped
    con.close()
    say(json.dumps({"files": files, "rows": rows, "skipped": skipped}))


def pipeline(db: str, spool: str, published: str, seconds: str, done_file: str = "") -> None:
    """Ingest and publish back to back for `seconds`, then until the spool is empty. With a
    `done_file`, first also until that file exists: its writer has written its last spool
    file, so an empty spool then means everything was ingested."""
    con = open_store(Path(db))
    say("ready")
    end = time.monotonic() + float(seconds)
    cycles = rows = 0

    def writing() -> bool:
        return time.monotonic() < end or (bool(done_file) and not Path(done_file).exists())

    # `writing()` first: once it is False every file is in place, so the spool check sees it.
    # Merged parts deleted at once, and merges every few cycles: the readers meet the parts'
    # whole life (appended, merged, listed by an older manifest and gone) in a short soak.
    partitions.RETIRED_GRACE = timedelta(0)
    partitions.FANOUT = (4, 4, 4, 4)
    while writing() or pending_files(Path(spool))[0]:
        rows += ingest_spool(con, Path(spool)).rows
        publish_recent_attempts(con, Path(published), datetime.now(UTC), hours=24 * 365 * 10)
        cycles += 1
        if cycles % 3 == 0:
            compact_recent_attempts(Path(published), datetime.now(UTC), hours=24 * 365 * 10)
        time.sleep(0.02)
    publish_recent_attempts(con, Path(published), datetime.now(UTC), hours=24 * 365 * 10)
    con.close()
    say(json.dumps({"cycles": cycles, "rows": rows}))


def reader(published: str, seconds: str, interval: str, min_queries: str = "0") -> None:
    """Query every `interval` seconds for `seconds` and at least `min_queries` times (counted,
    not timed: a loaded machine is slow); count errors and any shrinking of the data."""
    data = PublishedData(Path(published))
    say("ready")
    since = datetime.now(UTC) - timedelta(days=3650)
    end = time.monotonic() + float(seconds)
    queries = errors = shrank = 0
    last = seen = 0
    first_error = None
    while time.monotonic() < end or queries < int(min_queries):
        try:
            counts = data.query("attempt_counts_by_minute", since=since)
            latest = data.query("recent_attempts", since=since, limit=20)
            total = int(counts["attempts"].sum())
            if total < last:
                shrank += 1
            if total and len(latest) != min(20, total):
                raise AssertionError(f"{len(latest)} latest rows of {total}")
            last, seen = total, max(seen, total)
        except Exception as error:
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {error}"
        queries += 1
        time.sleep(float(interval))
    summary = {"queries": queries, "errors": errors, "shrank": shrank, "max_rows": seen}
    say(json.dumps({**summary, "first_error": first_error}))


if __name__ == "__main__":
    modes = {"hold": hold, "ingest": ingest, "pipeline": pipeline, "reader": reader}
    modes[sys.argv[1]](*sys.argv[2:])
