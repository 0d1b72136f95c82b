"""[routes.NAME]: a route's targets (with their prompts), its policy overrides and its options.

`engine.config.parse_config` calls `parse_routes` once the providers and prompts are known; the
same rule holds as everywhere in the file: a mistake fails at start with one line naming the key
(`routes.support.pii: unknown kind 'rg'`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.behaviours.contracts import OutputContract
from engine.behaviours.pii import PII_KINDS, PiiPolicy
from engine.behaviours.prompts import TargetPrompt
from engine.config.checks import Fail, no_unknown, table_of, valid_model, valid_name
from engine.config.policy import parse_policy
from engine.config.providers import ProviderConfig
from engine.fallback.policy import POLICY_KEYS, Policy

# A target given as a table: `{ target = "provider/model", prompt = "NAME", context_window = N }`.
_TARGET_KEYS = ("target", "prompt", "context_window")
# A route's keys beyond its targets and policy overrides (engine.fallback.chain applies them).
_ROUTE_OPTION_KEYS = (
    "adaptive_order", "own_keys_first", "pii", "pii_restore", "output_schema", "on_quality_error",
    "on_stream_failure",
)  # fmt: skip
QUALITY_MODES = ("record", "fall_back")
LEARNED = "learned"  # first_token_timeout_s = "learned" (engine.fallback.learned_limits)
# A committed stream that fails: the caller's in-band error, or a continuation elsewhere.
STREAM_FAILURE_MODES = ("error", "continue")


@dataclass(frozen=True, slots=True)
class TargetConfig:
    provider: str
    model: str
    # The target's own prompt ([prompts.NAME]); not part of its identity: a breaker, a price
    # and a backup candidate are the same whatever the prompt.
    prompt: TargetPrompt | None = field(default=None, compare=False)
    # Tokens the model takes in, as the operator says; None: genai-prices' figure, if any.
    # It decides where a context overflow may fall back (engine.fallback.context_windows).
    context_window: int | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass(frozen=True, slots=True)
class RouteOptions:
    """What a route does beyond the fallback policy; every option is off by default."""

    adaptive_order: bool = False  # the healthiest target first (engine.fallback.order)
    own_keys_first: bool = False  # own-key (BYOK) targets before managed ones
    pii: PiiPolicy | None = None  # mask personal data before any target sees it
    contract: OutputContract | None = None  # the JSON Schema answers must meet
    on_quality_error: str = "record"  # or "fall_back": retry once, then the next target
    on_stream_failure: str = "error"  # or "continue": finish it on a later target
    # first_token_timeout_s = "learned": per target, from its recorded first tokens, below the
    # static limit (engine.fallback.learned_limits)
    learned_first_token: bool = False


@dataclass(frozen=True, slots=True)
class RouteConfig:
    name: str
    targets: tuple[TargetConfig, ...]
    policy: Policy
    options: RouteOptions = field(default_factory=RouteOptions)


def parse_target(text: str) -> TargetConfig:
    """`provider/model`; the model part may itself contain slashes (`or/meta-llama/x`)."""
    provider, sep, model = text.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"{text!r} is not of the form provider/model")
    return TargetConfig(provider, model)


def parse_routes(
    data: Any,
    *,
    providers: Mapping[str, ProviderConfig],
    prompts: Mapping[str, TargetPrompt],
    defaults: Policy,
    base_dir: Path,
    fail: Fail,
) -> dict[str, RouteConfig]:
    context = _RouteContext(providers, prompts, defaults, base_dir, fail)
    return {
        name: _route(name, table, context) for name, table in table_of(data, "routes", fail).items()
    }


@dataclass(frozen=True, slots=True)
class _RouteContext:
    providers: Mapping[str, ProviderConfig]  # by name
    prompts: Mapping[str, TargetPrompt]
    defaults: Policy
    base_dir: Path
    fail: Fail


def _route(name: str, table: Any, context: _RouteContext) -> RouteConfig:
    where, fail = f"routes.{name}", context.fail
    if not valid_name(name):
        raise fail(where, "a route name is letters, digits, '.', '_' and '-' (at most 64)")
    table = table_of(table, where, fail)
    no_unknown(table, ("targets", *_ROUTE_OPTION_KEYS, *sorted(POLICY_KEYS)), where, fail)
    raw_targets = table.get("targets")
    if not isinstance(raw_targets, list) or not raw_targets:
        raise fail(f"{where}.targets", 'must be a non-empty list like ["claude/claude-haiku-4-5"]')
    targets: list[TargetConfig] = []
    for i, raw in enumerate(raw_targets):
        target = _target(f"{where}.targets[{i}]", raw, context)
        if target in targets:
            raise fail(f"{where}.targets[{i}]", f"{target.name!r} is listed twice")
        targets.append(target)
    overrides = {k: v for k, v in table.items() if k in POLICY_KEYS}
    learned = overrides.get("first_token_timeout_s") == LEARNED
    if learned:  # the static limit stays the [policy] one: the ceiling of what is learned
        del overrides["first_token_timeout_s"]
    options = _route_options(table, where, context, learned_first_token=learned)
    return RouteConfig(
        name, tuple(targets), parse_policy(overrides, context.defaults, where, fail), options
    )


def _target(key: str, raw: Any, context: _RouteContext) -> TargetConfig:
    """`"provider/model"`, or `{ target = "provider/model", prompt = "NAME", context_window =
    N }` (both keys optional)."""
    fail, prompt, window = context.fail, None, None
    if isinstance(raw, Mapping):
        no_unknown(raw, _TARGET_KEYS, key, fail)
        window = raw.get("context_window")
        if window is not None and (
            not isinstance(window, int) or isinstance(window, bool) or window <= 0
        ):
            raise fail(f"{key}.context_window", f"must be a number of tokens (got {window!r})")
        name = raw.get("prompt")
        if name is not None and name not in context.prompts:
            known = ", ".join(sorted(context.prompts)) or "none defined"
            raise fail(f"{key}.prompt", f"no [prompts.{name}] (defined: {known})")
        prompt = context.prompts.get(name) if name is not None else None
        raw = raw.get("target")
    if not isinstance(raw, str):
        raise fail(
            key,
            f'must be "provider/model" or {{ target = "provider/model", prompt = '
            f'"NAME", context_window = N }} (got {raw!r})',
        )
    try:
        target = parse_target(raw)
    except ValueError as exc:
        raise fail(key, str(exc)) from None
    if target.provider not in context.providers:
        raise fail(key, f"provider {target.provider!r} is not defined in [providers]")
    if not valid_model(target.model):
        raise fail(key, f"{target.model!r} is not a model name (no blanks or control characters)")
    return TargetConfig(target.provider, target.model, prompt, window)


def _route_options(
    table: Mapping[str, Any], where: str, context: _RouteContext, *, learned_first_token: bool
) -> RouteOptions:
    fail = context.fail
    flags = {}
    for key in ("adaptive_order", "own_keys_first", "pii_restore"):
        value = table.get(key, False)
        if not isinstance(value, bool):
            raise fail(f"{where}.{key}", f"must be true or false (got {value!r})")
        flags[key] = value
    pii = _pii(table.get("pii", False), flags["pii_restore"], f"{where}.pii", fail)
    if flags["pii_restore"] and pii is None:
        raise fail(f"{where}.pii_restore", "restores what `pii` masks: set `pii` too")
    mode = table.get("on_quality_error", "record")
    if mode not in QUALITY_MODES:
        raise fail(f"{where}.on_quality_error", f"must be one of {', '.join(QUALITY_MODES)}")
    stream_mode = table.get("on_stream_failure", "error")
    if stream_mode not in STREAM_FAILURE_MODES:
        raise fail(
            f"{where}.on_stream_failure", f"must be one of {', '.join(STREAM_FAILURE_MODES)}"
        )
    schema = table.get("output_schema")
    contract = (
        None
        if schema is None
        else contract_of(schema, f"{where}.output_schema", context.base_dir, fail)
    )
    return RouteOptions(
        flags["adaptive_order"],
        flags["own_keys_first"],
        pii,
        contract,
        mode,
        stream_mode,
        learned_first_token,
    )


def _pii(value: Any, restore: bool, where: str, fail: Fail) -> PiiPolicy | None:
    """`true` masks every kind, a list the kinds named, `false` (the default) nothing."""
    if value is False:
        return None
    if value is True:
        return PiiPolicy(restore=restore)
    if not isinstance(value, list) or not value or not all(isinstance(k, str) for k in value):
        raise fail(where, f"must be true, false or a list of kinds from {', '.join(PII_KINDS)}")
    unknown = [k for k in value if k not in PII_KINDS]
    if unknown:
        raise fail(where, f"unknown kind {unknown[0]!r} (kinds: {', '.join(PII_KINDS)})")
    return PiiPolicy(frozenset(value), restore=restore)


def contract_of(value: Any, where: str, base_dir: Path, fail: Fail) -> OutputContract:
    """A JSON Schema given inline (a table) or as the path of a JSON file (relative to
    `base_dir`, the folder of the file that names it): a route's `output_schema`, an eval
    case's `json_schema`."""
    if isinstance(value, str):
        path = Path(value) if Path(value).is_absolute() else base_dir / value
        try:
            value = json.loads(path.read_text())
        except FileNotFoundError:
            raise fail(where, f"no such file: {path}") from None
        except (OSError, ValueError) as exc:
            raise fail(where, f"{path} is not a JSON Schema file: {exc}") from None
    if not isinstance(value, Mapping):
        raise fail(where, "must be a JSON Schema as a table, or the path of a .json file")
    try:
        return OutputContract(value)
    except ValueError as exc:
        raise fail(where, str(exc)) from None
