"""Keeps a gateway's learned first-token limits (engine.fallback.learned_limits) as fresh as the
published target latency: read at start, then every REFRESH_S, off the event loop. A read that
fails keeps the limits it had (the scheduler may be rewriting the snapshot): the request path
never waits on it, and a limit never goes above a route's static one whatever is read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from engine.published.learned_timeouts import REFRESH_S, read_learned
from engine.published.read import PublishedData
from engine.runtime.switchover import Switchover

log = logging.getLogger("switchover.gateway")


@contextlib.asynccontextmanager
async def learning(sw: Switchover) -> AsyncIterator[None]:
    """While the gateway runs: its learned limits refreshed, when a route learns them and the
    gateway records to a data folder (where the scheduler publishes)."""
    limits, paths = sw.first_token_limits, sw.paths
    if limits is None or paths is None:
        yield
        return
    published = PublishedData(paths.published)

    async def refresh() -> None:
        while True:
            try:
                learned = await asyncio.to_thread(read_learned, published, sw.clock.wall())
            except Exception as exc:  # never the gateway's failure; the old limits stay
                log.warning("cannot read the learned first-token limits: %s", exc)
            else:
                if learned:  # none: nothing published yet, or it is being rewritten
                    limits.replace(learned)
            await asyncio.sleep(REFRESH_S)

    task = asyncio.create_task(refresh(), name="learned-first-token-limits")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        published.close()
