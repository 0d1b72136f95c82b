"""A recorder's status file: what the scheduler needs to know that attempts were lost or are stuck.

    <data>/recorder-status/<host>-<pid>-<start ms>-<n>.json     (n: the recorder in its process)

One file per Recorder, rewritten aside and renamed (never read half) by the recorder's flusher
at the end of a flush cycle, only when a figure that tells trouble changed (dropped, failed
flushes, failing or not, the last error), and once more by `close()`, with the attempts still
buffered at exit counted as dropped. A recorder that never had trouble writes no file: healthy
gateways do no extra I/O. The scheduler (engine.store.telemetry) reads these every cycle and
turns a growing `dropped` into a `telemetry_loss` alert, a `failing` recorder into
`telemetry_lag`.

Where: beside the spool (`DataPaths.recorder_status`), not in it, because the loss worth
telling is most often the spool's own failure (folder gone, not a folder, unwritable). When
that folder cannot be written either, the spool's `.status/` folder is tried; when neither
can, the loss is only in the log and in the gateway's /metrics.

Never here: a key, a prompt, an attempt's content. A file holds counts and the text of the
recorder's own write errors, with any credential in a URL masked.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write
from engine.core.paths import recorder_status_dir, recorder_status_fallback_dir

log = logging.getLogger("switchover.recorder")

VERSION = 1
_RECORDERS = itertools.count()
ERROR_LIMIT = 300
# scheme://user:password@host → scheme://user:***@host; password=… in a DSN → password=***
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]+@")
_DSN_PASSWORD = re.compile(r"(?i)\b(password|passwd|pwd)=\S+")


def redact(text: str) -> str:
    """An error text fit for a status file, a log line or /v1/status: credentials masked, cut."""
    text = _DSN_PASSWORD.sub(r"\1=***", _URL_PASSWORD.sub(r"\1***@", text))
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """A recorder's counters, for /metrics and /v1/status (Recorder.stats())."""

    buffered: int  # recorded, not yet in a spool file (including a batch being written)
    written: int  # rows in spool files (or handed to the sink)
    files: int  # spool files (or batches) written
    dropped: int  # lost: beyond max_buffered, rows Arrow rejected, buffered at close
    failed_flushes: int
    last_error: str | None
    last_flush_at: datetime | None  # UTC, the last successful write
    failing: bool = False  # the last write failed; the attempts wait for the next cycle
    lost_at_exit: int = 0  # of `dropped`: still buffered when `close()` could not write them


@dataclass(frozen=True, slots=True)
class RecorderStatus:
    process: str  # the file's name: host-pid-start ms-n
    host: str
    pid: int
    destination: str  # the spool folder, or "sink" (PostgreSQL)
    buffered: int  # attempts waiting to be written when the file was written
    written: int
    dropped: int  # every attempt lost: beyond max_buffered, not a valid row, buffered at exit
    rejected: int  # of those, records that could not become rows
    lost_at_exit: int  # of those, still buffered when the recorder closed
    failed_flushes: int
    failing: bool  # the last write failed
    last_error: str | None
    last_flush_at: datetime | None
    closed: bool
    drop_reason: str | None = None  # why the attempts dropped since the previous file were lost
    # Real time, set when written (it only orders two files of one recorder; the scheduler
    # times everything on its own clock). Never the recorder's clock: tests watch its calls.
    updated_at: datetime | None = None

    @property
    def troubled(self) -> bool:
        return bool(self.dropped or self.failed_flushes)

    def trouble(self) -> tuple[Any, ...]:
        """The figures whose change rewrites the file (progress alone does not)."""
        return (self.dropped, self.failed_flushes, self.failing, self.last_error, self.closed)

    def to_json(self) -> bytes:
        body: dict[str, Any] = {"version": VERSION, **asdict(self)}
        for key in ("last_flush_at", "updated_at"):
            body[key] = body[key].isoformat() if body[key] is not None else None
        return (json.dumps(body, indent=1) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes) -> RecorderStatus:
        body = json.loads(raw)
        values = {f.name: body[f.name] for f in fields(cls)}
        for key in ("last_flush_at", "updated_at"):
            values[key] = datetime.fromisoformat(values[key]) if values[key] else None
        if values["updated_at"] is None:
            raise ValueError("a status needs updated_at")
        return cls(**values)


