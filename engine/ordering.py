"""Which order a route tries its targets in: operator switches, health scores, own keys first.

    TargetOrder.arrange(route, targets)      per request, for the chain
      ├── switches.disabled(route)           targets an operator turned off (one stat, or a
      │                                      Redis read cached ~1 s)
      ├── scores.scores(names)               recent success rates (engine.health_scores);
      │                                      only on adaptive routes
      └── order_targets(...)                 pure: filter, sort, break ties with the rng

Switches are kept in `data/control/targets.json` (`TargetSwitches`), or in a Redis hash when
`[state] redis_url` is set (`RedisTargetSwitches`), so that an admin endpoint or the CLI in one
process turns a target off for every gateway worker. Both have the same async methods.

Ordering is an optimisation: nothing here may fail a request. A missing or unreadable switch
file or an unreachable Redis means "nothing disabled" (or the last switches known), and a
route whose every target is disabled tries them all rather than none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.breaker_redis import DEFAULT_PREFIX, RETRY_S, SOCKET_TIMEOUT_S, RedisOutage
from engine.health_scores import NO_DATA, HealthScores

if TYPE_CHECKING:
    from engine.chain import Target

log = logging.getLogger("switchover.ordering")

T = TypeVar("T")
_FORMAT = 1


# --- the order (pure) --------------------------------------------------------------------------


def order_targets(
    targets: Sequence[T],
    *,
    name: Callable[[T], str],
    own_key: Callable[[T], bool],
    scores: Mapping[str, float] | None,
    disabled: frozenset[str],
    own_keys_first: bool,
    rng: random.Random,
) -> list[T]:
    """`targets` without the disabled ones (all of them when every one is disabled: a disabled
    target may still answer, no target certainly will not), in configured order, or by score
    (highest first, ties in random order) when `scores` is given; own-key targets first when
    `own_keys_first`, each group keeping its order. A target missing from `scores` scores 1.0."""
    kept = [t for t in targets if name(t) not in disabled] or list(targets)
    if scores is not None:
        # Shuffled, then stably sorted: equal scores end up in random order. Ties are the
        # normal case (every healthy target scores 1.0), so an adaptive route spreads its
        # traffic over its healthy targets, which keeps every target's score fresh.
        rng.shuffle(kept)
        kept.sort(key=lambda t: -scores.get(name(t), NO_DATA))
    if own_keys_first:
        kept.sort(key=lambda t: not own_key(t))  # stable: the order above holds in each group
    return kept


class TargetOrder:
    """One route's ordering policy. `scores=None`: the route is not adaptive (configured
    order); `switches=None`: no operator switches."""

    def __init__(
        self,
        *,
        scores: HealthScores | None,
        switches: Switches | None,
        own_keys_first: bool,
        rng: random.Random | None = None,
    ) -> None:
        self.scores = scores
        self.switches = switches
        self.own_keys_first = own_keys_first
        self.rng = rng or random.Random()
        self._all_disabled: set[str] = set()  # routes warned about, until they recover

    async def arrange(self, route: str, targets: Sequence[Target]) -> list[Target]:
        """The targets to try for one request on `route`, in order; never raises."""
        try:
            disabled = await self.switches.disabled(route) if self.switches else frozenset()
            names = [t.name for t in targets]
            scores = await self.scores.scores(names) if self.scores is not None else None
            self._warn_if_all_disabled(route, names, disabled)
            return order_targets(
                targets,
                name=lambda t: t.name,
                own_key=lambda t: t.key_kind == "own",
                scores=scores,
                disabled=disabled,
                own_keys_first=self.own_keys_first,
                rng=self.rng,
            )
        except Exception:
            log.exception("ordering route %s failed; its configured order is used", route)
            return list(targets)

    def _warn_if_all_disabled(self, route: str, names: list[str], disabled: frozenset[str]) -> None:
        if not disabled.issuperset(names):
            self._all_disabled.discard(route)
        elif route not in self._all_disabled:
            self._all_disabled.add(route)
            log.warning("every target of route %s is disabled; all are tried regardless", route)


# --- operator switches -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Switch:
    """A target turned off, for one route or (`route=None`) for every route."""

    target: str
    route: str | None
    reason: str
    by: str
    since: datetime

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "since": self.since.isoformat()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Switch:
        target, route = data["target"], data.get("route")
        if not isinstance(target, str) or not target or not isinstance(route, str | None):
            raise ValueError(f"not a target switch: {data!r}")
        since = datetime.fromisoformat(data["since"])
        return cls(target, route, str(data.get("reason", "")), str(data.get("by", "")), since)


class Switches(Protocol):
    async def disable(
        self, target: str, *, route: str | None = None, reason: str = "", by: str = ""
    ) -> None: ...

    async def enable(self, target: str, *, route: str | None = None) -> None: ...

    async def disabled(self, route: str) -> frozenset[str]:
        """Targets disabled for `route` or everywhere. On the request path: cheap, never raises."""

    async def entries(self) -> list[dict[str, Any]]:
        """Every switch: target, route (None: everywhere), reason, by, since (ISO time)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _disabled_for(switches: Sequence[Switch], route: str) -> frozenset[str]:
    return frozenset(s.target for s in switches if s.route is None or s.route == route)


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
            current[target, route] = _updated(current.get((target, route)), new)

    async def enable(self, target: str, *, route: str | None = None) -> None:
        with self._locked() as current:
            current.pop((target, route), None)

    async def disabled(self, route: str) -> frozenset[str]:
        return _disabled_for(self._load(), route)

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
    def _locked(self) -> Iterator[dict[tuple[str, str | None], Switch]]:
        """Yield the switches by (target, route) to change in place, under the writers' lock;
        write them back atomically. Raises OSError: the operator must hear of a failed write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
            try:
                current = {(s.target, s.route): s for s in self._parse()}
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


def _sort_key(s: Switch) -> tuple[str, str]:
    return s.target, s.route or ""


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
        value = json.dumps({"reason": new.reason, "by": new.by, "since": new.since.isoformat()})
        await self.redis.hset(self._key, field, value)
        self._fresh_until = None  # this process sees its own change at once

    async def enable(self, target: str, *, route: str | None = None) -> None:
        await self.redis.hdel(self._key, _field(target, route))
        self._fresh_until = None

    async def disabled(self, route: str) -> frozenset[str]:
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
        return _disabled_for(self._switches, route)

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


def _field(target: str, route: str | None) -> str:
    return json.dumps([target, route])


def _decode(field: bytes | str, value: bytes | str) -> Switch:
    target, route = json.loads(field)
    return Switch.from_dict({"target": target, "route": route, **json.loads(value)})
