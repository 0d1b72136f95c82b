"""switchover.toml → validated, frozen configuration objects: one module per section.

    providers.py   [providers.NAME]       prompts.py   [prompts.NAME]
    routes.py      [routes.NAME]          policy.py    [policy] (and a route's overrides)
    prices.py      [prices."..."]         alerting.py  [[alerts]] and [alerting]
    reports.py     [reports]              state.py     [state]
    gateway.py     [gateway]              store.py     [store]
    checks.py      what every section shares: the file, tables, keys and names

A bad file fails at start with one line naming the key and what is wrong
(`switchover.toml: routes.support.targets[2]: provider "gtp" is not defined in [providers]`).
API keys are never read from the file: a provider names the environment variable that holds
its key (`api_key_env`), and the key is read only when the provider is built.

The configuration sits below the runtime, the store and the alerts that read it; it imports only
the fallback policy, the behaviours and the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.behaviours.prompts import TargetPrompt
from engine.config.alerting import AlertingConfig, parse_alerting
from engine.config.budget_rules import with_budget_rules
from engine.config.budgets import Budget, parse_budgets
from engine.config.checks import read_toml, valid_model, valid_name
from engine.config.gateway import GatewayConfig, parse_gateway
from engine.config.policy import parse_policy
from engine.config.prices import parse_prices
from engine.config.prompts import parse_prompts
from engine.config.providers import DEFAULT_BASE_URLS, ProviderConfig, parse_providers
from engine.config.reports import ReportsConfig, parse_reports
from engine.config.routes import (
    QUALITY_MODES,
    RouteConfig,
    RouteOptions,
    TargetConfig,
    parse_routes,
    parse_target,
)
from engine.config.slo import Slo, parse_slos, with_slo_rules
from engine.config.state import StateConfig, parse_state
from engine.config.store import StoreConfig, parse_store
from engine.config.telemetry import TelemetryConfig, parse_telemetry
from engine.core.errors import ConfigError
from engine.core.pricing import PriceOverride
from engine.fallback.policy import Policy

__all__ = [
    "DEFAULT_BASE_URLS",
    "QUALITY_MODES",
    "AlertingConfig",
    "Budget",
    "Config",
    "ConfigError",
    "GatewayConfig",
    "ProviderConfig",
    "ReportsConfig",
    "RouteConfig",
    "RouteOptions",
    "Slo",
    "StateConfig",
    "StoreConfig",
    "TargetConfig",
    "TelemetryConfig",
    "load_config",
    "parse_config",
    "parse_target",
    "valid_model",
    "valid_name",
]

_TOP_LEVEL = (
    "providers", "routes", "policy", "prices", "prompts", "alerts", "alerting", "reports", "state",
    "gateway", "store", "budgets", "slo", "telemetry",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Config:
    providers: Mapping[str, ProviderConfig]
    routes: Mapping[str, RouteConfig]
    policy: Policy
    # [prices."provider/model"] or [prices."model"]: overrides that win over genai-prices.
    prices: Mapping[str, PriceOverride] = field(default_factory=dict)
    source: str = "switchover.toml"
    # [[alerts]] rules (with the built-in ones) and [alerting] receivers.
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    reports: ReportsConfig = field(default_factory=lambda: ReportsConfig())
    state: StateConfig = field(default_factory=lambda: StateConfig())
    prompts: Mapping[str, TargetPrompt] = field(default_factory=dict)
    gateway: GatewayConfig = field(default_factory=lambda: GatewayConfig())
    store: StoreConfig = field(default_factory=lambda: StoreConfig())
    # [[budgets]]: spend limits per route, feature or gateway key label (engine.config.budgets).
    budgets: tuple[Budget, ...] = ()
    # [[slo]]: availability objectives per route; their burn-rate rules are in `alerting`.
    slos: tuple[Slo, ...] = ()
    # [telemetry]: the OpenTelemetry export (engine.config.telemetry); off by default.
    telemetry: TelemetryConfig = field(default_factory=lambda: TelemetryConfig())

    def configured_targets(self) -> frozenset[str]:
        """Every `provider/model` some route lists: the only targets that exist by default."""
        return frozenset(t.name for route in self.routes.values() for t in route.targets)


def load_config(path: str | Path) -> Config:
    path = Path(path)
    return parse_config(read_toml(path), source=str(path), base_dir=path.parent)


def parse_config(
    data: Mapping[str, Any], *, source: str = "switchover.toml", base_dir: Path | None = None
) -> Config:
    """`base_dir`: where relative paths in the file (an `output_schema` file) are found."""

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {problem}")

    for key in data:
        if key not in _TOP_LEVEL:
            raise fail(key, f"unknown section (expected one of: {', '.join(_TOP_LEVEL)})")
    policy = parse_policy(data.get("policy", {}), Policy(), "policy", fail)
    providers = parse_providers(data.get("providers", {}), fail)
    prompts = parse_prompts(data.get("prompts", {}), fail)
    routes = parse_routes(
        data.get("routes", {}),
        providers=providers,
        prompts=prompts,
        defaults=policy,
        base_dir=base_dir or Path.cwd(),
        fail=fail,
    )
    prices = parse_prices(data.get("prices", {}), fail)
    alerting = parse_alerting(
        data.get("alerts"),
        data.get("alerting"),
        fail,
        routes=tuple(routes),
        key_envs={name: p.api_key_env for name, p in providers.items()},
    )
    slos = parse_slos(data.get("slo"), fail, tuple(routes))
    alerting = with_slo_rules(alerting, slos, fail)
    # The report's headline is for people reading a channel, not for a pager.
    chat_receivers = {r.name for r in alerting.receivers if r.kind in ("slack", "json")}
    reports = parse_reports(data.get("reports", {}), fail, chat_receivers)
    state = parse_state(data.get("state", {}), fail)
    gateway = parse_gateway(data.get("gateway", {}), fail)
    store = parse_store(data.get("store", {}), fail, alerting)
    budgets = parse_budgets(data.get("budgets"), fail, tuple(routes))
    alerting = with_budget_rules(alerting, budgets)  # after [store]: they read archived days
    telemetry = parse_telemetry(data.get("telemetry", {}), fail)
    if "direct" in routes:
        raise fail("routes.direct", '"direct" is the label of targets a caller names alone')
    return Config(
        providers=providers,
        routes=routes,
        policy=policy,
        prices=prices,
        source=source,
        alerting=alerting,
        reports=reports,
        state=state,
        prompts=prompts,
        gateway=gateway,
        store=store,
        budgets=budgets,
        slos=slos,
        telemetry=telemetry,
    )
