"""Operator switches in one Redis hash, shared by every host that names the same Redis
(`[state] redis_url`). What a switch is, and what every keeper of them answers:
engine.state.switches.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.state.breaker_redis import DEFAULT_PREFIX, RETRY_S, SOCKET_TIMEOUT_S, RedisOutage
from engine.state.switches import (
    Kind,
    Switch,
    disabled_for,
    drilled_for,
    sort_key,
    updated,
    utc_now,
)

log = logging.getLogger("switchover.ordering")


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
        now: Callable[[], datetime] = utc_now,
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
        new = updated(old, Switch(target, route, reason, by, self._now()))
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
        await self._put(drill)

    async def end_drill(self, target: str, *, route: str) -> None:
        await self.redis.hdel(self._key, _field(target, route, "drill"))
        self._fresh_until = None

    async def disabled(self, route: str) -> frozenset[str]:
        return disabled_for(await self._cached(), route)

    async def drilled(self, route: str) -> dict[str, datetime]:
        return drilled_for(await self._cached(), route, self._now())

    async def _put(self, switch: Switch) -> None:
        value = {k: v for k, v in switch.as_dict().items() if k not in ("target", "route")}
        await self.redis.hset(
            self._key, _field(switch.target, switch.route, switch.kind), json.dumps(value)
        )
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
        return tuple(sorted((s for s in found if s is not None), key=sort_key))

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


def _field(target: str, route: str | None, kind: Kind = "disabled") -> str:
    # [target, route] for a disabled target (as before drills existed), with the kind else.
    return json.dumps([target, route] if kind == "disabled" else [target, route, kind])


def _decode(field: bytes | str, value: bytes | str) -> Switch:
    target, route, *kind = json.loads(field)
    body = {"target": target, "route": route, **json.loads(value)}
    return Switch.from_dict({**body, "kind": kind[0] if kind else "disabled"})
