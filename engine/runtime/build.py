"""The composition root: the one place a configuration becomes a running engine.

Production (`Switchover`: the gateway, the library, the CLI, the demo's history), the evals
and the what-if simulator all build their providers, pricer, breaker store, shared state and
chains through these functions, so a route runs everywhere with the same targets, prompts,
context windows, PII policy, output contract, target order and failure policy. What differs
between them is only what they pass in: the providers (HTTP adapters, or the simulator's), the
breakers, the clock and the hooks.

    build_providers     one adapter per provider, each with one pooled HTTP client
    build_pricer        genai-prices, with the config's price overrides and price providers
    build_recorder      the spool writer (and the PostgreSQL sink), when a process records
    build_otel          the OpenTelemetry export, when [telemetry] or OTEL_* asks for it
    build_breakers      in Redis, in the data folder's SQLite file, or in this process's memory
    build_switches      operator switches and drills: in Redis, or the data folder's control file
    build_chain         a route's chain with every option it sets, over what `ChainParts` shares

The layers below (engine.fallback, engine.state, engine.core) never read the configuration:
what they need of it is handed to them from here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.config import Config, ProviderConfig, RouteConfig, TargetConfig
from engine.core.attempt import KeyKind
from engine.core.clock import Clock, SystemClock
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.core.scrub import Scrubber
from engine.fallback.chain import Chain, EventHook
from engine.fallback.events import RequestHook
from engine.fallback.learned_limits import LearnedLimits
from engine.fallback.order import TargetOrder
from engine.fallback.policy import Policy
from engine.fallback.run import AttemptHook
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import Provider
from engine.providers.openai import OpenAIProvider
from engine.state.breaker import (
    BreakerPolicy,
    BreakerState,
    BreakerStore,
    MemoryBreakerStore,
    OnChange,
)
from engine.state.health_scores import HealthScores, MemoryHealthScores
from engine.state.switches import Switches
from engine.state.switches_file import TargetSwitches
from engine.telemetry.breaker_events import event_for_change
from engine.telemetry.recorder import AttemptSink, Recorder

log = logging.getLogger("switchover.runtime")

# --- providers, prices, secrets ------------------------------------------------------------


def build_provider(
    config: ProviderConfig,
    *,
    clock: Clock,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
) -> Provider:
    """The adapter of `config`'s dialect; ConfigError when its key is not in the environment."""
    return _provider(config, config.api_key(environ), clock, transport)


def build_providers(
    config: Config,
    names: Iterable[str] | None = None,
    *,
    clock: Clock,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Provider]:
    """An adapter for each provider named (every provider of `config` by default). Every key is
    read before any client is made, so a missing one (ConfigError) leaves nothing to close."""
    chosen = {
        name: config.providers[name] for name in (config.providers if names is None else names)
    }
    keys = {name: provider.api_key(environ) for name, provider in chosen.items()}
    return {name: _provider(p, keys[name], clock, transport) for name, p in chosen.items()}


def _provider(
    config: ProviderConfig,
    api_key: str | None,
    clock: Clock,
    transport: httpx.AsyncBaseTransport | None,
) -> Provider:
    factory = AnthropicProvider if config.kind == "anthropic" else OpenAIProvider
    optional = {}
    if config.default_max_tokens is not None:
        optional["default_max_tokens"] = config.default_max_tokens
    return factory(
        config.name,
        base_url=config.base_url,
        api_key=api_key,
        transport=transport,
        clock=clock,
        extra_headers=dict(config.headers),
        connect_timeout_s=config.connect_timeout_s,
        **optional,
    )


def build_pricer(config: Config) -> Pricer:
    """Prices with the config's overrides, and each provider's genai-prices provider where it
    names one (an OpenAI-compatible server selling Llama is "groq", not "openai")."""
    providers = config.providers.values()
    return Pricer(
        config.prices,
        price_providers={p.name: p.price_provider for p in providers if p.price_provider},
    )


def build_scrubber(config: Config, environ: Mapping[str, str] | None = None) -> Scrubber:
    """A scrubber that knows every provider key the configuration reads (one whose variable is
    unset has no value to hide)."""
    keys = []
    for provider in config.providers.values():
        with contextlib.suppress(ConfigError):
            key = provider.api_key(environ)
            if key:
                keys.append(key)
    return Scrubber(keys)


