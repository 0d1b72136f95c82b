"""A scenario written back as TOML (`to_toml`).

The inverse of `parse_scenario`: reading the text gives a scenario equal to the one written
(tests/simulations/test_scenario_toml.py), so a scenario built from the store can be saved
into the library and edited by hand. Only what differs from a default is written, in the
order a person writes a scenario: what it is, the chain, the traffic, the latency, the faults,
the limits. `chain_tables` is the chain part alone (switchover.toml's providers, prompts,
routes, policy and prices), which `simulations.whatif.from_store` also uses to take the chain of a
configuration without the way to reach its providers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from engine.behaviours.pii import PII_KINDS
from engine.behaviours.prompts import TargetPrompt
from engine.config import DEFAULT_BASE_URLS as _BASE_URLS
from engine.config import Config, ProviderConfig, RouteConfig, TargetConfig
from engine.core.errors import ConfigError
from engine.core.pricing import PriceOverride
from engine.fallback.policy import Policy
from simulations.whatif.scenario import Fault, Latency, Limits, Scenario
from simulations.whatif.scenario_traffic import RouteTraffic

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_WIDTH = 100  # long arrays (a fortnight of minutes) are wrapped at this width
_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
_DEFAULT_PROVIDER = ProviderConfig("", "anthropic", "")
_REACH = ("base_url", "api_key_env", "headers", "connect_timeout_s")  # how to call it, not what


def to_toml(scenario: Scenario) -> str:
    """`scenario` as TOML that `parse_scenario(tomllib.loads(...))` reads back equal to it: a
    scenario built from the store, saved into the library."""
    top = {
        "name": scenario.name,
        "description": scenario.description,
        "duration": duration(scenario.duration_s),
        "start": scenario.start,
        "seed": scenario.seed,
        "backups": list(scenario.backups),
    }
    if scenario.traffic_scale != 1:
        top["traffic_scale"] = scenario.traffic_scale
    tables: dict[str, Any] = {
        **chain_tables(scenario.config),
        "traffic": {
            "rate_per_s": scenario.rate_per_s,
            "daily_curve": scenario.daily_curve,
            "routes": {name: _route_traffic(t) for name, t in scenario.routes.items()},
        },
        "latency": {
            "median_ms": scenario.median_ms,
            "p99_ms": scenario.p99_ms,
            **{target: _latency(t) for target, t in scenario.target_latency.items()},
        },
        "faults": [_fault(f) for f in scenario.faults],
        "limits": {target: _limits(lim) for target, lim in scenario.limits.items()},
        **_recorded(scenario),
    }
    return dumps({**top, **{k: v for k, v in tables.items() if v}})


def _recorded(scenario: Scenario) -> dict[str, Any]:
    """A replay's record, and the faults its "as recorded" run replays where they are not the
    scenario's: a saved replay is still calibrated when it runs again."""
    r = scenario.recorded
    if r is None:
        return {}
    table = {
        "requests": r.requests, "failed": r.failed,
        "answered_by_fallback": r.answered_by_fallback,
        "cost_usd": str(r.cost_usd),
        **({} if r.cache_loss_usd is None else {"cache_loss_usd": str(r.cache_loss_usd)}),
        "replays": "faults" if scenario.recorded_faults is None else "recorded_faults",
    }  # fmt: skip
    faults = [_fault(f) for f in scenario.recorded_faults or ()]
    return {"recorded": table, "recorded_faults": faults}


def chain_tables(config: Config, *, reach: bool = True) -> dict[str, Any]:
    """`config`'s providers, prompts, routes, policy and prices as switchover.toml tables.
    `reach=False` leaves out how a provider is called (URL, key variable, headers, connect
    timeout): a simulation calls nobody, and a saved scenario then names no endpoint."""
    tables = {
        "providers": {name: _provider(p, reach) for name, p in config.providers.items()},
        "prompts": {name: _prompt(p) for name, p in config.prompts.items()},
        "routes": {name: _route(r, config.policy) for name, r in config.routes.items()},
        "policy": _changed(config.policy, Policy()),
        "prices": {name: _price(p) for name, p in config.prices.items()},
    }
    return {key: value for key, value in tables.items() if value}


def _prompt(prompt: TargetPrompt) -> dict[str, Any]:
    if prompt.system is not None:
        return {"version": prompt.version, "system": prompt.system}
    return {"version": prompt.version, "template": prompt.template}


def _provider(provider: ProviderConfig, reach: bool) -> dict[str, Any]:
    table: dict[str, Any] = {"kind": provider.kind}
    defaults = dataclasses.replace(_DEFAULT_PROVIDER, base_url=_BASE_URLS[provider.kind])
    for f in dataclasses.fields(ProviderConfig):
        if f.name in ("name", "kind") or (not reach and f.name in _REACH):
            continue
        value = getattr(provider, f.name)
        if value != getattr(defaults, f.name):
            table[f.name] = dict(value) if isinstance(value, Mapping) else value
    return table


def _route(route: RouteConfig, defaults: Policy) -> dict[str, Any]:
    options = route.options
    table: dict[str, Any] = {"targets": [_target(t) for t in route.targets]}
    table.update(_changed(route.policy, defaults))
    table.update({k: True for k in ("adaptive_order", "own_keys_first") if getattr(options, k)})
    if options.pii is not None:
        every = options.pii.kinds == frozenset(PII_KINDS)
        table["pii"] = True if every else sorted(options.pii.kinds)
        if options.pii.restore:
            table["pii_restore"] = True
    if options.contract is not None:
        table["output_schema"] = _toml_value(options.contract.schema, "output_schema")
    if options.on_quality_error != "record":
        table["on_quality_error"] = options.on_quality_error
    if options.on_stream_failure != "error":
        table["on_stream_failure"] = options.on_stream_failure
    return table


