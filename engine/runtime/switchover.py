"""The library's front door: a configuration in, one chain per route, async and sync calls.

    sw = Switchover.from_file("switchover.toml")
    reply = sw.complete_sync("support", "Where is my order?")

A model name is a route from the config (`support`) or a single target (`claude/claude-haiku-4-5`).
Everything is built by the composition root (engine.runtime.build), as the evals and the
simulator build theirs. Providers are built once, each with one pooled HTTP client; breakers are
shared by every route that uses the same target, by every process of the host that records to
the same data folder, and by every process when `[state] redis_url` names a Redis. The sync
methods run the async ones on a private event-loop thread, so a script needs no asyncio; use one
style per instance.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from engine.config import Config, TargetConfig, load_config, parse_target, valid_model, valid_name
from engine.core.clock import Clock, SystemClock
from engine.core.errors import ConfigError
from engine.core.messages import Message, Request, Response, StreamEvent
from engine.core.paths import DataPaths
from engine.fallback.chain import Chain, EventHook
from engine.fallback.events import RequestHook
from engine.fallback.run import AttemptHook
from engine.providers.base import Provider
from engine.runtime.build import (
    ChainParts,
    build_breakers,
    build_chain,
    build_first_token_limits,
    build_health_scores,
    build_otel,
    build_providers,
    build_recorder,
    build_scrubber,
    build_switches,
    chain_of,
)
from engine.runtime.drills import SelfAbort
from engine.state.breaker import BreakerStore
from engine.state.target_health import TargetHealth

T = TypeVar("T")
Prompt = str | Request | Sequence[Message]
# The route label of every unconfigured `provider/model` ([gateway] allow_direct_targets).
DIRECT_ROUTE = "direct"


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
        request_hooks: Iterable[RequestHook] = (),
    ) -> None:
        """`record_to`: spool every attempt (priced) there for the scheduler (to PostgreSQL
        with `[state] postgres_url`); None: only the hooks hear of them. `providers`: instead
        of the HTTP adapters, and `rng`, the retries' jitter: the what-if simulator's."""
        self.config = config
        self.paths = record_to  # the data folder, when this instance records
        # Every provider key this instance reads, to keep out of anything stored or sent.
        self.scrub = build_scrubber(config, environ)
        self.clock = clock or SystemClock()
        self.recorder = build_recorder(config, record_to)
        self.providers: dict[str, Provider] = (
            dict(providers)
            if providers is not None
            else build_providers(config, clock=self.clock, transport=transport, environ=environ)
        )
        self._owns_breakers = breakers is None
        self.breakers = breakers or build_breakers(config, self.clock, self.recorder, record_to)
        # Health scores only when a route orders by them; switches wherever they can be kept.
        self.scores = build_health_scores(config, self.clock)
        self.switches = build_switches(config, record_to, self.clock)
        # What a drill's pre-flight asks about a route's other targets (engine.runtime.drills).
        self.health = TargetHealth(self.breakers, self.switches, self.clock)
        self.first_token_limits = build_first_token_limits(config)
        self.hooks: list[AttemptHook] = [*hooks, *self._observers()]
        self.event_hooks: list[EventHook] = list(event_hooks)
        if self.switches is not None:  # a drill ends at the first request it made fail
            self.event_hooks.append(SelfAbort(self))
        self._parts = ChainParts(
            config,
            self.providers,
            self.breakers,
            self.clock,
            self.hooks,
            self.event_hooks,
            scrub=self.scrub,
            scores=self.scores,
            switches=self.switches,
            rng=rng,
            request_hooks=self._request_observers(request_hooks, environ),
            first_token_limits=self.first_token_limits,
        )
        self._chains: dict[str, Chain] = {
            name: build_chain(self._parts, route) for name, route in config.routes.items()
        }
        self._direct_models: set[str] = set()  # `provider/model`s served under "direct"
        self._loop_thread: _LoopThread | None = None

    def _observers(self) -> list[AttemptHook]:
        """This instance's own attempt hooks, after the caller's: the recorder, the health
        scores and what a drill's pre-flight learns."""
        observers: list[AttemptHook] = [] if self.recorder is None else [self.recorder]
        if self.scores is not None:
            observers.append(self.scores.observe)
        return [*observers, self.health.observe]

    def _request_observers(
        self, given: Iterable[RequestHook], environ: Mapping[str, str] | None
    ) -> list[RequestHook]:
        """The hooks told how each request ended (engine.fallback.events.RequestDone): the
        caller's, then the OpenTelemetry export's (`self.otel`), when `[telemetry]` or the
        standard `OTEL_*` variables turn it on (engine.runtime.build.build_otel)."""
        self.otel = build_otel(self.config, self.clock, environ)
        self.request_hooks: list[RequestHook] = [*given, *([self.otel] if self.otel else [])]
        return self.request_hooks

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
        if self.otel is not None:  # off the loop: a flush to a slow collector blocks
            await asyncio.to_thread(self.otel.shutdown)

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
