"""switchover.toml's routes: targets (with their prompts), policy overrides and route options.

Split from `engine.config`, which parses the file and calls `parse_routes`; the same rules hold:
a mistake fails at start with one line naming the key (`routes.support.pii: unknown kind 'rg'`).
Also the small checks every section shares (`table_of`, `no_unknown`).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.behaviours.contracts import OutputContract
from engine.behaviours.pii import PII_KINDS, PiiPolicy
from engine.behaviours.prompts import SYSTEM_SLOT, TargetPrompt
from engine.core.errors import ConfigError
from engine.fallback.policy import POLICY_KEYS, Policy

Fail = Any  # (key, problem) -> ConfigError, naming the file

_PROMPT_KEYS = ("version", "system", "template")
# A target given as a table: `{ target = "provider/model", prompt = "NAME", context_window = N }`.
_TARGET_KEYS = ("target", "prompt", "context_window")
# A route's keys beyond its targets and policy overrides (engine.fallback.chain applies them).
_ROUTE_OPTION_KEYS = (
    "adaptive_order", "own_keys_first", "pii", "pii_restore", "output_schema", "on_quality_error",
    "on_stream_failure",
)  # fmt: skip
QUALITY_MODES = ("record", "fall_back")
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


@dataclass(frozen=True, slots=True)
class RouteConfig:
    name: str
    targets: tuple[TargetConfig, ...]
    policy: Policy
    options: RouteOptions = field(default_factory=RouteOptions)


# Names end up in header values, metric labels, file names and dashboards: printable, no
# blanks, no control characters. A model may carry the slashes and colons of real model ids
# ("meta-llama/Llama-3.3-70B", "llama3.1:8b", "anthropic.claude-v2:1"), and the fake
# providers read a fault from after a "#" ("primary#rate_limit:retry_after=1,reset=date").
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+#=,-]{0,191}")


def valid_name(name: str) -> bool:
    """A route or provider name: letters, digits, `.`, `_`, `-`; at most 64."""
    return _NAME.fullmatch(name) is not None


def valid_model(model: str) -> bool:
    return _MODEL.fullmatch(model) is not None


def parse_target(text: str) -> TargetConfig:
    """`provider/model`; the model part may itself contain slashes (`or/meta-llama/x`)."""
    provider, sep, model = text.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"{text!r} is not of the form provider/model")
    return TargetConfig(provider, model)


def parse_prompts(data: Any, fail: Fail) -> dict[str, TargetPrompt]:
    return {
        name: _prompt(name, table, fail) for name, table in table_of(data, "prompts", fail).items()
    }


def parse_routes(
    data: Any,
    *,
    providers: Mapping[str, Any],
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
    providers: Mapping[str, Any]  # engine.config.ProviderConfig, by name
    prompts: Mapping[str, TargetPrompt]
    defaults: Policy
    base_dir: Path
    fail: Any


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
    options = _route_options(table, where, context)
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
        raise fail(key, f'must be "provider/model" or {{ target = "provider/model", prompt = '
                   f'"NAME", context_window = N }} (got {raw!r})')  # fmt: skip
    try:
        target = parse_target(raw)
    except ValueError as exc:
        raise fail(key, str(exc)) from None
    if target.provider not in context.providers:
        raise fail(key, f"provider {target.provider!r} is not defined in [providers]")
    if not valid_model(target.model):
        raise fail(key, f"{target.model!r} is not a model name (no blanks or control characters)")
    return TargetConfig(target.provider, target.model, prompt, window)


def _route_options(table: Mapping[str, Any], where: str, context: _RouteContext) -> RouteOptions:
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
        flags["adaptive_order"], flags["own_keys_first"], pii, contract, mode, stream_mode
    )


def _pii(value: Any, restore: bool, where: str, fail: Any) -> PiiPolicy | None:
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


def _prompt(name: str, table: Any, fail: Any) -> TargetPrompt:
    where = f"prompts.{name}"
    table = table_of(table, where, fail)
    no_unknown(table, _PROMPT_KEYS, where, fail)
    version = table.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        raise fail(f"{where}.version", 'give the prompt a version, like "3" or "2026-11-30"')
    texts = {k: table[k] for k in ("system", "template") if k in table}
    if len(texts) != 1:
        raise fail(where, "give exactly one of system (replaces the caller's) or template")
    key, text = next(iter(texts.items()))
    if not isinstance(text, str) or not text.strip():
        raise fail(f"{where}.{key}", "must be a non-empty string")
    if key == "template" and SYSTEM_SLOT not in text:
        raise fail(f"{where}.template", f"must contain {SYSTEM_SLOT} (or use system instead)")
    return TargetPrompt(name, version.strip(), **{key: text})


def parse_policy(table: Any, base: Policy, where: str, fail: Any) -> Policy:
    table = table_of(table, where, fail)
    no_unknown(table, sorted(POLICY_KEYS), where, fail)
    for key, value in table.items():
        expected = type(getattr(base, key))
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if expected is int:
            ok = ok and isinstance(value, int)
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            kind = "an integer" if expected is int else "a number"
            raise fail(f"{where}.{key}", f"must be {kind} (got {value!r})")
    try:
        return base.replace(**table)
    except ValueError as exc:
        raise fail(where, str(exc)) from None


def table_of(value: Any, where: str, fail: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, f"must be a table (got {type(value).__name__})")
    return value


def no_unknown(table: Mapping[str, Any], allowed: Any, where: str, fail: Any) -> None:
    for key in table:
        if key not in allowed:
            raise fail(f"{where}.{key}", f"unknown key (allowed: {', '.join(allowed)})")


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


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; ConfigError in one line when it is missing or not TOML."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