def drop_reason(
    before: RecorderStatus | None, now: RecorderStatus, max_buffered: int
) -> str | None:
    """Why the attempts dropped since `before` (the last file written) were lost, in words."""
    if before is not None and now.dropped == before.dropped:
        return before.drop_reason

    def grew(name: str) -> int:
        return getattr(now, name) - (getattr(before, name) if before is not None else 0)

    cause = f"the spool could not be written: {now.last_error}" if now.failing else None
    exit_, rejected = grew("lost_at_exit"), grew("rejected")
    overflow = grew("dropped") - exit_ - rejected
    parts = []
    if overflow > 0:
        waited = f" while {cause}" if cause else " before the flusher could write them"
        parts.append(f"{overflow} beyond max_buffered ({max_buffered}){waited}")
    if rejected > 0:
        parts.append(f"{rejected} records that could not become rows")
    if exit_ > 0:
        parts.append(f"{exit_} still buffered at exit" + (f" ({cause})" if cause else ""))
    return "; ".join(parts) or None


class StatusFile:
    """One recorder's status file. `update` runs on the flusher (or in `close`), never on the
    hook's thread: it does I/O."""

    def __init__(self, spool_dir: Path, prefix: str) -> None:
        # Two recorders of one process (two Switchover instances) never share a file.
        self.name = f"{prefix}-{next(_RECORDERS)}"
        self.folders = (recorder_status_dir(spool_dir), recorder_status_fallback_dir(spool_dir))
        self.last: RecorderStatus | None = None  # as last written
        self._where: Path | None = None

    def update(
        self, status: RecorderStatus, *, max_buffered: int, final: bool = False
    ) -> str | None:
        """Write `status` if its trouble changed since the last file (a recorder that never had
        trouble writes none); why no folder could hold it, else None. The caller logs that
        (the recorder, at most once a minute with its other write failures)."""
        if self.last is None and not status.troubled:
            return None
        if self.last is not None and self.last.trouble() == status.trouble():
            return None
        reason = drop_reason(self.last, status, max_buffered)
        status = replace(status, drop_reason=reason, updated_at=datetime.now(UTC))
        data = status.to_json()
        errors = []
        for folder in self.folders:
            path = folder / f"{self.name}.json"
            try:
                folder.mkdir(exist_ok=True)  # one level only: a missing data folder is not ours
                atomic_write(path, data, durable=final)
            except OSError as error:
                errors.append(f"{folder}: {redact(f'{type(error).__name__}: {error}')}")
                continue
            if self._where is not None and self._where != path:
                with contextlib.suppress(OSError):  # the newer file is the one to read
                    self._where.unlink()
            self.last, self._where = status, path
            return None
        return "; ".join(errors)


def read_statuses(folders: Iterable[Path]) -> dict[str, tuple[RecorderStatus, Path]]:
    """Every readable status file in `folders`, by process, the newest where two folders hold
    one (a recorder moved to the fallback and back). For the scheduler: an unreadable file is
    renamed `*.bad` and logged."""
    found: dict[str, tuple[RecorderStatus, Path]] = {}
    for folder in folders:
        try:
            entries = sorted(folder.iterdir())
        except OSError:  # absent, or not a folder: nothing there to read
            continue
        for path in entries:
            if path.name.startswith(".") or path.suffix != ".json":
                continue
            try:
                status = RecorderStatus.from_json(path.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as error:
                # Set aside, once: read again every cycle it would be logged every cycle.
                log.error("recorder status %s is unreadable, set aside: %s", path, error)
                with contextlib.suppress(OSError):
                    path.rename(path.with_suffix(".bad"))
                continue
            known = found.get(status.process)
            if known is None or _newer(status, known[0]):
                found[status.process] = (status, path)
    return found


def _newer(a: RecorderStatus, b: RecorderStatus) -> bool:
    return (a.updated_at or datetime.min.replace(tzinfo=UTC)) > (
        b.updated_at or datetime.min.replace(tzinfo=UTC)
    )
