"""[policy], and the same keys on a route: the fallback policy's numbers (engine.fallback.policy
says what each means and which values it takes). A route's keys override the [policy] defaults,
which override Policy's own.
"""

from __future__ import annotations

import math
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of
from engine.fallback.policy import POLICY_KEYS, Policy


def parse_policy(table: Any, base: Policy, where: str, fail: Fail) -> Policy:
    table = table_of(table, where, fail)
    no_unknown(table, sorted(POLICY_KEYS), where, fail)
    for key, value in table.items():
        if key == "first_token_timeout_s" and value == "learned":
            raise fail(f"{where}.{key}", '"learned" is set per route, on [routes.NAME]')
        expected = type(getattr(base, key))
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if expected is int:
            ok = ok and isinstance(value, int)
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            kind = "an integer" if expected is int else "a number"
            raise fail(f"{where}.{key}", f"must be {kind} (got {value!r})")
    try:
        return base.replace(**table)
    except ValueError as exc:
        raise fail(where, str(exc)) from None
