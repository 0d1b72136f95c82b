"""Operator switches: targets turned off by hand during an incident, and fault drills.

    disable / enable       a target skipped by a route (or every route) until enabled
    start_drill / end_drill  a target that fails on one route, as if its key were invalid,
                           until the drill ends (engine.state.drills; `switchover drill`)

Kept in `data/control/targets.json` (`TargetSwitches`: every process of the host), or in a
Redis hash when `[state] redis_url` is set (`RedisTargetSwitches`: every host), so that an admin
endpoint or the CLI in one process reaches every gateway worker. Both have the same async
methods. Reads sit on the request path: cheap (one stat, or a Redis read cached ~1 s) and never
raising; a missing or unreadable file or an unreachable Redis means "nothing switched" (or the
last switches known). A drill past its end is ignored even when nobody ended it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.state.breaker_redis import DEFAULT_PREFIX, RETRY_S, SOCKET_TIMEOUT_S, RedisOutage

log = logging.getLogger("switchover.ordering")

_FORMAT = 1
Kind = Literal["disabled", "drill"]


@dataclass(frozen=True, slots=True)
class Switch:
    """A target turned off, for one route or (`route=None`) for every route; or, for a drill,
    made to fail on one route until `until`."""

    target: str
    route: str | None
    reason: str
    by: str
    since: datetime
    kind: Kind = "disabled"
    until: datetime | None = None  # a drill's planned end
    drill_id: str | None = None
    # A drill's pre-flight (engine.state.drills): started over its refusal, and what it found wrong
    # with the route's other targets. Kept with the switch so that whichever process ends the
    # drill writes the whole record.
    forced: bool = False
    preflight: str | None = None

    @property
    def key(self) -> tuple[str, str | None, str]:
        return self.target, self.route, self.kind

    def as_dict(self) -> dict[str, Any]:
        body = {**asdict(self), "since": self.since.isoformat()}
        body["until"] = self.until.isoformat() if self.until else None
        if self.kind != "drill":  # a disabled target's entry keeps the shape it always had
            del body["forced"], body["preflight"]
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Switch:
        target, route = data["target"], data.get("route")
        kind = data.get("kind", "disabled")  # files written before drills existed
        if not isinstance(target, str) or not target or not isinstance(route, str | None):
            raise ValueError(f"not a target switch: {data!r}")
        if kind not in ("disabled", "drill"):
            raise ValueError(f"not a kind of switch: {kind!r}")
        since = datetime.fromisoformat(data["since"])
        until = datetime.fromisoformat(data["until"]) if data.get("until") else None
        drill_id, preflight = data.get("drill_id"), data.get("preflight")
        return cls(target, route, str(data.get("reason", "")), str(data.get("by", "")), since,
                   kind, until, drill_id if isinstance(drill_id, str) else None,
                   data.get("forced") is True,
                   preflight if isinstance(preflight, str) else None)  # fmt: skip


class Switches(Protocol):
    async def disable(
        self, target: str, *, route: str | None = None, reason: str = "", by: str = ""
    ) -> None: ...

    async def enable(self, target: str, *, route: str | None = None) -> None: ...

    async def disabled(self, route: str) -> frozenset[str]:
        """Targets disabled for `route` or everywhere. On the request path: cheap, never raises."""

    async def entries(self) -> list[dict[str, Any]]:
        """Every switch: target, route (None: everywhere), reason, by, since (ISO time), kind,
        and for a drill its `until`, `drill_id`, `forced` and `preflight`."""

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
    ) -> None: ...

    async def end_drill(self, target: str, *, route: str) -> None: ...

    async def drilled(self, route: str) -> dict[str, datetime]:
        """Targets under a drill on `route` now, with the drill's end. Request path: cheap."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _disabled_for(switches: Sequence[Switch], route: str) -> frozenset[str]:
    return frozenset(
        s.target for s in switches if s.kind == "disabled" and (s.route is None or s.route == route)
    )


def _drilled_for(switches: Sequence[Switch], route: str, now: datetime) -> dict[str, datetime]:
    return {
        s.target: s.until
        for s in switches
        if s.kind == "drill" and s.route == route and s.until is not None and s.until > now
    }


def _updated(old: Switch | None, new: Switch) -> Switch:
    """Disabling again updates the reason and who, but keeps when it was first disabled."""
    return new if old is None else replace(new, since=old.since)


_Version = tuple[int, int, int]  # (inode, mtime_ns, size): os.replace always changes the inode
_UNREAD = object()


class TargetSwitches:
    """Switches in a JSON file shared by every process on the host (gateway workers, the CLI).

    Readers stat the file and parse it only when it changed. Writers take an exclusive lock on
    a `.lock` file beside it, so that two operators never lose each other's change, and write a
    temporary file that replaces the old one, so a reader never sees half of a file.
    """

    def __init__(self, path: Path, *, now: Callable[[], datetime] = _utc_now) -> None:
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
            current[new.key] = _updated(current.get(new.key), new)

    async def enable(self, target: str, *, route: str | None = None) -> None:
        with self._locked() as current:
            current.pop((target, route, "disabled"), None)

    async def disabled(self, route: str) -> frozenset[str]:
        return _disabled_for(self._load(), route)

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
        drill = _drill(target, route, until, drill_id, by, self._now(), forced, preflight)
        with self._locked() as current:
            current[drill.key] = drill

    async def end_drill(self, target: str, *, route: str) -> None:
        with self._locked() as current:
            current.pop((target, route, "drill"), None)

    async def drilled(self, route: str) -> dict[str, datetime]:
        return _drilled_for(self._load(), route, self._now())

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
        return tuple(sorted(map(Switch.from_dict, data["switches"]), key=_sort_key))

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
            self._write(sorted(current.values(), key=_sort_key))

    def _write(self, switches: list[Switch]) -> None:
        body = {"version": _FORMAT, "switches": [s.as_dict() for s in switches]}
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(body, indent=2) + "\n")
                f.flush()
                os.fsync(f.fileno())  # on disk before it takes the name: a crash leaves old
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)


