"""Files that readers never see half-written: written aside, then renamed over the name.

Every file one process writes and another reads (spool files, breaker events, status files,
control-plane requests, published snapshots, archives) goes through `written_aside`, so they all
keep the same promises:
- a reader sees the old file or the new one, never a part (the rename is atomic on POSIX);
- the temporary is a dot-name beside the file (readers skip dot-names), unique to this writer,
  and it is removed whatever goes wrong, so a failed write leaves nothing behind;
- with `durable=True` the data is on disk before it takes the name, and the rename is on disk
  when the call returns: a crash leaves the old file or the whole new one. Files that can be
  computed again (published snapshots) skip the two fsyncs; the caller says which it is. A
  writer of many files a cycle (the recorder's spool) may sync the folder once for them all
  (`sync_folder=False`, then `fsync_path(folder)`).

A writer killed mid-write leaves its temporary; whoever cleans up after such a crash finds it
with `leftovers(path)`.
"""

from __future__ import annotations

import glob
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_aside(path: Path, *, durable: bool, sync_folder: bool = True) -> Iterator[Path]:
    """The temporary to write `path`'s content to (by any means: a DuckDB `COPY`, Parquet),
    renamed over `path` when the block ends without an exception, removed when it raises.
    `sync_folder=False` leaves the rename's fsync to the caller (a durable write only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(3)}.tmp")
    try:
        yield temp
        if durable:
            fsync_path(temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if durable and sync_folder:
        fsync_path(path.parent)


def atomic_write(path: Path, data: bytes | str, *, durable: bool) -> None:
    """`data` at `path` (text as UTF-8), under `written_aside`'s promises."""
    with written_aside(path, durable=durable) as temp:
        temp.write_bytes(data.encode() if isinstance(data, str) else data)


def leftovers(path: Path) -> list[Path]:
    """The temporaries of `path` that writers killed mid-write left behind (`written_aside`'s
    own failures remove theirs)."""
    return sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))


def fsync_path(path: Path) -> None:
    """`path`'s content (a file) or its entries (a folder) on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
