"""switchover.toml → validated, frozen configuration objects.

A bad file fails at start with one line naming the key and what is wrong
(`switchover.toml: routes.support.targets[2]: provider "gtp" is not defined in [providers]`).
API keys are never read from the file: a provider names the environment variable that holds
its key (`api_key_env`), and the key is read only when the provider is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from engine.alerts.rules import AlertingConfig, parse_alerting
from engine.behaviours.prompts import TargetPrompt
from engine.config.routes import (  # re-exported: callers import them from engine.config
    QUALITY_MODES,
    RouteConfig,
    RouteOptions,
    TargetConfig,
    no_unknown,
    parse_policy,
    parse_prompts,
    parse_routes,
    parse_target,
    read_toml,
    table_of,
    valid_model,
    valid_name,
)
from engine.core.errors import ConfigError
from engine.core.pricing import GENAI_PRICES_SOURCE, PriceOverride, known_price_provider
from engine.fallback.policy import Policy

__all__ = [
    "QUALITY_MODES",
    "Config",
    "GatewayConfig",
    "ProviderConfig",
    "ReportsConfig",
    "RouteConfig",
    "RouteOptions",
    "StateConfig",
    "StoreConfig",
    "TargetConfig",
    "load_config",
    "parse_config",
    "parse_target",
    "valid_model",
    "valid_name",
]

PROVIDER_KINDS = ("anthropic", "openai")
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
_TOP_LEVEL = (
    "providers", "routes", "policy", "prices", "prompts", "alerts", "alerting", "reports", "state",
    "gateway", "store",
)  # fmt: skip
_PROVIDER_KEYS = (
    "kind",
    "base_url",
    "api_key_env",
    "key_kind",
    "headers",
    "default_max_tokens",
    "connect_timeout_s",
    "price_provider",
    "supports_prefill",
)
_PRICE_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "source")
_STATE_KEYS = ("redis_url", "postgres_url")
_GATEWAY_KEYS = (
    "allow_direct_targets",
    "max_direct_models",
    "header_timeout_s",
    "body_timeout_s",
    "keep_alive_timeout_s",
    "max_connections",
)
_STORE_KEYS = ("keep_attempts_days",)
# From 2: a day moves once it is wholly this old, and a file up to `keep - 1` days late still
# counts (engine.store.retention.refresh_floor), so a host offline for a day loses nothing.
_KEEP_DAYS = (2, 36_500)
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str
    api_key_env: str | None = None  # None: the server needs no key (a local vLLM, say)
    key_kind: str = "managed"  # "own" (BYOK) or "managed"; recorded on every attempt
    headers: Mapping[str, str] = field(default_factory=dict)
    # None: the adapter's own default (Anthropic requires a value; OpenAI servers need none).
    default_max_tokens: int | None = None
    connect_timeout_s: float = 5.0
    # The genai-prices provider whose prices this server charges, when not its kind's: an
    # OpenAI-compatible server may be "groq", "together", "deepseek", "openrouter"...
    price_provider: str | None = None
    # Whether the server continues a final assistant message (assistant prefill), which a
    # route's `on_stream_failure = "continue"` needs; None: by kind (anthropic yes, openai no).
    supports_prefill: bool | None = None

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key from the environment; ConfigError when the named variable is unset."""
        if self.api_key_env is None:
            return None
        environ = os.environ if environ is None else environ
        key = environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(
                f"providers.{self.name}.api_key_env: environment variable "
                f"{self.api_key_env} is not set"
            )
        return key


@dataclass(frozen=True, slots=True)
class ReportsConfig:
    """[reports]: when the scheduler writes last week's report, and the availability target."""

    day: str = "mon"  # mon … sun
    hour: int = 6  # UTC
    availability_target: float = 0.999
    # Receivers of [alerting] (by name) that get the report's headline once it is written.
    send_to: tuple[str, ...] = ()


_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_REPORTS_KEYS = ("day", "hour", "availability_target", "send_to")


