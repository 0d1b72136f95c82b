"""The library's front door: a configuration in, one chain per route, async and sync calls.

    sw = Switchover.from_file("switchover.toml")
    reply = sw.complete_sync("support", "Where is my order?")

A model name is a route from the config (`support`) or a single target (`claude/claude-haiku-4-5`).
Providers are built once, each with one pooled HTTP client; breakers are shared by every route
that uses the same target, by every process of the host that records to the same data folder,
and by every process when `[state] redis_url` names a Redis. The
sync methods run the async ones on a private event-loop thread, so a script needs no asyncio;
use one style per instance.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from engine.config import (
    Config,
    ProviderConfig,
    TargetConfig,
    load_config,
    parse_target,
    valid_model,
    valid_name,
)
from engine.core.clock import Clock, SystemClock
from engine.core.errors import ConfigError
from engine.core.messages import Message, Request, Response, StreamEvent
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.core.scrub import Scrubber
from engine.fallback.chain import Chain, EventHook
from engine.fallback.run import AttemptHook
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import Provider
from engine.providers.openai import OpenAIProvider
from engine.runtime.chains import ChainParts, build_chain, chain_of
from engine.state.breaker import BreakerStore, MemoryBreakerStore, OnChange
from engine.state.drills import SelfAbort
from engine.state.health_scores import HealthScores, MemoryHealthScores, RedisHealthScores
from engine.state.switches import RedisTargetSwitches, Switches, TargetSwitches
from engine.state.target_health import TargetHealth
from engine.telemetry.breaker_events import recording_changes
from engine.telemetry.recorder import AttemptSink, Recorder

T = TypeVar("T")
Prompt = str | Request | Sequence[Message]
# The route label of every unconfigured `provider/model` ([gateway] allow_direct_targets).
DIRECT_ROUTE = "direct"


def build_provider(
    config: ProviderConfig,
    *,
    clock: Clock,
    transport: httpx.AsyncBaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
) -> Provider:
    factory = AnthropicProvider if config.kind == "anthropic" else OpenAIProvider
    optional = {}
    if config.default_max_tokens is not None:
        optional["default_max_tokens"] = config.default_max_tokens
    return factory(
        config.name,
        base_url=config.base_url,
        api_key=config.api_key(environ),
        transport=transport,
        clock=clock,
        extra_headers=dict(config.headers),
        connect_timeout_s=config.connect_timeout_s,
        **optional,
    )


class Switchover:
    def __init__(
        self,
        config: Config,
        *,
        clock: Clock | None = None,
        breakers: BreakerStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        hooks: Iterable[AttemptHook] = (),
        event_hooks: Iterable[EventHook] = (),
        environ: Mapping[str, str] | None = None,
        record_to: DataPaths | None = None,
        providers: Mapping[str, Provider] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`record_to`: spool every attempt (priced) under that data folder, for the
        scheduler to ingest (into PostgreSQL instead when `[state] postgres_url` is set); None
        records nothing beyond the hooks given. `providers`: one per provider of the config,
        instead of the HTTP adapters (the what-if simulator's); `rng`: the retries' jitter
        (seeded by the simulator, so every run waits alike)."""
        self.config = config
        self.paths = record_to  # the data folder, when this instance records
        # Every provider key this instance reads, to keep out of anything stored or sent.
        self.scrub = Scrubber.for_config(config, environ)
        self.clock = clock or SystemClock()
        self.hooks: list[AttemptHook] = list(hooks)
        self.recorder: Recorder | None = None
        if record_to is not None:
            self.recorder = Recorder(
                record_to.spool, pricer=Pricer.from_config(config), sink=_attempt_sink(config)
            )
            self.hooks.append(self.recorder)
        self.event_hooks: list[EventHook] = list(event_hooks)
        self.providers: dict[str, Provider] = (
            dict(providers)
            if providers is not None
            else {
                name: build_provider(pc, clock=self.clock, transport=transport, environ=environ)
                for name, pc in config.providers.items()
            }
        )
        self._owns_breakers = breakers is None
        self.breakers = breakers or _breaker_store(
            config,
            self.clock,
            recording_changes(self.recorder, self.clock) if self.recorder else None,
            record_to,
        )
        # Health scores only when a route orders by them; switches wherever they can be kept.
        self.scores: HealthScores | None = None
        if any(r.options.adaptive_order for r in config.routes.values()):
            self.scores = _health_scores(config, self.clock)
            self.hooks.append(self.scores.observe)
        self.switches: Switches | None = _switches(config, record_to, self.clock)
        # What a drill's pre-flight asks about a route's other targets, and the event hook that
        # ends a drill at the first request it made fail (engine.state.drills).
        self.health = TargetHealth(self.breakers, self.switches, self.clock)
        self.hooks.append(self.health.observe)
        if self.switches is not None:
            self.event_hooks.append(SelfAbort(self))
        self._parts = ChainParts(
            config, self.providers, self.breakers, self.clock, self.hooks, self.event_hooks,
            scrub=self.scrub, scores=self.scores, switches=self.switches, rng=rng,
        )  # fmt: skip
        self._chains: dict[str, Chain] = {
            name: build_chain(self._parts, route) for name, route in config.routes.items()
        }
        self._direct_models: set[str] = set()  # `provider/model`s served under "direct"
        self._loop_thread: _LoopThread | None = None

    @classmethod
    def from_file(cls, path: str | Path = "switchover.toml", **kwargs: Any) -> Switchover:
        return cls(load_config(path), **kwargs)

    def chain(self, model: str) -> Chain:
        """The chain for a route name, or a one-target chain (route label "direct") for a
        `provider/model` that a route lists. Any other name is a ConfigError (the gateway's
        404), unless `[gateway] allow_direct_targets` admits it, under the same label, up to
        `max_direct_models` distinct models: what a caller can name is bounded by the
        configuration, and so are the chains, breakers and metric series it creates."""
        chain = self._chains.get(model)
        if chain is not None:
            return chain
        target = self._direct_target(model)
        unlisted = target.name not in self.config.configured_targets()
        if unlisted:
            self._direct_models.add(target.name)
        # One route label for every target named alone, listed or not: Live, the rollups and
        # the reports show the configured routes and "direct", never a route per name.
        chain = chain_of(
            self._parts, DIRECT_ROUTE, [target], self.config.policy, model_from_caller=unlisted
        )
        self._chains[model] = chain
        return chain

    def _direct_target(self, model: str) -> TargetConfig:
        """The target a `provider/model` name stands for, or a ConfigError saying why not."""
        shown = model[:64] + ("…" if len(model) > 64 else "")
        try:
            target = parse_target(model)
        except ValueError:
            target = None
        if target is None or not valid_name(target.provider) or not valid_model(target.model):
            routes = ", ".join(sorted(self.config.routes)) or "none configured"
            raise ConfigError(f"unknown model {shown!r}: name a route ({routes})")
        gateway = self.config.gateway
        if target.name in self.config.configured_targets():
            return target
        if not gateway.allow_direct_targets:
            raise ConfigError(
                f"unknown model {shown!r}: it is not a route or a target of one "
                f"(routes: {', '.join(sorted(self.config.routes)) or 'none configured'})"
            )
        if target.provider not in self.providers:
            raise ConfigError(f"unknown provider {target.provider[:64]!r} in {shown!r}")
        if len(self._direct_models) >= gateway.max_direct_models:
            raise ConfigError(
                f"unknown model {shown!r}: this gateway already serves "
                f"{gateway.max_direct_models} direct models ([gateway] max_direct_models); "
                "add it to a route"
            )
        return target

    def add_hook(self, hook: AttemptHook) -> None:
        """Every Attempt of every chain, built already or later, goes to `hook` (it must not
        block)."""
        self.hooks.append(hook)
        for chain in self._chains.values():
            chain.hooks.append(hook)

    # --- async ---------------------------------------------------------------------------

    async def complete(self, model: str, prompt: Prompt, **request: Any) -> Response:
        return await self.chain(model).complete(request_of(prompt, request))

    async def stream(
        self, model: str, prompt: Prompt, **request: Any
    ) -> AsyncIterator[StreamEvent]:
        async for event in self.chain(model).stream(request_of(prompt, request)):
            yield event

    async def aclose(self) -> None:
        await asyncio.gather(*(p.aclose() for p in self.providers.values()))
        for shared in (self.scores, self.switches):
            close = getattr(shared, "aclose", None)
            if close is not None:
                await close()
        close = getattr(self.breakers, "aclose", None)
        if self._owns_breakers and close is not None:
            await close()
        if self.recorder is not None:
            self.recorder.close()

    async def __aenter__(self) -> Switchover:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- sync ----------------------------------------------------------------------------

    def complete_sync(self, model: str, prompt: Prompt, **request: Any) -> Response:
        return self.run_sync(self.complete(model, prompt, **request))

    def stream_sync(self, model: str, prompt: Prompt, **request: Any) -> list[StreamEvent]:
        """The whole stream's events, in order (for scripts; use `stream` to act on each)."""

        async def collect() -> list[StreamEvent]:
            return [e async for e in self.stream(model, prompt, **request)]

        return self.run_sync(collect())

    def close(self) -> None:
        if self._loop_thread is not None:
            self.run_sync(self.aclose())
            self._loop_thread.stop()
            self._loop_thread = None

    def __enter__(self) -> Switchover:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this instance's private loop thread, where its pooled connections
        live (what the `*_sync` methods do; for helpers such as
        `engine.runtime.jobs.run_job_sync`)."""
        if self._loop_thread is None:
            self._loop_thread = _LoopThread()
        return self._loop_thread.run(coro)


def request_of(prompt: Prompt, fields: Mapping[str, Any]) -> Request:
    """A `Request` from what the library's calls accept: text, messages or a Request."""
    if isinstance(prompt, Request):
        return prompt.replace(**fields) if fields else prompt
    if isinstance(prompt, str):
        return Request(messages=(Message.user(prompt),), **fields)
    return Request(messages=tuple(prompt), **fields)