# --- what a recording process writes ---------------------------------------------------------


def build_recorder(config: Config, record_to: DataPaths | None) -> Recorder | None:
    """Every attempt priced and spooled under `record_to` for the scheduler (into PostgreSQL
    instead when `[state] postgres_url` is set); None when the process records nothing."""
    if record_to is None:
        return None
    return Recorder(record_to.spool, pricer=build_pricer(config), sink=_attempt_sink(config))


def _attempt_sink(config: Config) -> AttemptSink | None:
    """PostgreSQL when `[state] postgres_url` is set (gateways on several hosts), else None: the
    recorder writes spool files under `record_to`."""
    if config.state.postgres_url is None:
        return None
    from engine.telemetry.postgres_sink import PostgresSink

    return PostgresSink(config.state.postgres_url)


def build_otel(
    config: Config, clock: Clock, environ: Mapping[str, str] | None = None
) -> Any | None:
    """The OpenTelemetry exporter (engine.telemetry.otel.OtelExporter, a request hook) when
    `[telemetry]` or the standard `OTEL_*` variables ask for one; None otherwise, on a virtual
    clock (the simulator's requests are not this deployment's), and, after one warning, when
    the SDK is not installed: its absence never fails a start."""
    export = config.telemetry.export(os.environ if environ is None else environ)
    if export is None or not isinstance(clock, SystemClock):
        return None
    try:
        from engine.telemetry.otel import otlp_exporter
    except ImportError as exc:
        log.warning(
            "OpenTelemetry export is configured but its SDK is missing (%s): running without "
            "it; install the extra: pip install 'switchover[otel]'",
            exc,
        )
        return None
    return otlp_exporter(
        traces_url=export.traces_url,
        metrics_url=export.metrics_url,
        service_name=export.service_name,
        headers=export.headers,
        timeout_s=export.timeout_s,
        pricer=build_pricer(config),
    )


def breaker_changes(recorder: Recorder, clock: Clock) -> OnChange:
    """A breaker store's `on_change` that hands each transition to `recorder`, with `clock`'s
    times (the breakers' own times are the clock's monotonic ones)."""

    def on_change(target: str, old: BreakerState, new: BreakerState) -> None:
        recorder.breaker_changed(
            event_for_change(target, old, new, wall=clock.wall(), now=clock.now())
        )

    return on_change


# --- state shared between requests, processes and hosts --------------------------------------


def breaker_policies(config: Config) -> dict[str, BreakerPolicy]:
    """Breaker settings are per target; when several routes share a target, the first route
    that lists it decides (a breaker cannot be open for one route and closed for another)."""
    policies: dict[str, BreakerPolicy] = {}
    for route in config.routes.values():
        for target in route.targets:
            policies.setdefault(target.name, route.policy.breaker_policy())
    return policies


def build_breakers(
    config: Config, clock: Clock, recorder: Recorder | None, record_to: DataPaths | None
) -> BreakerStore:
    """In Redis when `[state] redis_url` is set (shared by every process that names the same
    Redis; engine.state.breaker_redis); else, for a process with a data folder on the system
    clock, in that folder's SQLite file (shared by every process of this host recording there,
    such as the workers of `serve --workers N`; engine.state.breaker_sqlite); else in this
    process's memory. A virtual clock's time belongs to its own process: nobody could share it.
    Each transition is recorded when the process records."""
    policy, by_key = config.policy.breaker_policy(), breaker_policies(config)
    on_change = breaker_changes(recorder, clock) if recorder is not None else None
    if config.state.redis_url is not None:
        from engine.state.breaker_redis import RedisBreakerStore

        url = config.state.redis_url
        return RedisBreakerStore.from_url(url, policy, by_key, on_change, clock=clock)
    if record_to is not None and isinstance(clock, SystemClock):
        from engine.state.breaker_sqlite import SQLiteBreakerStore

        return SQLiteBreakerStore(record_to.breaker_states, policy, by_key, on_change)
    return MemoryBreakerStore(policy, by_key, on_change)


def build_health_scores(config: Config, clock: Clock) -> HealthScores | None:
    """Only when a route orders its targets by them (`adaptive_order`); shared by every worker
    through Redis when `[state] redis_url` is set."""
    if not any(r.options.adaptive_order for r in config.routes.values()):
        return None
    if config.state.redis_url is None:
        return MemoryHealthScores(clock)
    from engine.state.health_scores_redis import RedisHealthScores

    return RedisHealthScores.from_url(config.state.redis_url, clock=clock)


