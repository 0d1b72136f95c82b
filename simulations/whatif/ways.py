"""The passes through a route's chain that the fast-forward (simulations.whatif.fastforward)
can know on arrival, from the breakers alone.

A `Way` is one such pass: every target before `depth` passed over without a call, because
its breaker is open or it is cooling down after a rate limit, then one call to the target at
`depth`, answered. With no target left (`depth` past the last), the request fails having
made no call: the chain's "every target was skipped" record. On a quiet day the way is the
primary; during an outage, once its breaker is open, the backup; when the backup is cooling
down too, no call at all.

A way is only taken once the chain has written its record once (`Ways.of_record`): that
record, with what varies filled in, is every fast-forwarded request's on that way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config import Config, RouteConfig, TargetConfig
from engine.core.attempt import Attempt
from engine.core.skips import Skip, SkipReason, from_json, to_json
from engine.fallback.policy import Budget, Policy
from simulations.whatif.scenario import Scenario

# Why a target is passed over on a way: what the breaker store alone says at arrival.
PASSED_OVER = (SkipReason.BREAKER_OPEN, SkipReason.COOLING_DOWN)


def route_can_fast_forward(route: RouteConfig, switches: Any) -> bool:
    """Whether no route option could make a pass end otherwise than its breakers say (a
    target's own prompt changes only what that target is sent: its way is the chain's,
    `Ways.find`)."""
    options = route.options
    return (
        switches is None
        and options.pii is None
        and options.contract is None
        and not options.adaptive_order
        and not options.own_keys_first
    )


def attempt_limit(policy: Policy, depth: int, targets: int) -> float:
    """The time limit of a request's first call, made on the target at `depth` of `targets`,
    as engine.fallback.run sets it (`Budget.attempt_end`, the attempt's own timeout)."""
    budget = Budget(policy, policy.budget_s, first_call=0.0)
    end = budget.attempt_end(0.0, depth, backups_left=depth < targets - 1)
    return min(end, policy.attempt_timeout_s)


@dataclass(frozen=True)
class Way:
    """The targets before `depth` passed over (`passed`: each one's reason), then a call to
    `target`, answered; no target: the request fails without a call."""

    id: int  # its place in `Ways`
    route: str
    depth: int
    passed: tuple[str, ...]
    target: TargetConfig | None
    median_s: float  # the target's healthy latency (0: no call)
    sigma: float
    limit_s: float  # its call's time limit
    cache_key: tuple[str, str] | None  # its prompt cache for the route, where it caches
    skips: str | None  # the record's skips, as the chain writes them
    first: str  # the route's first target

    @property
    def key(self) -> tuple[str, int, tuple[str, ...]]:
        return self.route, self.depth, self.passed

    @property
    def record_target(self) -> str:
        """The target its record is at: the one called, or the route's first."""
        return self.target.name if self.target is not None else self.first


class Ways:
    """Every way of the scenario's routes, made as they are first asked for."""

    def __init__(
        self,
        scenario: Scenario,
        config: Config,
        routes: tuple[str, ...],
        providers: Mapping[str, Any],
        switches: Any,
    ) -> None:
        self.scenario, self.providers = scenario, providers
        self.routes = routes
        # route → its targets in the chain's order; None where it cannot fast-forward
        self.targets: list[tuple[TargetConfig, ...] | None] = [
            config.routes[name].targets
            if route_can_fast_forward(config.routes[name], switches)
            else None
            for name in routes
        ]
        self._policies = [config.routes[name].policy for name in routes]
        self._found: dict[tuple[int, int, tuple[str, ...]], Way | None] = {}
        self.all: list[Way] = []

    def find(self, route: int, passed: tuple[str, ...]) -> Way | None:
        """Route `route`'s way past these targets (reasons in order); None where the chain
        must decide (a route that cannot fast-forward, a target with a prompt of its own)."""
        key = (route, len(passed), passed)
        if key not in self._found:
            self._found[key] = self._make(route, passed)
        return self._found[key]

    def _make(self, route: int, passed: tuple[str, ...]) -> Way | None:
        targets = self.targets[route]
        if targets is None:
            return None
        name, depth = self.routes[route], len(passed)
        skipped = (Skip(targets[k].name, why, k) for k, why in enumerate(passed))
        target = targets[depth] if depth < len(targets) else None
        if target is not None and target.prompt is not None:
            return None
        median, sigma, limit = 0.0, 0.0, float("inf")
        if target is not None:
            median, sigma = self.providers[target.provider].healthy_latency(target.name)
            limit = attempt_limit(self._policies[route], depth, len(targets))
        caching = target is not None and self.scenario.routes[name].cached_share > 0
        way = Way(
            len(self.all),
            name,
            depth,
            passed,
            target,
            median,
            sigma,
            limit,
            (target.model, name) if caching and target is not None else None,
            to_json(skipped),
            targets[0].name,
        )
        self.all.append(way)
        return way

    def of_record(self, attempt: Attempt) -> Way | None:
        """The way the chain's record `attempt` is the pass of, if any: a first call answered
        after targets passed over for PASSED_OVER reasons, or a request that made no call."""
        route = self.routes.index(attempt.route)
        targets = self.targets[route]
        if targets is None or attempt.attempt_number != 1:
            return None
        skips = from_json(attempt.skips)
        passed = tuple(s.reason for s in skips)
        if any(r not in PASSED_OVER for r in passed):
            return None
        if attempt.outcome == "success":
            known = (
                attempt.served
                and attempt.breaker_state == "closed"
                and attempt.quality_error is None
                and attempt.fallback_depth == len(passed)
            )
        else:
            known = (
                attempt.outcome == "skipped"
                and attempt.error_class == "all_skipped"
                and len(passed) == len(targets)
            )
        way = self.find(route, passed) if known else None
        return way if way is not None and way.skips == attempt.skips else None