def _sort_key(s: Switch) -> tuple[str, str, str]:
    return s.target, s.route or "", s.kind


class RedisTargetSwitches:
    """Switches in one Redis hash (`<prefix>target_switches`), shared by every host.

    Field: the JSON of [target, route]; value: the JSON of reason, by and since. `disabled`
    reads the whole hash at most once every `cache_s` per process (a handful of entries, so
    one HGETALL). While Redis is unreachable it answers from the last switches read, logs one
    warning per outage and tries again every `retry_s`; `disable`, `enable` and `entries`
    raise RedisError then, so the operator knows the switch did not take.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        now: Callable[[], datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        cache_s: float = 1.0,
        prefix: str = DEFAULT_PREFIX,
        retry_s: float = RETRY_S,
    ) -> None:
        self.redis = redis
        self._now = now
        self._monotonic = monotonic
        self._cache_s = cache_s
        self._retry_s = retry_s
        self._key = f"{prefix}target_switches"
        self._switches: tuple[Switch, ...] = ()
        self._fresh_until: float | None = None  # None: never read
        self._outage = RedisOutage(
            redis,
            "target switches",
            meanwhile="the last switches read stay in force",
            back="switches are shared",
            retry_s=retry_s,
        )
        self._unreadable: set[bytes | str] = set()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisTargetSwitches:
        redis = Redis.from_url(
            url, socket_connect_timeout=SOCKET_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S
        )
        return cls(redis, **options)

    async def disable(
        self, target: str, *, route: str | None = None, reason: str = "", by: str = ""
    ) -> None:
        field = _field(target, route)
        old = self._decoded(field, await self.redis.hget(self._key, field))
        new = _updated(old, Switch(target, route, reason, by, self._now()))
        await self._put(new)

    async def enable(self, target: str, *, route: str | None = None) -> None:
        await self.redis.hdel(self._key, _field(target, route))
        self._fresh_until = None

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
        await self._put(_drill(target, route, until, drill_id, by, self._now(), forced, preflight))

    async def end_drill(self, target: str, *, route: str) -> None:
        await self.redis.hdel(self._key, _field(target, route, "drill"))
        self._fresh_until = None

    async def disabled(self, route: str) -> frozenset[str]:
        return _disabled_for(await self._cached(), route)

    async def drilled(self, route: str) -> dict[str, datetime]:
        return _drilled_for(await self._cached(), route, self._now())

    async def _put(self, switch: Switch) -> None:
        value = {k: v for k, v in switch.as_dict().items() if k not in ("target", "route")}
        await self.redis.hset(self._key, _field(switch.target, switch.route, switch.kind),
                              json.dumps(value))  # fmt: skip
        self._fresh_until = None  # this process sees its own change at once

    async def _cached(self) -> tuple[Switch, ...]:
        now = self._monotonic()
        if self._fresh_until is None or now >= self._fresh_until:
            try:
                self._switches = await self._read()
            except (RedisError, OSError) as exc:
                self._lost(exc)
                self._fresh_until = now + self._retry_s  # the last switches known, meanwhile
            else:
                self._restored()
                self._fresh_until = now + self._cache_s
        return self._switches

    async def entries(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in await self._read()]

    async def aclose(self) -> None:
        await self.redis.aclose()

    async def _read(self) -> tuple[Switch, ...]:
        raw = await self.redis.hgetall(self._key)
        found = (self._decoded(field, value) for field, value in raw.items())
        return tuple(sorted((s for s in found if s is not None), key=_sort_key))

    def _decoded(self, field: bytes | str, value: bytes | str | None) -> Switch | None:
        """The switch stored under `field`; None when absent or unreadable (not ours)."""
        if value is None:
            return None
        try:
            return _decode(field, value)
        except (ValueError, KeyError, TypeError) as exc:
            if field not in self._unreadable:  # once, not at every read
                self._unreadable.add(field)
                log.warning("target switches: unreadable entry %.80r (%s); ignored", field, exc)
            return None

    def _lost(self, exc: Exception) -> None:
        self._outage.lost(exc)

    def _restored(self) -> None:
        self._outage.restored()


def _drill(
    target: str,
    route: str,
    until: datetime,
    drill_id: str,
    by: str,
    now: datetime,
    forced: bool,
    preflight: str | None,
) -> Switch:
    reason = f"drill {drill_id}"
    return Switch(target, route, reason, by, now, "drill", until, drill_id, forced, preflight)


def _field(target: str, route: str | None, kind: Kind = "disabled") -> str:
    # [target, route] for a disabled target (as before drills existed), with the kind else.
    return json.dumps([target, route] if kind == "disabled" else [target, route, kind])


def _decode(field: bytes | str, value: bytes | str) -> Switch:
    target, route, *kind = json.loads(field)
    body = {"target": target, "route": route, **json.loads(value)}
    return Switch.from_dict({**body, "kind": kind[0] if kind else "disabled"})
