"""The breakers as the gateway holds them now, for the Live page: the gateway's own `/v1/status`,
else the shared store it keeps them in (Redis when the configuration names one, else the data
folder's SQLite file), each state told by the very function the gateway uses
(engine.state.breaker.describe).

Never a recomputation from the published breaker events: those reach the dashboard a flush, a
scheduler cycle and a cache later, so a half-open spell (one probe long) is routinely seen
without the reopening that followed it; and each event is one process's change of a state all
the workers share. The events stay the page's last resort, labelled with their age
(dashboard.views.live).

Reads only: never admits, records, prepares or empties a store, so looking never moves a
breaker. No Streamlit here: dashboard.data caches `read`.

Where the gateway is: `SWITCHOVER_GATEWAY_URL`, else http://127.0.0.1:8787 (the port
`switchover serve` and `switchover up` listen on by default); with gateway keys set
(`SWITCHOVER_GATEWAY_KEYS`, which `up` hands every process it starts), the first one is
presented. A gateway that records into another data folder than the dashboard's is someone
else's: its breakers are not shown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from engine.core.clock import SystemClock
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.state.breaker import BreakerState, describe
from engine.state.breaker_sqlite import read_states

GATEWAY_URL_ENV = "SWITCHOVER_GATEWAY_URL"
DEFAULT_GATEWAY_URL = "http://127.0.0.1:8787"
KEYS_ENV = "SWITCHOVER_GATEWAY_KEYS"  # engine.gateway.server: the keys the gateway wants
# A gateway that does not answer this fast is not waited for: the page falls back at once.
TIMEOUT_S = 0.5
COLUMNS = ["target", "status", "reason", "open_remaining_s", "probe_due", "probing",
           "opened_s_ago"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class LiveBreakers:
    """Every target's breaker as one source told it at `taken_at`, or no source (`source` "")
    and the reasons none answered."""

    source: str  # "gateway", "redis", "sqlite"; "" when none could be read
    where: str  # the gateway's URL, Redis's host (never its password), or the file
    taken_at: datetime  # UTC: every figure of `breakers` is as of this time
    shared: bool  # every gateway worker sees these; False: one worker's own memory
    breakers: pd.DataFrame  # COLUMNS, one row a target
    problems: tuple[str, ...] = ()  # why the sources tried before this one were not used


def gateway_url(environ: Mapping[str, str]) -> str:
    return (environ.get(GATEWAY_URL_ENV) or DEFAULT_GATEWAY_URL).rstrip("/")


def read(paths: DataPaths, redis_url: str | None, environ: Mapping[str, str]) -> LiveBreakers:
    """The gateway's `/v1/status`; else Redis (when `redis_url`: the configuration's
    `[state] redis_url`) or the data folder's SQLite file; else no source, saying why."""
    problems: list[str] = []
    url = gateway_url(environ)
    try:
        return from_gateway(url, _key(environ), paths)
    except _Unusable as exc:
        problems.append(f"the gateway at {url} {exc}")
    try:
        if redis_url is not None:
            return from_redis(redis_url, problems)
        return from_sqlite(paths.breaker_states, problems)
    except _Unusable as exc:
        problems.append(str(exc))
    empty = pd.DataFrame(columns=COLUMNS)
    return LiveBreakers("", "", datetime.now(UTC), False, empty, tuple(problems))


def from_gateway(url: str, key: str | None, paths: DataPaths) -> LiveBreakers:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    try:
        answer = httpx.get(f"{url}/v1/status", headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise _Unusable(f"did not answer ({type(exc).__name__})") from None
    taken_at = datetime.now(UTC)
    if answer.status_code != 200:
        raise _Unusable(f"answered {answer.status_code}")
    try:
        status = answer.json()
        breakers = status["breakers"]
    except (ValueError, KeyError, TypeError):
        raise _Unusable("answered no status document") from None
    elsewhere = _records_elsewhere(status, paths)
    if elsewhere is not None:
        raise _Unusable(f"records to {elsewhere}, not this dashboard's data folder")
    rows = [_row(target, b) for target, b in sorted(breakers.items())]
    shared = bool(status.get("breakers_shared", True))
    return LiveBreakers("gateway", url, taken_at, shared, _frame(rows))


def from_redis(url: str, problems: list[str]) -> LiveBreakers:
    """The states every gateway worker of every host shares, read as `snapshot_all` reads them
    (two reads: the index and the states); their times mapped to this process's clock."""
    from engine.state.breaker_redis import RedisBreakerStore, describe_url

    clock = SystemClock()
    store = RedisBreakerStore.from_url(url, clock=clock)

    async def snapshot() -> dict[str, BreakerState]:
        try:
            return await store.snapshot_all()
        finally:
            await store.aclose()

    where = describe_url(store.redis)
    states = asyncio.run(snapshot())
    if not store.shared:  # unreachable: the store answered from its empty memory
        raise _Unusable(f"the breaker store in Redis ({where}) did not answer")
    return _from_states("redis", where, states, clock.now(), problems)


def from_sqlite(path: Path, problems: list[str]) -> LiveBreakers:
    """The states the workers of this host share in the data folder's file; their times are
    this host's monotonic clock, so the dashboard beside them reads them as they do."""
    states = read_states(path)
    if states is None:
        raise _Unusable(f"no breaker store of this boot at {path}")
    return _from_states("sqlite", str(path), states, time.monotonic(), problems)


def _from_states(
    source: str, where: str, states: dict[str, BreakerState], now: float, problems: list[str]
) -> LiveBreakers:
    taken_at = datetime.now(UTC)
    rows = [_row(target, describe(state, now)) for target, state in sorted(states.items())]
    return LiveBreakers(source, where, taken_at, True, _frame(rows), tuple(problems))


def _row(target: str, told: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "target": target,
        "status": told.get("status", "closed"),
        "reason": told.get("open_reason"),
        "open_remaining_s": told.get("open_remaining_s"),
        "probe_due": bool(told.get("probe_due")),
        "probing": told.get("probing"),  # None: a gateway too old to say
        "opened_s_ago": told.get("opened_s_ago"),
    }


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS).astype({"probing": object})


def _records_elsewhere(status: Mapping[str, Any], paths: DataPaths) -> str | None:
    """The spool folder the gateway records to when it is not this data folder's; None when it
    is, or when it cannot be told (no recorder, PostgreSQL)."""
    destination = (status.get("telemetry") or {}).get("destination")
    if not isinstance(destination, str) or destination == "postgresql":
        return None
    same = Path(destination).resolve() == paths.spool.resolve()
    return None if same else destination


def _key(environ: Mapping[str, str]) -> str | None:
    """The first key of SWITCHOVER_GATEWAY_KEYS, as the gateway reads that variable."""
    from engine.gateway.server import key_labels

    try:
        return next(iter(key_labels(environ)), None)
    except ConfigError:
        return None


class _Unusable(Exception):
    """A source that could not be read; its text says why, for the page."""
