"""SQL text: the one way a value becomes a SQL literal, for the statements DuckDB takes no
parameter in. Pure: used by the store (ATTACH, COPY) and the published snapshots' readers and
writers (COPY, views over pinned files) alike."""

from __future__ import annotations


def sql_string(value: str) -> str:
    """A SQL string literal, for the few places DuckDB takes no parameter (file paths in
    ATTACH, COPY and view definitions). Never used for a value that came from a user."""
    return "'" + value.replace("'", "''") + "'"
