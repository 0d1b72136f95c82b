"""Health scores shared by every worker and host that names the same Redis (`[state] redis_url`):
what a score is and counts, and the memory this falls back to, are engine.state.health_scores.
Nothing here may fail a request: when Redis is unreachable the scores come from this process's
memory, with one warning per outage.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.core.attempt import Attempt
from engine.core.clock import Clock
from engine.state.breaker import WINDOW_BUCKETS
from engine.state.breaker_redis import DEFAULT_PREFIX, RETRY_S, SOCKET_TIMEOUT_S, RedisOutage
from engine.state.health_scores import MemoryHealthScores, bucket_of, rate, verdict

log = logging.getLogger("switchover.ordering")


class RedisHealthScores:
    """Scores from every process that names the same Redis.

    Per target and bucket, one hash `<prefix>health:<target>:<bucket>` holds the fields `s`
    (successes) and `f` (failures), HINCRBY'd and expiring a bucket after the window. Buckets
    are numbered in wall-clock time (`clock.wall()`), so that every host agrees on them (hosts
    keep their clocks in step, as for the breakers). A read sums the window's buckets in one
    pipelined round trip and is cached `cache_s`, which bounds the Redis load at one read per
    route a second and process, not one per request.

    Every attempt is also counted in a local `MemoryHealthScores`, which answers while Redis is
    unreachable (Redis is tried again every `retry_s`). Increments that could not be written
    are dropped, not kept for later: the memory has them for this process, and a hook must
    never build up a queue through an outage.
    """

    def __init__(
        self,
        redis: Redis,
        clock: Clock,
        window_s: float = 300.0,
        *,
        cache_s: float = 1.0,
        prefix: str = DEFAULT_PREFIX,
        retry_s: float = RETRY_S,
    ) -> None:
        self.redis = redis
        self.clock = clock
        self.window_s = window_s
        self.memory = MemoryHealthScores(clock, window_s)
        self._width = window_s / WINDOW_BUCKETS
        # Slightly longer than a bucket is read, so a read never misses one that expired.
        self._ttl_s = math.ceil(window_s + 2 * self._width)
        self._cache_s = cache_s
        self._cache: dict[tuple[str, ...], tuple[float, dict[str, float]]] = {}
        self._prefix = prefix
        self._retry_s = retry_s
        # (target, bucket) -> [successes, failures] not yet written: coalesced, so a burst of
        # attempts costs one HINCRBY per target and field, and the queue stays small.
        self._pending: dict[tuple[str, int], list[int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._outage = RedisOutage(
            redis,
            "health scores",
            meanwhile="target order follows this process's own attempts",
            back="scores are shared",
            retry_s=retry_s,
        )
        self._retry_at = 0.0  # clock.now() after which an unreachable Redis is tried again
        self.fallbacks = 0  # score reads answered from memory because Redis was unreachable
        self._warned = False

    @classmethod
    def from_url(
        cls, url: str, clock: Clock, window_s: float = 300.0, **options: Any
    ) -> RedisHealthScores:
        """Scores in the Redis at `url` (redis://, rediss://, unix://)."""
        redis = Redis.from_url(
            url, socket_connect_timeout=SOCKET_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S
        )
        return cls(redis, clock, window_s, **options)

    @property
    def shared(self) -> bool:
        """False while Redis is unreachable and this process's memory answers."""
        return not self._outage.down

    def observe(self, attempt: Attempt) -> None:
        self.memory.observe(attempt)
        try:
            ok = verdict(attempt)
            if ok is None or not self._redis_due():
                return
            bucket = bucket_of(self.clock.wall().timestamp(), self._width)
            counts = self._pending.setdefault((attempt.target, bucket), [0, 0])
            counts[0 if ok else 1] += 1
            if self._task is None or self._task.done():
                loop = _running_loop()
                self._task = loop.create_task(self._drain()) if loop is not None else None
        except Exception:
            if not self._warned:  # once: an attempt hook runs on every request
                self._warned = True
                log.exception("health scores: could not queue an attempt for Redis")

    async def scores(self, targets: Sequence[str]) -> dict[str, float]:
        if not self._redis_due():
            self.fallbacks += 1
            return await self.memory.scores(targets)
        key = tuple(targets)
        cached = self._cache.get(key)
        if cached is not None and self.clock.now() - cached[0] < self._cache_s:
            return dict(cached[1])
        try:
            result = await self._read(key)
        except (RedisError, OSError) as exc:
            self._lost(exc)
            self.fallbacks += 1
            return await self.memory.scores(targets)
        self._restored()
        self._cache[key] = (self.clock.now(), result)
        return dict(result)

    async def flush(self) -> None:
        """Write every queued increment now (at shutdown, and in tests)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task])
        await self._drain()

    async def aclose(self) -> None:
        await self.flush()
        await self.redis.aclose()

    # --- Redis ---------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Write the queue until it is empty. Runs as a task: it must never raise."""
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for (target, bucket), (successes, failures) in batch.items():
                        name = self._name(target, bucket)
                        if successes:
                            pipe.hincrby(name, "s", successes)
                        if failures:
                            pipe.hincrby(name, "f", failures)
                        pipe.expire(name, self._ttl_s)
                    await pipe.execute()
            except (RedisError, OSError) as exc:
                self._lost(exc)
                self._pending.clear()  # written nowhere; this process's memory has them
                return
            except Exception:
                log.exception("health scores: writing to Redis failed; increments dropped")
                return
            self._restored()

    async def _read(self, targets: tuple[str, ...]) -> dict[str, float]:
        current = bucket_of(self.clock.wall().timestamp(), self._width)
        buckets = range(current - WINDOW_BUCKETS + 1, current + 1)
        async with self.redis.pipeline(transaction=False) as pipe:
            for target in targets:
                for bucket in buckets:
                    pipe.hmget(self._name(target, bucket), "s", "f")
            rows = await pipe.execute()
        result: dict[str, float] = {}
        for i, target in enumerate(targets):
            mine = rows[i * len(buckets) : (i + 1) * len(buckets)]
            successes = sum(int(s or 0) for s, _ in mine)
            failures = sum(int(f or 0) for _, f in mine)
            result[target] = rate(successes, failures)
        return result

    def _name(self, target: str, bucket: int) -> str:
        return f"{self._prefix}health:{target}:{bucket}"

    # --- falling back to memory ----------------------------------------------------------

    def _redis_due(self) -> bool:
        """Whether to use Redis: it is up, or down long enough to be tried again."""
        return not self._outage.down or self.clock.now() >= self._retry_at

    def _lost(self, exc: Exception) -> None:
        self._retry_at = self.clock.now() + self._retry_s
        self._cache.clear()  # a stale shared read must not outlive the outage's first second
        self._outage.lost(exc)

    def _restored(self) -> None:
        self._outage.restored()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop; None outside one, where increments wait for the next observe or flush."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
