"""A case file (TOML) → validated, frozen eval cases, each with the validators that judge it.

A bad file fails with one line naming the file and the key, as switchover.toml does
(`cases.toml: cases[2].regex: not a valid regular expression: ...`). Judging an answer returns a
short reason naming the first validator it failed; a reason never quotes the whole answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.behaviours.contracts import OutputContract
from engine.config.checks import no_unknown, read_toml, table_of
from engine.config.routes import contract_of
from engine.core.errors import ConfigError
from engine.core.messages import Message, Request

__all__ = ["DEFAULT_MIN_PASS_RATE", "VALIDATORS", "Case", "CaseSet", "load_cases", "parse_cases"]

DEFAULT_MIN_PASS_RATE = 0.9
_TOP_LEVEL = ("route", "min_pass_rate", "cases")
# In the order they judge an answer: the reason names the first that fails.
VALIDATORS = ("json_schema", "regex", "must_contain", "max_length")
_CASE_KEYS = ("name", "prompt", "system", "max_tokens", *VALIDATORS)
_REASON_LIMIT = 300  # reasons are stored and shown in tables: bounded


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    prompt: str  # the user's message
    system: str | None = None
    max_tokens: int | None = None
    json_schema: OutputContract | None = None
    regex: re.Pattern[str] | None = None
    must_contain: tuple[str, ...] = ()
    max_length: int | None = None  # characters

    def request(self) -> Request:
        return Request(
            messages=(Message.user(self.prompt),), system=self.system, max_tokens=self.max_tokens
        )

    def check(self, text: str) -> str | None:
        """Why `text` fails this case (the first validator that says no), or None: it passes."""
        if self.json_schema is not None:
            violation = self.json_schema.check_text(text)
            if violation is not None:
                return _clip(f"json_schema: {violation}")
        if self.regex is not None and self.regex.search(text) is None:
            return _clip(f"regex '{self.regex.pattern}' not found")
        for needle in self.must_contain:
            if needle not in text:
                return _clip(f"must_contain '{needle}' missing")
        if self.max_length is not None and len(text) > self.max_length:
            return f"max_length {self.max_length} exceeded ({len(text)})"
        return None


@dataclass(frozen=True, slots=True)
class CaseSet:
    cases: tuple[Case, ...]
    source: str = "cases.toml"  # the file, as named on the command line
    route: str | None = None  # the route the file is for; --route overrides it
    min_pass_rate: float = DEFAULT_MIN_PASS_RATE  # a target below it is not a backup to trust


def load_cases(path: str | Path) -> CaseSet:
    path = Path(path)
    return parse_cases(read_toml(path), source=str(path), base_dir=path.parent)


def parse_cases(
    data: Mapping[str, Any], *, source: str = "cases.toml", base_dir: Path | None = None
) -> CaseSet:
    """`base_dir`: where a `json_schema` given as a path is found (the case file's folder)."""

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {problem}")

    for key in data:
        if key not in _TOP_LEVEL:
            raise fail(key, f"unknown key (allowed: {', '.join(_TOP_LEVEL)})")
    route = data.get("route")
    if route is not None and (not isinstance(route, str) or not route.strip()):
        raise fail("route", "must name a route of switchover.toml")
    rate = data.get("min_pass_rate", DEFAULT_MIN_PASS_RATE)
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 <= rate <= 1:
        raise fail("min_pass_rate", f"must be a share between 0 and 1, like 0.9 (got {rate!r})")
    raw = data.get("cases")
    if not isinstance(raw, list) or not raw:
        raise fail("cases", "define at least one case: [[cases]] with a name, a prompt and a check")
    cases: list[Case] = []
    for i, table in enumerate(raw):
        case = _case(f"cases[{i}]", table, base_dir or Path.cwd(), fail)
        earlier = next((j for j, c in enumerate(cases) if c.name == case.name), None)
        if earlier is not None:
            raise fail(f"cases[{i}].name", f"{case.name!r} is already the name of cases[{earlier}]")
        cases.append(case)
    return CaseSet(tuple(cases), source, route, float(rate))


def _case(where: str, table: Any, base_dir: Path, fail: Any) -> Case:
    table = table_of(table, where, fail)
    no_unknown(table, _CASE_KEYS, where, fail)
    name = _text(table, "name", where, fail, required=True)
    prompt = _text(table, "prompt", where, fail, required=True)
    system = _text(table, "system", where, fail)
    if not any(key in table for key in VALIDATORS):
        raise fail(where, f"give at least one check: {', '.join(VALIDATORS)}")
    schema = table.get("json_schema")
    return Case(
        name=name,  # type: ignore[arg-type]
        prompt=prompt,  # type: ignore[arg-type]
        system=system,
        max_tokens=_positive(table, "max_tokens", where, fail),
        json_schema=None
        if schema is None
        else contract_of(schema, f"{where}.json_schema", base_dir, fail),
        regex=_regex(table.get("regex"), f"{where}.regex", fail),
        must_contain=_strings(table.get("must_contain"), f"{where}.must_contain", fail),
        max_length=_positive(table, "max_length", where, fail),
    )


def _text(
    table: Mapping[str, Any], key: str, where: str, fail: Any, *, required: bool = False
) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{where}.{key}", "must be a non-empty string")
    return value


def _positive(table: Mapping[str, Any], key: str, where: str, fail: Any) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise fail(f"{where}.{key}", f"must be a positive integer (got {value!r})")
    return value


def _regex(value: Any, where: str, fail: Any) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise fail(where, "must be a regular expression, as a string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise fail(where, f"not a valid regular expression: {exc}") from None


def _strings(value: Any, where: str, fail: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s for s in value):
        raise fail(where, 'must be a non-empty list of non-empty strings, like ["refund"]')
    return tuple(value)


def _clip(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"
