"""Which backups a what-if compares: a chain with a candidate in its backups' place
(`with_backup`), the candidate compared when none is named (`default_candidate`), and the
refusal of a candidate that is itself the failing target. Reads the scenario; runs nothing."""

from __future__ import annotations

import dataclasses

from engine.config import Config, ProviderConfig, parse_target
from engine.core.errors import ConfigError
from engine.core.pricing import known_price_provider
from simulations.whatif.scenario import Fault, Scenario


def with_backup(config: Config, backup: str) -> Config:
    """`config` with every route's second target (its first backup) replaced by `backup`, a
    `provider/model`: a provider of the config, a kind (`anthropic/…`, `openai/…`), or any
    genai-prices provider (`groq/…`, served over the OpenAI dialect)."""
    target = parse_target(backup)
    providers = dict(config.providers)
    if target.provider not in providers:
        if target.provider in ("anthropic", "openai"):
            providers[target.provider] = ProviderConfig(target.provider, target.provider, "")
        elif known_price_provider(target.provider):
            providers[target.provider] = ProviderConfig(
                target.provider, "openai", "", price_provider=target.provider
            )
        else:
            raise ConfigError(
                f"backup {backup!r}: {target.provider!r} is neither a provider of the scenario "
                "nor one genai-prices knows"
            )
    routes = {}
    for name, route in config.routes.items():
        primary, *rest = route.targets
        if primary == target:  # a route's first target cannot be its own backup: unchanged
            routes[name] = route
            continue
        later = [t for t in rest[1:] if t != target]
        # every option kept
        routes[name] = dataclasses.replace(route, targets=(primary, target, *later))
    return dataclasses.replace(config, providers=providers, routes=routes)


def default_candidate(scenario: Scenario) -> str:
    """The backup compared when none is named: the first backup no fault of the scenario hits,
    in the routes whose primary fails first (a Haiku incident's candidate is not Haiku, which
    backs up another route)."""
    routes = sorted(
        scenario.config.routes.values(),
        key=lambda route: not _fails(scenario, route.targets[0].name),
    )
    for route in routes:
        for target in route.targets[1:]:
            if not _fails(scenario, target.name):
                return target.name
    raise ConfigError(
        "the scenario's routes have no backup that does not fail: give one with --backup"
    )


def _fails(scenario: Scenario, target: str) -> bool:
    return any(fault.hits(target) for fault in _failing(scenario))


def _failing(scenario: Scenario) -> list[Fault]:
    """The faults that fail calls: a slow target still answers, and may be a backup."""
    return [fault for fault in scenario.faults if fault.kind != "slow"]


def refuse_failing(scenario: Scenario, candidates: list[str]) -> None:
    """A candidate that is itself a failing target answers nothing: refused, by name. (One a
    provider-wide fault hits through its provider stays: that its backup fails too is what
    such a comparison shows.)"""
    named = {fault.target for fault in _failing(scenario)}
    for candidate in candidates:
        if candidate in named:
            raise ConfigError(
                f"backup {candidate} is the target that fails in this scenario: it cannot back "
                "itself up; name another"
            )
