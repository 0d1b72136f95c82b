"""Breaker states in Redis, shared by every gateway worker on every host.

One Redis string per target (`switchover:breaker:<target>`) holds its `BreakerState` as JSON;
a set (`switchover:breakers`) lists the targets for `snapshot_all`. Each call is one optimistic
transaction: WATCH the key, read the state, apply the very `admit` / `transition` functions of
`engine.state.breaker`, and MULTI/SET/EXEC it back; a concurrent writer aborts the EXEC and the call
reruns on the fresh state. So there is one breaker policy in the code base, and of any number
of processes admitting on a half-open key exactly one takes the probe lease. An admit that
changes nothing (closed, or rejected) is answered from a plain GET, without a transaction.

Time: states hold shared time, wall-clock seconds since the epoch, so that processes started
at different moments and on different hosts agree on `open_until`, `probe_until` and
`cooling_until`. Callers keep passing their own monotonic `now`; the store adds
`clock_offset_s` (`offset_to_wall(clock)`: wall time minus the clock's reading, taken once at
start) on the way in and subtracts it from the states it hands out. Hosts must therefore keep
their clocks in step (NTP); a skew of s seconds between two hosts moves a reopening or a lease
by s seconds, and a wall-clock step after a process started skews that process until restart.

Redis unreachable: the call is answered by an in-process `MemoryBreakerStore` instead, one
warning is logged per outage and `fallbacks` counts the calls so answered (the gateway exports
it as `switchover_breaker_store_fallback_total`). Redis is tried again `retry_s` later; once it
answers, the shared state is used again and what this process learnt alone is dropped. No
request ever fails because of the store. Never sleeps, never reads a clock.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any, TypeVar

from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from engine.core.clock import Clock
from engine.state.breaker import (
    Admission,
    BreakerPolicy,
    BreakerState,
    Event,
    OnChange,
    Status,
    _notable,
    admit,
    transition,
)
from engine.state.breaker_fallback import MemoryFallback

log = logging.getLogger("switchover.breaker")

T = TypeVar("T")
Step = Callable[[BreakerState, float], tuple[T, BreakerState]]

DEFAULT_PREFIX = "switchover:"
# Short: a Redis that does not answer must cost a request half a second once, not a minute.
SOCKET_TIMEOUT_S = 0.5
RETRY_S = 5.0  # while Redis is unreachable, try it again this often
MAX_CONFLICTS = 64  # lost races on one key before a call gives up on sharing (never seen)
_FORMAT = 1


class RedisBreakerStore(MemoryFallback):
    """Breaker states in Redis: see the module docstring. `on_change` is called, with states in
    the caller's time, by the one process whose write made the change."""

    def __init__(
        self,
        redis: Redis,
        policy: BreakerPolicy | None = None,
        policies_by_key: Mapping[str, BreakerPolicy] | None = None,
        on_change: OnChange | None = None,
        *,
        clock_offset_s: float = 0.0,
        prefix: str = DEFAULT_PREFIX,
        retry_s: float = RETRY_S,
    ) -> None:
        super().__init__(policy, policies_by_key, on_change, retry_s)
        self.redis = redis
        self._offset = clock_offset_s
        self._prefix = prefix
        self._index = f"{prefix}breakers"
        self._outage = RedisOutage(
            redis,
            "breaker store",
            meanwhile="breakers fall back to this process's memory",
            back="breakers are shared",
            retry_s=retry_s,
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        policy: BreakerPolicy | None = None,
        policies_by_key: Mapping[str, BreakerPolicy] | None = None,
        on_change: OnChange | None = None,
        *,
        clock: Clock | None = None,
        **options: Any,
    ) -> RedisBreakerStore:
        """A store on `url` (redis://, rediss://, unix://; timeouts in the URL win over ours).
        `clock`: the callers' clock, whose readings are mapped to wall time."""
        redis = Redis.from_url(
            url, socket_connect_timeout=SOCKET_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S
        )
        offset = offset_to_wall(clock) if clock is not None else 0.0
        return cls(redis, policy, policies_by_key, on_change, clock_offset_s=offset, **options)

    @property
    def shared(self) -> bool:
        """False while Redis is unreachable and this process's memory answers."""
        return not self._outage.down

    async def admit(self, key: str, now: float) -> tuple[Admission, Status]:
        policy = self.policy_for(key)

        def step(state: BreakerState, at: float) -> tuple[Admission, BreakerState]:
            return admit(state, at, policy)

        if self._use_memory(now):
            return await self._memory.admit(key, now)
        try:
            admission, after = await self._apply(key, now, step, read_first=True)
        except (RedisError, OSError) as exc:
            self._lost(exc, now)
            return await self._memory.admit(key, now)
        self._restored()
        return admission, after.status

    async def record(self, key: str, event: Event, now: float) -> None:
        policy = self.policy_for(key)

        def step(state: BreakerState, at: float) -> tuple[None, BreakerState]:
            return None, transition(state, event, at, policy)

        if self._use_memory(now):
            return await self._memory.record(key, event, now)
        try:
            await self._apply(key, now, step)
        except (RedisError, OSError) as exc:
            self._lost(exc, now)
            return await self._memory.record(key, event, now)
        self._restored()

    async def snapshot(self, key: str) -> BreakerState:
        if self._outage.down:
            self.fallbacks += 1
            return await self._memory.snapshot(key)
        try:
            raw = await self.redis.get(self._name(key))
        except (RedisError, OSError) as exc:
            self._lost(exc, None)
            return await self._memory.snapshot(key)
        return self._local(_decode(raw))

    async def snapshot_all(self) -> dict[str, BreakerState]:
        if self._outage.down:
            self.fallbacks += 1
            return await self._memory.snapshot_all()
        try:
            keys = sorted(k.decode() for k in await self.redis.smembers(self._index))
            raws = await self.redis.mget([self._name(k) for k in keys]) if keys else []
        except (RedisError, OSError) as exc:
            self._lost(exc, None)
            return await self._memory.snapshot_all()
        return {k: self._local(_decode(raw)) for k, raw in zip(keys, raws, strict=True) if raw}

    async def aclose(self) -> None:
        await self.redis.aclose()

    # --- one optimistic transaction ------------------------------------------------------

    async def _apply(
        self, key: str, now: float, step: Step[T], *, read_first: bool = False
    ) -> tuple[T, BreakerState]:
        """Run `step` on the stored state at shared time and store its result atomically;
        return the step's answer and the new state (in shared time)."""
        at = now + self._offset
        name = self._name(key)
        if read_first:  # most admits change nothing: one GET answers them
            raw = await self.redis.get(name)
            before = _decode(raw)
            result, after = step(before, at)
            if raw is not None and after == before:
                return result, after
        async with self.redis.pipeline(transaction=True) as pipe:
            for _ in range(MAX_CONFLICTS):
                try:
                    await pipe.watch(name)
                    raw = await pipe.get(name)
                    before = _decode(raw)
                    result, after = step(before, at)
                    if raw is not None and after == before:
                        return result, after  # leaving the block unwatches
                    pipe.multi()
                    pipe.set(name, _encode(after))
                    if raw is None:
                        pipe.sadd(self._index, key)
                    await pipe.execute()
                except WatchError:
                    continue  # another process wrote this key first: decide again on its state
                if self._on_change is not None and _notable(before, after):
                    self._on_change(key, self._local(before), self._local(after))
                return result, after
        raise _Contention(f"{MAX_CONFLICTS} conflicting writes in a row on {name}")

    # --- falling back to memory ----------------------------------------------------------

    def _backend_down(self) -> bool:
        return self._outage.down

    def _lost(self, exc: Exception, now: float | None) -> None:
        self.fallbacks += 1
        if isinstance(exc, _Contention):
            log.warning("breaker store: %s; this call used the process's memory", exc)
            return
        self._retry_at = None if now is None else now + self._retry_s
        self._outage.lost(exc)

    def _restored(self) -> None:
        if self._outage.restored():
            self._memory = self._new_memory()

    # --- names and time ------------------------------------------------------------------

    def _name(self, key: str) -> str:
        return f"{self._prefix}breaker:{key}"

    def _local(self, state: BreakerState) -> BreakerState:
        return _shifted(state, -self._offset)


