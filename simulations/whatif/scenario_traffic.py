"""A scenario's traffic per route and its targets' latency: the values and their checks.

Split from `simulations.whatif.scenario`, which reads the rest of a scenario and calls these; the
same rule holds: a mistake fails with one line naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

_ROUTE_KEYS = ("share", "input_tokens", "output_tokens", "cached_share", "per_minute",
               "input_quantiles", "output_quantiles")  # fmt: skip
_LATENCY_KEYS = ("median_ms", "p99_ms", "ttft_ms")


@dataclass(frozen=True, slots=True)
class RouteTraffic:
    share: float
    input_tokens: int  # mean prompt size
    output_tokens: int  # mean answer size
    cached_share: float = 0.0
    # Recorded traffic (a scenario built from the store): requests in each minute from the
    # scenario's start, replacing rate × share × curve; sizes drawn from these quantiles
    # (evenly spaced, first the minimum, last the maximum) instead of around the means.
    per_minute: tuple[float, ...] = ()
    input_quantiles: tuple[int, ...] = ()
    output_quantiles: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Latency:
    """A healthy target's time to the whole answer (a lognormal through median and p99)."""

    median_ms: float
    p99_ms: float
    ttft_ms: float | None = None  # time to the first token, where measured


def parse_routes_traffic(
    traffic: Mapping[str, Any], configured: Mapping[str, Any], duration: float, fail: Any
) -> dict[str, RouteTraffic]:
    routes = {
        name: _route_traffic(name, raw, duration, fail)
        for name, raw in table_of(traffic.get("routes", {}), "traffic.routes", fail).items()
    }
    for name in routes:
        if name not in configured:
            raise fail(f"traffic.routes.{name}", "is not a route of [routes]")
    if not routes:
        raise fail("traffic.routes", "give at least one route's share of the traffic")
    return routes


def _route_traffic(name: str, raw: Any, duration: float, fail: Any) -> RouteTraffic:
    """A route's traffic: a share of the rate, or its requests minute by minute (`per_minute`);
    sizes around a mean, or drawn from quantiles (then the mean is theirs unless given)."""
    where = f"traffic.routes.{name}"
    raw = table_of(raw, where, fail)
    for key in raw:
        if key not in _ROUTE_KEYS:
            raise fail(f"{where}.{key}", f"unknown key (allowed: {', '.join(_ROUTE_KEYS)})")
    per_minute = _schedule(raw.get("per_minute"), duration, f"{where}.per_minute", fail)
    share = raw.get("share", 0.0 if per_minute else None)
    if not (positive(share) or (per_minute and share == 0)):
        raise fail(f"{where}.share", "must be a positive number")
    sizes = {}
    for kind in ("input", "output"):
        quantiles = _quantiles(raw.get(f"{kind}_quantiles"), f"{where}.{kind}_quantiles", fail)
        mean = raw.get(f"{kind}_tokens", quantile_mean(quantiles) if quantiles else None)
        if not positive(mean):
            raise fail(f"{where}.{kind}_tokens", "must be a positive number")
        sizes[kind] = (int(mean), quantiles)
    cached = raw.get("cached_share", 0.0)
    if not isinstance(cached, int | float) or not 0 <= cached <= 1:
        raise fail(f"{where}.cached_share", "must be between 0 and 1")
    return RouteTraffic(
        float(share),
        sizes["input"][0],
        sizes["output"][0],
        float(cached),
        per_minute,
        sizes["input"][1],
        sizes["output"][1],
    )


def _schedule(value: Any, duration: float, where: str, fail: Any) -> tuple[float, ...]:
    """Requests in each minute from the start; a schedule shorter than the scenario repeats
    (a recorded day fills a week), a longer one is a mistake."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(is_count(v) for v in value):
        raise fail(where, "must be a list of request counts per minute (numbers ≥ 0)")
    if len(value) > math.ceil(duration / 60):
        raise fail(where, f"has {len(value)} minutes; the scenario lasts {duration / 60:g}")
    return tuple(float(v) for v in value)


def _quantiles(value: Any, where: str, fail: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    ok = isinstance(value, list) and len(value) >= 2
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    if not ok or any(b < a for a, b in pairwise(value)):
        raise fail(where, "must be at least two token counts, ascending: min, …, max")
    return tuple(value)


def quantile_mean(quantiles: Sequence[float]) -> float:
    """The mean of the sizes drawn from evenly spaced quantiles (linear between them)."""
    pairs = pairwise(quantiles)
    return max(1.0, sum(a + b for a, b in pairs) / 2 / (len(quantiles) - 1))


def parse_latency(value: Any, fail: Any) -> tuple[Latency, dict[str, Latency]]:
    """`[latency]` for every target, and `[latency."provider/model"]` where measured."""
    table = table_of(value, "latency", fail)
    targets = {}
    for key, raw in table.items():
        if isinstance(raw, Mapping):
            if "/" not in key:
                raise fail(f"latency.{key}", 'name a target as "provider/model"')
            targets[key] = _one_latency(raw, f'latency."{key}"', fail)
        elif key not in _LATENCY_KEYS[:2]:
            raise fail(f"latency.{key}", "unknown key (median_ms, p99_ms, or a target's table)")
    shared = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    return _one_latency({"median_ms": 600, "p99_ms": 4000, **shared}, "latency", fail), targets


def _one_latency(raw: Mapping[str, Any], where: str, fail: Any) -> Latency:
    for key in raw:
        if key not in _LATENCY_KEYS:
            raise fail(f"{where}.{key}", f"unknown key (allowed: {', '.join(_LATENCY_KEYS)})")
    for key in ("median_ms", "p99_ms"):
        if not positive(raw.get(key)):
            raise fail(f"{where}.{key}", "must be a positive number of milliseconds")
    ttft = raw.get("ttft_ms")
    if ttft is not None and not positive(ttft):
        raise fail(f"{where}.ttft_ms", "must be a positive number of milliseconds")
    return Latency(
        float(raw["median_ms"]), float(raw["p99_ms"]), None if ttft is None else float(ttft)
    )


def table_of(value: Any, where: str, fail: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, "must be a table")
    return value


def positive(value: Any) -> bool:
    return is_count(value) and value > 0


def is_count(value: Any) -> bool:
    """A finite number ≥ 0 (TOML has inf and nan)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
