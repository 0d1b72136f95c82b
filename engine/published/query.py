"""A named query over the published snapshots: its SQL, the snapshots it reads, and its
parameters with their defaults. Values are bound by DuckDB (`$name`), never formatted in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REQUIRED = object()  # a parameter with no default


@dataclass(frozen=True, slots=True)
class Query:
    sql: str
    reads: tuple[str, ...]  # the snapshots the SQL names
    params: Mapping[str, Any] = field(default_factory=dict)  # name → default, or REQUIRED

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.params)
        if unknown:
            raise TypeError(f"unknown parameters {sorted(unknown)}; known: {sorted(self.params)}")
        bound = {**self.params, **given}
        missing = [name for name, value in bound.items() if value is REQUIRED]
        if missing:
            raise TypeError(f"missing parameters {missing}")
        return bound