def _health_scores(config: Config, clock: Clock) -> HealthScores:
    """Shared by every worker through Redis when `[state] redis_url` is set."""
    if config.state.redis_url is None:
        return MemoryHealthScores(clock)
    return RedisHealthScores.from_url(config.state.redis_url, clock=clock)


def _switches(config: Config, record_to: DataPaths | None, clock: Clock) -> Switches | None:
    """Operator switches in Redis when configured (every host sees them), else in the data
    folder's control file (every process of this machine); none without either."""
    if config.state.redis_url is not None:
        return RedisTargetSwitches.from_url(config.state.redis_url, now=clock.wall)
    if record_to is not None:
        return TargetSwitches(record_to.target_switches, now=clock.wall)
    return None


def _breaker_store(
    config: Config, clock: Clock, on_change: OnChange | None, record_to: DataPaths | None
) -> BreakerStore:
    """In Redis when `[state] redis_url` is set (shared by every process that names the same
    Redis; engine.state.breaker_redis); else, for a process with a data folder on the system clock,
    in that folder's SQLite file (shared by every process of this host recording there, such
    as the workers of `serve --workers N`; engine.state.breaker_sqlite); else in this process's
    memory. A virtual clock's time belongs to its own process: nobody could share it."""
    policy, by_key = config.policy.breaker_policy(), breaker_policies(config)
    if config.state.redis_url is not None:
        from engine.state.breaker_redis import RedisBreakerStore

        url = config.state.redis_url
        return RedisBreakerStore.from_url(url, policy, by_key, on_change, clock=clock)
    if record_to is not None and isinstance(clock, SystemClock):
        from engine.state.breaker_sqlite import SQLiteBreakerStore

        return SQLiteBreakerStore(record_to.breaker_states, policy, by_key, on_change)
    return MemoryBreakerStore(policy, by_key, on_change)


def _attempt_sink(config: Config) -> AttemptSink | None:
    """PostgreSQL when `[state] postgres_url` is set (gateways on several hosts), else None: the
    recorder writes spool files under `record_to`."""
    if config.state.postgres_url is None:
        return None
    from engine.store.postgres import PostgresSink

    return PostgresSink(config.state.postgres_url)


def breaker_policies(config: Config) -> dict[str, Any]:
    """Breaker settings are per target; when several routes share a target, the first route
    that lists it decides (a breaker cannot be open for one route and closed for another)."""
    policies: dict[str, Any] = {}
    for route in config.routes.values():
        for target in route.targets:
            policies.setdefault(target.name, route.policy.breaker_policy())
    return policies


class _LoopThread:
    """An event loop on a daemon thread, so sync callers share pooled connections."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="switchover-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
