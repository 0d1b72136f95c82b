"""The control plane: what an operator's command asks of the processes that act on it, as files
under the data folder's `control/` (engine.core.paths), since neither the CLI nor a gateway may
open the database.

    control/targets.json         operator switches and drills, read by every gateway process
                                 (engine.state.switches_file; in Redis when one is configured)
    control/drills/<id>.json     a drill's record, at its start and its end (engine.state.drills)
    control/evals/<run>.json     an eval run's results (engine.evals.runner)
    control/silences/<id>.json   a silence asked for (engine.alerts.silences)

The three inboxes hold requests to the scheduler: `submit` writes one, `pending` is how the
scheduler takes them in. A request is written aside and renamed (never read half-written) and
is on disk when `submit` returns: the command that wrote it has told its operator that it took,
and the request cannot be computed again. The scheduler deletes each request it took in, and
sets aside (`<name>.bad`) one it cannot read, so that it is kept for a person and never retried.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write

log = logging.getLogger("switchover.scheduler")


def submit(inbox: Path, request_id: str, body: Mapping[str, Any]) -> Path:
    """`body` as the request `request_id` in `inbox` (a request of that id already waiting is
    replaced: a drill's end supersedes its start); the file written."""
    path = inbox / f"{request_id}.json"
    atomic_write(path, json.dumps(body), durable=True)
    return path


@dataclass(frozen=True, slots=True)
class Request:
    """A request read from an inbox: its file and what it asks."""

    path: Path
    body: Any  # the parsed JSON: the taker checks its shape

    def done(self) -> None:
        """Taken in: gone from the inbox."""
        self.path.unlink(missing_ok=True)

    def set_aside(self, why: object) -> None:
        """Not taken in, and never to be tried again: kept beside as `<name>.bad`."""
        log.error("control request %s cannot be taken in (%s); set aside as .bad", self.path, why)
        with contextlib.suppress(OSError):
            self.path.rename(self.path.with_suffix(".bad"))


def pending(inbox: Path) -> Iterator[Request]:
    """Each request waiting in `inbox`, in the order of their names; one whose file cannot be
    read or is not JSON is set aside and skipped. The taker calls `done` or `set_aside`."""
    try:
        files = sorted(p for p in inbox.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return
    for path in files:
        request = Request(path, None)
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            request.set_aside(error)
            continue
        yield Request(path, body)