class _Contention(RedisError):
    """Too many lost races on one key: answered from memory, without marking Redis down."""


def offset_to_wall(clock: Clock) -> float:
    """Seconds to add to `clock.now()` to get wall-clock time (epoch seconds)."""
    return time.time() - clock.now()


class RedisOutage:
    """Whether a Redis is unreachable, said once when it goes and once when it answers again:
    the stores that share state through Redis sit on the request path and must never log per
    request. `component` names the store, `meanwhile` what it does instead, `back` what holds
    again."""

    def __init__(
        self, redis: Redis, component: str, *, meanwhile: str, back: str, retry_s: float
    ) -> None:
        self.redis, self.component = redis, component
        self.meanwhile, self.back, self.retry_s = meanwhile, back, retry_s
        self.down = False

    def lost(self, exc: Exception) -> None:
        if not self.down:
            self.down = True
            log.warning(
                "%s: Redis at %s unreachable (%s: %s); %s, and Redis is retried every %g s",
                self.component,
                describe_url(self.redis),
                type(exc).__name__,
                exc,
                self.meanwhile,
                self.retry_s,
            )

    def restored(self) -> bool:
        """True when this ends an outage."""
        if not self.down:
            return False
        self.down = False
        log.warning(
            "%s: Redis at %s answers again; %s", self.component, describe_url(self.redis), self.back
        )
        return True


def describe_url(redis: Redis | SyncRedis) -> str:
    """Where a client connects, without its password."""
    kwargs = redis.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def check_reachable(url: str, timeout_s: float = 1.0) -> str | None:
    """None when Redis at `url` answers PING, else why not (one line, no password)."""
    client = SyncRedis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except (RedisError, OSError) as exc:
        return f"Redis at {describe_url(client)} unreachable ({type(exc).__name__}: {exc})"
    finally:
        client.close()
    return None


# --- the stored form -------------------------------------------------------------------------


def _encode(state: BreakerState) -> str:
    return json.dumps({"v": _FORMAT, **asdict(state)}, separators=(",", ":"))


def _decode(raw: bytes | str | None) -> BreakerState:
    if raw is None:
        return BreakerState()
    try:
        data = json.loads(raw)
        data.pop("v", None)
        data["recent"] = tuple((float(s), int(f), int(t)) for s, f, t in data.get("recent", ()))
        return BreakerState(**data)
    except (ValueError, TypeError, AttributeError) as exc:
        # Not ours, or another version's: a closed breaker (rewritten on the next change) is
        # better than failing every request to the target.
        log.warning("breaker store: unreadable state %.80r (%s); taken as closed", raw, exc)
        return BreakerState()


def _shifted(state: BreakerState, by: float) -> BreakerState:
    if by == 0:
        return state

    def move(t: float | None) -> float | None:
        return None if t is None else t + by

    return replace(
        state,
        recent=tuple((start + by, f, n) for start, f, n in state.recent),
        open_until=move(state.open_until),
        probe_until=move(state.probe_until),
        cooling_until=move(state.cooling_until),
        opened_at=move(state.opened_at),
    )