@dataclass(frozen=True, slots=True)
class StateConfig:
    """[state]: what gateway processes share: breaker state (Redis) and, across hosts, attempts
    (PostgreSQL); None: each keeps its own."""

    redis_url: str | None = None
    # The shared attempt sink of gateways on several hosts, pulled by the scheduler; None: the
    # spool folder. A libpq URL; its password may come from PGPASSWORD or ~/.pgpass instead.
    postgres_url: str | None = None


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """[store]: how long the scheduler keeps attempts in its database; older ones move to
    monthly Parquet archives under data/archive/ (engine.store.retention), rollups stay."""

    keep_attempts_days: int = 30


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
    providers = {
        name: _provider(name, table, fail)
        for name, table in table_of(data.get("providers", {}), "providers", fail).items()
    }
    if not providers:
        raise fail("providers", "define at least one provider, e.g. [providers.claude]")
    prompts = parse_prompts(data.get("prompts", {}), fail)
    routes = parse_routes(
        data.get("routes", {}),
        providers=providers,
        prompts=prompts,
        defaults=policy,
        base_dir=base_dir or Path.cwd(),
        fail=fail,
    )
    prices = {
        name: _price(name, table, fail)
        for name, table in table_of(data.get("prices", {}), "prices", fail).items()
    }
    alerting = parse_alerting(
        data.get("alerts"),
        data.get("alerting"),
        fail,
        routes=tuple(routes),
        key_envs={name: p.api_key_env for name, p in providers.items()},
    )
    reports = _reports(data.get("reports", {}), fail, {r.name for r in alerting.receivers})
    state = _state(data.get("state", {}), fail)
    gateway = _gateway(data.get("gateway", {}), fail)
    store = _store(data.get("store", {}), fail, alerting)
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
    )


def _reports(table: Any, fail: Any, receivers: set[str]) -> ReportsConfig:
    table = table_of(table, "reports", fail)
    no_unknown(table, _REPORTS_KEYS, "reports", fail)
    day = table.get("day", "mon")
    if day not in _DAYS:
        raise fail("reports.day", f"must be one of {', '.join(_DAYS)} (got {day!r})")
    hour = table.get("hour", 6)
    if not isinstance(hour, int) or isinstance(hour, bool) or not 0 <= hour <= 23:
        raise fail("reports.hour", "must be an hour of the day, 0 to 23 (UTC)")
    target = table.get("availability_target", 0.999)
    if not isinstance(target, int | float) or isinstance(target, bool) or not 0 < target < 1:
        raise fail("reports.availability_target", "must be a share between 0 and 1, like 0.999")
    send_to = table.get("send_to", [])
    if not isinstance(send_to, list) or not all(isinstance(n, str) for n in send_to):
        raise fail("reports.send_to", 'must be a list of receiver names, like ["ops-slack"]')
    unknown = sorted(set(send_to) - receivers)
    if unknown:
        known = ", ".join(sorted(receivers)) or "none is configured"
        raise fail("reports.send_to", f"names no [[alerting.receivers]]: {', '.join(unknown)} "
                   f"(receivers: {known})")  # fmt: skip
    return ReportsConfig(day, hour, float(target), tuple(send_to))


def _state(table: Any, fail: Any) -> StateConfig:
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


def _store(table: Any, fail: Any, alerting: AlertingConfig) -> StoreConfig:
    table = table_of(table, "store", fail)
    no_unknown(table, _STORE_KEYS, "store", fail)
    days = table.get("keep_attempts_days", StoreConfig().keep_attempts_days)
    low, high = _KEEP_DAYS
    if not isinstance(days, int) or isinstance(days, bool) or not low <= days <= high:
        raise fail(
            "store.keep_attempts_days",
            f"must be a whole number of days from {low} to {high} "
            "(archived attempts are kept for good: there is no 'never')",
        )
    # The rules that read attempts (credentials, latency) look back their window.
    longest = max(alerting.rules, key=lambda rule: rule.window_s, default=None)
    if longest is not None and longest.window_s > days * 86_400:
        raise fail(
            "store.keep_attempts_days",
            f"{days} days is shorter than the window of alert {longest.name!r} "
            f"({longest.window_s / 86_400:g} days)",
        )
    return StoreConfig(days)