def _target(target: TargetConfig) -> str | dict[str, Any]:
    if target.prompt is None and target.context_window is None:
        return target.name
    table: dict[str, Any] = {"target": target.name}
    if target.prompt is not None:
        table["prompt"] = target.prompt.name
    if target.context_window is not None:
        table["context_window"] = target.context_window
    return table


def _changed(policy: Policy, base: Policy) -> dict[str, Any]:
    return {
        f.name: getattr(policy, f.name)
        for f in dataclasses.fields(Policy)
        if getattr(policy, f.name) != getattr(base, f.name)
    }


def _price(price: PriceOverride) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for key in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"):
        value = getattr(price, key)
        if value is not None:
            # A float where it reads back as the same Decimal (config reads floats by repr).
            table[key] = float(value) if Decimal(repr(float(value))) == value else str(value)
    table["source"] = price.source
    return table


def _route_traffic(traffic: RouteTraffic) -> dict[str, Any]:
    table: dict[str, Any] = {"share": traffic.share} if traffic.share else {}
    table.update(input_tokens=traffic.input_tokens, output_tokens=traffic.output_tokens)
    if traffic.cached_share:
        table["cached_share"] = traffic.cached_share
    if traffic.per_minute:
        table["per_minute"] = [int(n) if n.is_integer() else n for n in traffic.per_minute]
    for key in ("input_quantiles", "output_quantiles"):
        if getattr(traffic, key):
            table[key] = list(getattr(traffic, key))
    return table


def _latency(latency: Latency) -> dict[str, Any]:
    table = {"median_ms": latency.median_ms, "p99_ms": latency.p99_ms}
    return table if latency.ttft_ms is None else {**table, "ttft_ms": latency.ttft_ms}


def _fault(fault: Fault) -> dict[str, Any]:
    table: dict[str, Any] = {
        "target": fault.target,
        "kind": fault.kind,
        "start": duration(fault.start_s),
        "end": duration(fault.end_s),
    }
    if fault.rate != 1:
        table["rate"] = fault.rate
    for key in ("retry_after_s", "median_ms", "p99_ms"):
        if getattr(fault, key) is not None:
            table[key] = getattr(fault, key)
    if fault.period_s:
        table["flapping"] = {"period": duration(fault.period_s), "down": duration(fault.down_s)}
    return table


def _limits(limits: Limits) -> dict[str, Any]:
    return {
        f.name: getattr(limits, f.name)
        for f in dataclasses.fields(Limits)
        if getattr(limits, f.name) is not None
    }


def duration(seconds: float | None) -> str | float:
    """ "2h", "90m", "45s" when whole in a unit (as people write them), else the seconds."""
    seconds = seconds or 0.0
    for unit, size in _UNITS:
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return seconds


def _toml_value(value: Any, where: str) -> Any:
    """A JSON value as TOML can hold it; TOML has no null, so a schema with one cannot be
    written (and is refused, not changed)."""
    if value is None:
        raise ConfigError(f"{where}: a JSON null cannot be written as TOML")
    if isinstance(value, Mapping):
        return {k: _toml_value(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_toml_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


# --- TOML -------------------------------------------------------------------------------


def dumps(data: Mapping[str, Any]) -> str:
    """TOML for `data`: scalars first, then a [table] for every mapping (dotted for nested
    ones); a top-level list of mappings as [[name]] tables, any other as inline tables."""
    lines: list[str] = []
    _table(lines, (), data)
    return "\n".join(lines).strip() + "\n"


def _table(lines: list[str], path: tuple[str, ...], data: Mapping[str, Any]) -> None:
    lists = {k for k, v in data.items() if not path and _is_table_list(v)}  # [[faults]]
    scalars = {k: v for k, v in data.items() if not isinstance(v, Mapping) and k not in lists}
    if path and (scalars or not data):
        lines.extend(["", f"[{'.'.join(_key(p) for p in path)}]"])
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    for key, value in data.items():
        if isinstance(value, Mapping):
            _table(lines, (*path, key), value)
        elif key in lists:
            for item in value:
                lines.extend(["", f"[[{'.'.join(_key(p) for p in (*path, key))}]]"])
                lines.extend(f"{_key(k)} = {_value(v)}" for k, v in item.items())


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{value} cannot be written in a scenario")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return _array([_value(v) for v in value])
    raise ConfigError(f"{type(value).__name__} {value!r} cannot be written as TOML")


def _array(items: list[str]) -> str:
    flat = "[" + ", ".join(items) + "]"
    if len(flat) <= _WIDTH:
        return flat
    rows, row = [], ""
    for item in items:
        if row and len(row) + len(item) + 2 > _WIDTH - 4:
            rows.append(row)
            row = ""
        row += ("" if not row else " ") + item + ","
    rows.append(row)
    return "[\n" + "\n".join(f"    {r}" for r in rows) + "\n]"


def _string(text: str) -> str:
    """A basic TOML string, multi-line where the text has lines (a description). JSON's
    escapes are TOML's; JSON leaves DEL and the C1 controls as they are, TOML escapes them."""

    def escaped(line: str) -> str:
        body = json.dumps(line, ensure_ascii=False)[1:-1]
        return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", body)

    if "\n" not in text:
        return f'"{escaped(text)}"'
    return '"""\n' + "\n".join(escaped(line) for line in text.split("\n")) + '"""'
