"""Operator switches in the data folder's `control/targets.json`, seen by every process of the
host: gateway workers read it on their requests' path, the CLI and the admin API write it.
What a switch is, and what every keeper of them answers: engine.state.switches.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write
from engine.state.switches import Switch, disabled_for, drilled_for, sort_key, updated, utc_now

log = logging.getLogger("switchover.ordering")

_FORMAT = 1
_Version = tuple[int, int, int]  # (inode, mtime_ns, size): os.replace always changes the inode
_UNREAD = object()


class TargetSwitches:
    """Switches in a JSON file shared by every process on the host (gateway workers, the CLI).

    Readers stat the file and parse it only when it changed. Writers take an exclusive lock on
    a `.lock` file beside it, so that two operators never lose each other's change, and write a
    temporary file that replaces the old one, so a reader never sees half of a file.
    """

    def __init__(self, path: Path, *, now: Callable[[], datetime] = utc_now) -> None:
        self.path = path
        self._now = now
        # The file's version behind `_switches` (None: no file), until the first read _UNREAD.
        self._version: _Version | object | None = _UNREAD
        self._switches: tuple[Switch, ...] = ()
        self._last_warning = ""  # a broken file must not log once per request

    async def disable(
        self, target: str, *, route: str | None = None, reason: str = "", by: str = ""
    ) -> None:
        new = Switch(target, route, reason, by, self._now())
        with self._locked() as current:
            current[new.key] = updated(current.get(new.key), new)

    async def enable(self, target: str, *, route: str | None = None) -> None:
        with self._locked() as current:
            current.pop((target, route, "disabled"), None)

    async def disabled(self, route: str) -> frozenset[str]:
        return disabled_for(self._load(), route)

    async def start_drill(
        self,
        target: str,
        *,
        route: str,
        until: datetime,
        drill_id: str,
        by: str = "",
        forced: bool = False,
        preflight: str | None = None,
    ) -> None:
        drill = Switch.drill(
            target,
            route=route,
            until=until,
            drill_id=drill_id,
            by=by,
            now=self._now(),
            forced=forced,
            preflight=preflight,
        )
        with self._locked() as current:
            current[drill.key] = drill

    async def end_drill(self, target: str, *, route: str) -> None:
        with self._locked() as current:
            current.pop((target, route, "drill"), None)

    async def drilled(self, route: str) -> dict[str, datetime]:
        return drilled_for(self._load(), route, self._now())

    async def entries(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self._load()]

    # --- reading -------------------------------------------------------------------------

    def _load(self) -> tuple[Switch, ...]:
        """The switches, re-read only when the file changed; never raises."""
        try:
            st = os.stat(self.path)
            version: _Version | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            version = None
        except OSError as exc:  # an unreadable folder, say: what was read last stays
            self._warn(f"cannot stat {self.path} ({exc}); the switches read last stay in force")
            return self._switches
        if version == self._version:
            return self._switches
        try:
            self._switches = self._parse() if version is not None else ()
        except OSError as exc:  # tried again at the next call
            self._warn(f"cannot read {self.path} ({exc}); the switches read last stay in force")
            return self._switches
        except (ValueError, KeyError, TypeError) as exc:
            self._warn(f"{self.path} is unreadable ({exc}); nothing disabled")
            self._switches = ()
        self._version = version
        return self._switches

    def _warn(self, message: str) -> None:
        if message != self._last_warning:
            self._last_warning = message
            log.error("target switches: %s", message)

    def _parse(self) -> tuple[Switch, ...]:
        data = json.loads(self.path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("switches"), list):
            raise ValueError("expected {'switches': [...]}")
        return tuple(sorted(map(Switch.from_dict, data["switches"]), key=sort_key))

    # --- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[tuple[str, str | None, str], Switch]]:
        """Yield the switches by key (target, route, kind) to change in place, under the lock;
        write them back atomically. Raises OSError: the operator must hear of a failed write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
            try:
                current = {s.key: s for s in self._parse()}
            except FileNotFoundError:
                current = {}
            except (ValueError, KeyError, TypeError) as exc:
                bad = self.path.with_name(self.path.name + ".bad")
                shutil.copyfile(self.path, bad)
                self._warn(f"{self.path} was unreadable ({exc}); replaced, kept as {bad.name}")
                current = {}
            yield current
            self._write(sorted(current.values(), key=sort_key))

    def _write(self, switches: list[Switch]) -> None:
        body = {"version": _FORMAT, "switches": [s.as_dict() for s in switches]}
        # On disk before it takes the name: a crash leaves the old switches or the new ones.
        atomic_write(self.path, json.dumps(body, indent=2) + "\n", durable=True)