def _gateway(table: Any, fail: Any) -> GatewayConfig:
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


def _provider(name: str, table: Any, fail: Any) -> ProviderConfig:
    where = f"providers.{name}"
    if not valid_name(name):
        raise fail(where, "a provider name is letters, digits, '.', '_' and '-' (at most 64)")
    table = table_of(table, where, fail)
    if "api_key" in table:
        raise fail(f"{where}.api_key", "keys are never kept in the file; use api_key_env")
    no_unknown(table, _PROVIDER_KEYS, where, fail)
    kind = table.get("kind")
    if kind not in PROVIDER_KINDS:
        raise fail(f"{where}.kind", f"must be one of {', '.join(PROVIDER_KINDS)} (got {kind!r})")
    base_url = table.get("base_url", DEFAULT_BASE_URLS[kind])
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise fail(f"{where}.base_url", f"must be an http(s) URL (got {base_url!r})")
    api_key_env = table.get("api_key_env")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
        raise fail(f"{where}.api_key_env", "must name an environment variable")
    key_kind = table.get("key_kind", "managed")
    if key_kind not in ("own", "managed"):
        raise fail(f"{where}.key_kind", f"must be 'own' or 'managed' (got {key_kind!r})")
    headers = table.get("headers", {})
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise fail(f"{where}.headers", "must be a table of strings")
    max_tokens = table.get("default_max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise fail(f"{where}.default_max_tokens", "must be a positive integer")
    connect_timeout_s = table.get("connect_timeout_s", 5.0)
    if (
        not isinstance(connect_timeout_s, int | float)
        or isinstance(connect_timeout_s, bool)
        or not 0 < connect_timeout_s <= 600
    ):
        raise fail(f"{where}.connect_timeout_s", "must be a number of seconds in (0, 600]")
    price_provider = table.get("price_provider")
    if price_provider is not None and (
        not isinstance(price_provider, str) or not known_price_provider(price_provider)
    ):
        raise fail(
            f"{where}.price_provider",
            f"{GENAI_PRICES_SOURCE} has no provider {price_provider!r} "
            "(its ids are like groq, together, deepseek, openrouter)",
        )
    supports_prefill = table.get("supports_prefill")
    if supports_prefill is not None and not isinstance(supports_prefill, bool):
        raise fail(f"{where}.supports_prefill", f"must be true or false (got {supports_prefill!r})")
    return ProviderConfig(
        name,
        kind,
        base_url.rstrip("/"),
        api_key_env,
        key_kind,
        dict(headers),
        max_tokens,
        float(connect_timeout_s),
        price_provider,
        supports_prefill,
    )


def _price(name: str, table: Any, fail: Any) -> PriceOverride:
    where = f'prices."{name}"'
    table = table_of(table, where, fail)
    no_unknown(table, _PRICE_KEYS, where, fail)
    prices: dict[str, Decimal] = {}
    for key in _PRICE_KEYS[:4]:
        if key not in table:
            if key in ("input_mtok", "output_mtok"):
                raise fail(f"{where}.{key}", "missing: give the price in USD per million tokens")
            continue
        value = _usd(table[key])
        if value is None:
            raise fail(
                f"{where}.{key}",
                f"must be a non-negative number of USD per million tokens (got {table[key]!r})",
            )
        prices[key] = value
    source = table.get("source")
    if not isinstance(source, str) or not source.strip():
        raise fail(f"{where}.source", "say where this price comes from")
    return PriceOverride(**prices, source=source.strip())


def _usd(value: Any) -> Decimal | None:
    """A TOML number or a decimal string as an exact Decimal: 0.075 stays 0.075 (the float's
    shortest repr, not its binary expansion); None when it is not a non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(repr(value) if isinstance(value, float) else value)
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and amount >= 0 else None