def build_switches(config: Config, record_to: DataPaths | None, clock: Clock) -> Switches | None:
    """Operator switches in Redis when configured (every host sees them), else in the data
    folder's control file (every process of this machine); none without either."""
    if config.state.redis_url is not None:
        from engine.state.switches_redis import RedisTargetSwitches

        return RedisTargetSwitches.from_url(config.state.redis_url, now=clock.wall)
    if record_to is not None:
        return TargetSwitches(record_to.target_switches, now=clock.wall)
    return None


def build_first_token_limits(config: Config) -> LearnedLimits | None:
    """The learned first-token limits, when a route learns them: filled by whoever reads the
    published target latency (the gateway); until then, and for a target without enough
    history, a learning route keeps its static limit."""
    if any(r.options.learned_first_token for r in config.routes.values()):
        return LearnedLimits()
    return None


# --- chains ------------------------------------------------------------------------------------


@dataclass
class ChainParts:
    """What every chain of one host shares (each chain copies the hook lists it is given:
    `Switchover.add_hook` reaches the chains built already)."""

    config: Config
    providers: Mapping[str, Provider]
    breakers: BreakerStore
    clock: Clock
    hooks: list[AttemptHook] = field(default_factory=list)
    event_hooks: list[EventHook] = field(default_factory=list)
    scrub: Scrubber | None = None
    scores: HealthScores | None = None  # health scores, for routes with adaptive_order
    switches: Switches | None = None  # operator switches and drills, where they are kept
    rng: random.Random | None = None  # retries' jitter (seeded by the simulator)
    request_hooks: list[RequestHook] = field(default_factory=list)  # each finished request
    # First-token limits learned per target, for routes that learn them (refreshed by the
    # gateway from the published target latency).
    first_token_limits: LearnedLimits | None = None


def build_target(parts: ChainParts, target: TargetConfig) -> Target:
    provider = parts.config.providers[target.provider]
    return Target(
        parts.providers[target.provider],
        target.model,
        _key_kind(provider),
        target.prompt,
        context_window=target.context_window,
        price_provider=provider.price_provider,
        prefill=provider.supports_prefill,
    )


def _key_kind(provider: ProviderConfig) -> KeyKind:
    # engine.config admits no other value than these two.
    return "own" if provider.key_kind == "own" else "managed"


def route_options(parts: ChainParts, route: RouteConfig) -> dict[str, Any]:
    """The chain's keyword options for every option `route` sets."""
    options = route.options
    order = None
    if options.adaptive_order or options.own_keys_first or parts.switches is not None:
        order = TargetOrder(
            scores=parts.scores if options.adaptive_order else None,
            switches=parts.switches,
            own_keys_first=options.own_keys_first,
        )
    return {
        "order": order,
        "pii": options.pii,
        "contract": options.contract,
        "fall_back_on_quality": options.on_quality_error == "fall_back",
        "continue_streams": options.on_stream_failure == "continue",
        "first_token_limits": parts.first_token_limits if options.learned_first_token else None,
    }


def build_chain(
    parts: ChainParts,
    route: RouteConfig,
    *,
    targets: Sequence[TargetConfig] | None = None,
    **overrides: Any,
) -> Chain:
    """`route`'s chain with every option it sets; `targets` (a subset, as the evals run each
    target alone) and `overrides` (a chain option) replace the route's where given."""
    return chain_of(
        parts,
        route.name,
        route.targets if targets is None else targets,
        route.policy,
        **{**route_options(parts, route), **overrides},
    )


def chain_of(
    parts: ChainParts,
    name: str,
    targets: Sequence[TargetConfig],
    policy: Policy,
    **options: Any,
) -> Chain:
    """A chain over `targets` under the route label `name` (a route, or "direct")."""
    return Chain(
        name,
        [build_target(parts, t) for t in targets],
        policy=policy,
        breakers=parts.breakers,
        clock=parts.clock,
        hooks=parts.hooks,
        event_hooks=parts.event_hooks,
        scrub=parts.scrub,
        rng=parts.rng,
        request_hooks=parts.request_hooks,
        **options,
    )
