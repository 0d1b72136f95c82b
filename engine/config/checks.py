"""The small checks every section of switchover.toml shares: reading the file, a table and its
keys, and the names that end up in headers, labels and file names.

Each section's parser takes `fail(key, problem)`, which builds the one-line ConfigError naming
the file and the key; nothing here knows which section it checks.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.core.errors import ConfigError

Fail = Callable[[str, str], Exception]  # (key, problem) -> ConfigError, naming the file

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


def table_of(value: Any, where: str, fail: Fail) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, f"must be a table (got {type(value).__name__})")
    return value


def no_unknown(table: Mapping[str, Any], allowed: Any, where: str, fail: Fail) -> None:
    for key in table:
        if key not in allowed:
            raise fail(f"{where}.{key}", f"unknown key (allowed: {', '.join(allowed)})")


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables; ConfigError in one line when it is missing or not TOML."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
