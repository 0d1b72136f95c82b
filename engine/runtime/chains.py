"""The one way to build a route's chain from its configuration: production (`Switchover`), the
evals, the what-if simulator and the demo all come through here, so a route runs everywhere with
the same targets, prompts, context windows, PII policy, output contract, target order and
failure policy. What differs between them is only what they pass in: the providers (HTTP
adapters, or the simulator's), the breakers, the clock and the hooks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import Config, RouteConfig, TargetConfig
from engine.core.clock import Clock
from engine.core.scrub import Scrubber
from engine.fallback.chain import Chain, EventHook
from engine.fallback.order import TargetOrder
from engine.fallback.policy import Policy
from engine.fallback.run import AttemptHook
from engine.fallback.target import Target
from engine.providers.base import Provider
from engine.state.breaker import BreakerStore
from engine.state.health_scores import HealthScores
from engine.state.switches import Switches


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


def build_target(parts: ChainParts, target: TargetConfig) -> Target:
    provider = parts.config.providers[target.provider]
    return Target(
        parts.providers[target.provider],
        target.model,
        provider.key_kind,  # type: ignore[arg-type]
        target.prompt,
        context_window=target.context_window,
        price_provider=provider.price_provider,
        prefill=provider.supports_prefill,
    )


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
        **options,
    )
