"""[gateway]: what a caller may name, and how long and how many connections the gateway keeps
waiting on callers (docs/deployment.md, "Limits and timeouts"; engine.gateway.server applies
them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of

_GATEWAY_KEYS = (
    "allow_direct_targets",
    "max_direct_models",
    "header_timeout_s",
    "body_timeout_s",
    "keep_alive_timeout_s",
    "max_connections",
)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """[gateway]: what a caller may name, and how long and how many connections the gateway
    keeps waiting on callers (docs/deployment.md, "Limits and timeouts")."""

    # False: only routes and the targets they list exist; `provider/model` of anything else is
    # a 404. True: any model of a configured provider, under the one route label "direct".
    allow_direct_targets: bool = False
    max_direct_models: int = 16  # distinct unconfigured models served, then a 404
    header_timeout_s: float = 10.0  # a request's whole head must arrive within this
    body_timeout_s: float = 60.0  # its whole body, once the head is in
    keep_alive_timeout_s: float = 5.0  # an idle keep-alive connection is closed after this
    # Connections one worker keeps open at once; None: from the descriptor limit at start.
    max_connections: int | None = None


def parse_gateway(table: Any, fail: Fail) -> GatewayConfig:
    table = table_of(table, "gateway", fail)
    no_unknown(table, _GATEWAY_KEYS, "gateway", fail)
    defaults = GatewayConfig()
    allow = table.get("allow_direct_targets", defaults.allow_direct_targets)
    if not isinstance(allow, bool):
        raise fail("gateway.allow_direct_targets", "must be true or false")

    def count(key: str, default: int | None, low: int, high: int) -> int | None:
        value = table.get(key, default)
        if value is None and default is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise fail(f"gateway.{key}", f"must be a whole number from {low} to {high}")
        return value

    def seconds(key: str, default: float) -> float:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
            raise fail(f"gateway.{key}", "must be a number of seconds in (0, 3600]")
        return float(value)

    return GatewayConfig(
        allow_direct_targets=allow,
        max_direct_models=count("max_direct_models", defaults.max_direct_models, 1, 1000) or 1,
        header_timeout_s=seconds("header_timeout_s", defaults.header_timeout_s),
        body_timeout_s=seconds("body_timeout_s", defaults.body_timeout_s),
        keep_alive_timeout_s=seconds("keep_alive_timeout_s", defaults.keep_alive_timeout_s),
        max_connections=count("max_connections", None, 16, 1_000_000),
    )
