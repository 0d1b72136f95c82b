"""[state]: where gateway processes share what they must agree on (breakers in Redis, attempts
in PostgreSQL across hosts); absent, each process keeps its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of

_STATE_KEYS = ("redis_url", "postgres_url")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class StateConfig:
    """[state]: what gateway processes share: breaker state (Redis) and, across hosts, attempts
    (PostgreSQL); None: each keeps its own."""

    redis_url: str | None = None
    # The shared attempt sink of gateways on several hosts, pulled by the scheduler; None: the
    # spool folder. A libpq URL; its password may come from PGPASSWORD or ~/.pgpass instead.
    postgres_url: str | None = None


def parse_state(table: Any, fail: Fail) -> StateConfig:
    table = table_of(table, "state", fail)
    no_unknown(table, _STATE_KEYS, "state", fail)
    url = table.get("redis_url")
    if url is not None and (not isinstance(url, str) or not url.startswith(_REDIS_SCHEMES)):
        raise fail("state.redis_url", "must be a redis://, rediss:// or unix:// URL")
    postgres = table.get("postgres_url")
    if postgres is not None and (
        not isinstance(postgres, str) or not postgres.startswith(_POSTGRES_SCHEMES)
    ):
        raise fail("state.postgres_url", "must be a postgresql:// or postgres:// URL")
    return StateConfig(url, postgres)
