"""What the incident windows read from the store beyond their evidence (engine.alerts.incidents
decides with it): what a target did in stretches between and after its bad minutes, whether it
already failed the minute before a window's first bad one, and the exact time of a window's
last fault. Each is one statement over a small registered table, joined on the minute
(equality joins, however many windows); nothing here decides anything."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import pyarrow as pa

from engine.core.fault_families import BY_NAME, FAMILIES

MINUTE = timedelta(minutes=1)
_NAMES = tuple(f.name for f in FAMILIES)
_UTC = pa.timestamp("us", tz="UTC")


def _family_sum(family_sum: str) -> str:
    return "sum(r." + family_sum.replace(" + ", " + r.") + ")"


@dataclass(frozen=True, slots=True)
class Stretch:
    """What a target did in a stretch of minutes between or after bad ones."""

    minutes: int  # informative: with any attempt at the target
    answered: int
    attempts: int
    faults: dict[str, int]  # per family, below the fault rate (no minute of it was bad)


NOTHING = Stretch(0, 0, 0, {})
Stretches = dict[tuple[str, datetime, datetime], Stretch]  # (target, lo, hi) → what it did

# The minutes of each stretch in which the target took any attempt, what it answered and its
# faults of each family. Stretches are short (under engine.alerts.incidents.QUIET).
_STRETCHES = """
    WITH minutes AS (
        SELECT id, target,
            unnest(generate_series(lo, hi - INTERVAL 1 MINUTE, INTERVAL 1 MINUTE)) AS bucket
        FROM stretches
    )
    SELECT m.id, count(DISTINCT m.bucket) AS informative,
        sum(r.attempts - r.failed_attempts)::BIGINT AS answered, sum(r.attempts)::BIGINT,
        {family_sums}
    FROM minutes m JOIN rollup_minute r ON r.bucket = m.bucket AND r.target = m.target
    WHERE r.attempts > 0
    GROUP BY m.id
""".format(
    family_sums=", ".join(f"{_family_sum(f.rollup_sum)}::BIGINT AS {f.name}" for f in FAMILIES)
)
_STRETCH_ROWS = pa.schema([("id", pa.int64()), ("target", pa.string()), ("lo", _UTC), ("hi", _UTC)])


def stretches(
    con: duckdb.DuckDBPyConnection, wanted: Iterable[tuple[str, datetime, datetime]]
) -> Stretches:
    """What each target did in each (target, lo, hi) of `wanted` (NOTHING where it took no
    attempt)."""
    ordered = sorted(s for s in set(wanted) if s[1] < s[2])
    if not ordered:
        return {}
    rows = [{"id": i, "target": t, "lo": lo, "hi": hi} for i, (t, lo, hi) in enumerate(ordered)]
    con.register("stretches", pa.Table.from_pylist(rows, schema=_STRETCH_ROWS))
    try:
        seen = {
            i: Stretch(n, answered, attempts, dict(zip(_NAMES, faults, strict=True)))
            for i, n, answered, attempts, *faults in con.execute(_STRETCHES).fetchall()
        }
    finally:
        con.unregister("stretches")
    return {stretch: seen.get(i, NOTHING) for i, stretch in enumerate(ordered)}


# The windows whose target already failed in the family's way in the minute before its first
# bad minute, at `share` of its attempts at least.
_LEAD_IN = """
    SELECT w.id FROM firsts w JOIN rollup_minute r
        ON r.target = w.target AND r.bucket = w.bucket - INTERVAL 1 MINUTE
    GROUP BY w.id, w.family
    HAVING CASE w.family {cases} END >= greatest(1, $share * sum(r.attempts))
""".format(cases=" ".join(f"WHEN '{f.name}' THEN {_family_sum(f.rollup_sum)}" for f in FAMILIES))
_FIRSTS = pa.schema(
    [("id", pa.int64()), ("target", pa.string()), ("family", pa.string()), ("bucket", _UTC)]
)


def failed_the_minute_before(
    con: duckdb.DuckDBPyConnection, firsts: list[tuple[str, str, datetime]], share: float
) -> set[int]:
    """The indices of the (target, family, first bad minute) of `firsts` whose target failed
    that way in the minute before, at `share` of its attempts then (one fault at least)."""
    if not firsts:
        return set()
    rows = [{"id": i, "target": t, "family": f, "bucket": b} for i, (t, f, b) in enumerate(firsts)]
    con.register("firsts", pa.Table.from_pylist(rows, schema=_FIRSTS))
    try:
        return {i for (i,) in con.execute(_LEAD_IN, {"share": share}).fetchall()}
    finally:
        con.unregister("firsts")


# The exact time of each window's last fault, from the attempts of its last bad minute and the
# minute after it.
_LAST_FAULTS = """
    SELECT w.id, max(a.started_at)
    FROM last_minutes w JOIN attempts a
        ON a.target = w.target AND (time_bucket(INTERVAL 1 MINUTE, a.started_at) = w.bucket
            OR time_bucket(INTERVAL 1 MINUTE, a.started_at) = w.bucket + INTERVAL 1 MINUTE)
    WHERE a.started_at >= $lo AND a.started_at < $hi AND list_contains(w.kinds, a.fault_kind)
    GROUP BY w.id
"""
_LAST_MINUTES = pa.schema([
    ("id", pa.string()), ("target", pa.string()), ("bucket", _UTC),
    ("kinds", pa.list_(pa.string())),
])  # fmt: skip


def last_faults(
    con: duckdb.DuckDBPyConnection, lasts: list[tuple[str, str, str, datetime]]
) -> dict[str, datetime]:
    """For each (id, target, family, last bad minute) of `lasts`: the start of the family's last
    faulty attempt of the target in that minute or the next (ids without one are absent)."""
    if not lasts:
        return {}
    rows = [
        {"id": i, "target": t, "bucket": b, "kinds": list(BY_NAME[f].fault_kinds)}
        for i, t, f, b in lasts
    ]
    span = {"lo": min(b for *_, b in lasts), "hi": max(b for *_, b in lasts) + 2 * MINUTE}
    con.register("last_minutes", pa.Table.from_pylist(rows, schema=_LAST_MINUTES))
    try:
        return dict(con.execute(_LAST_FAULTS, span).fetchall())
    finally:
        con.unregister("last_minutes")
