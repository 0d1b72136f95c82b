"""[prompts.NAME]: a target's own prompt, versioned, that a route's target names
(`{ target = "provider/model", prompt = "NAME" }`; engine.config.routes resolves the name).

Each gives exactly one of `system` (replaces the caller's) or `template` (wraps it around
{SYSTEM_SLOT}); engine.behaviours.prompts applies it.
"""

from __future__ import annotations

from typing import Any

from engine.behaviours.prompts import SYSTEM_SLOT, TargetPrompt
from engine.config.checks import Fail, no_unknown, table_of

_PROMPT_KEYS = ("version", "system", "template")


def parse_prompts(data: Any, fail: Fail) -> dict[str, TargetPrompt]:
    return {
        name: _prompt(name, table, fail) for name, table in table_of(data, "prompts", fail).items()
    }


def _prompt(name: str, table: Any, fail: Fail) -> TargetPrompt:
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
