"""The whole story of one request, for the Explorer: every target of its route the chain came
to, in the request's order, with what happened there (answered; failed, with the error class
and HTTP status; skipped, with why) and, after each attempt, the decision taken and why, in
words ("529 overloaded: the provider's fault → retried once, then fell back to the next target").

A skipped target made no call, so it is no attempt row: the chain records it on the request's
attempts (`skips`, engine.core.skips), with its place in the order; the story puts it back in
its place. The words are the tables below (decisions, faults) and engine.core.skips.SKIP_WORDS
(skip reasons): what the story says is read from them, never from a ladder beside them.

Pure: the request's attempts (a DataFrame of `request_attempts`) in, a table out; no Streamlit,
no queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.core.skips import Skip, from_json

STORY_COLUMNS = ["#", "target", "attempt", "what happened", "then", "why"]

# Whose fault a failure was, by the attempt's fault kind (engine.core.errors).
FAULTS: Mapping[str, str] = {
    "request": "the request's fault",
    "suspected_request": "the request's, it seems: the same failure as on the first target",
    "provider": "the provider's fault",
    "account": "the account or key is broken",
    "drill": "a fault drill's invalid key (no call made)",
    "rate_limit": "rate limited",
    "ambiguous": "an answer that cannot be used (the provider may have done the work)",
    "quality": "an answer that broke the route's output contract",
    "internal": "our own failure, before anything was sent",
}

# The situations a decision is explained in, most telling first (`_situation`): the attempt was
# itself the retry; it was on a backup; it was rate limited; anything else ("").
AFTER_RETRY, ON_BACKUP, RATE_LIMITED, OTHERWISE = "after_retry", "backup", "rate_limit", ""


@dataclass(frozen=True, slots=True)
class DecisionWords:
    then: str  # the decision, short ("fell back")
    why: Mapping[str, str]  # why, by situation; OTHERWISE always present


# What the chain did after an attempt (engine.core.attempt.Step, as recorded), and why.
DECISIONS: Mapping[str, DecisionWords] = {
    "served": DecisionWords("served", {OTHERWISE: "its answer went to the caller"}),
    "retry": DecisionWords(
        "retried", {OTHERWISE: "retried the same target once, after a short backoff"}
    ),
    "wait_and_retry": DecisionWords(
        "waited, retried",
        {OTHERWISE: "waited out its short Retry-After and retried the same target"},
    ),
    "fall_back": DecisionWords(
        "fell back",
        {
            AFTER_RETRY: "retried once, then fell back to the next target",
            ON_BACKUP: "fell back to the next target: a backup gets one try",
            RATE_LIMITED: "fell back to the next target: no Retry-After short enough to wait",
            OTHERWISE: "fell back to the next target without a retry: the route allows none, "
            "its breaker opened, the error rules one out, or one would not fit the time budget",
        },
    ),
    "fall_back_now": DecisionWords(
        "fell back at once",
        {
            OTHERWISE: "fell back to the next target at once, no retry: its breaker opens for a "
            "long cool-down"
        },
    ),
    "fall_back_larger_context": DecisionWords(
        "fell back to a larger window",
        {OTHERWISE: "only a target with a larger context window can take it: on to the next one"},
    ),
    "fail_fast": DecisionWords(
        "failed fast",
        {OTHERWISE: "a backup would fail the same way: none was tried, the caller got the error"},
    ),
    "give_up": DecisionWords(
        "gave up",
        {
            AFTER_RETRY: "retried once, then gave up: no target left to try",
            OTHERWISE: "gave up: no target left to try",
        },
    ),
    "continue_elsewhere": DecisionWords(
        "continued elsewhere",
        {OTHERWISE: "the caller held part of the answer: a later target went on with it"},
    ),
    "in_band_error": DecisionWords(
        "in-band error",
        {OTHERWISE: "the answer had begun, so no fallback: the stream ended with an error event"},
    ),
    "cancelled": DecisionWords("cancelled", {OTHERWISE: "the caller went away"}),
}
_RETRIES = frozenset({"retry", "wait_and_retry"})


def story(chain: pd.DataFrame) -> pd.DataFrame:
    """One row per target the request came to, in its order, and one more per retry: its place
    ("#", "—" for a target the order left out), the attempt number ("—" for a skip), what
    happened, the decision taken after it and why. Never None, nan or <NA>."""
    rows = chain.sort_values("attempt_number").to_dict("records")
    entries = [*_attempts(rows), *_skips(rows)]
    entries.sort(key=lambda e: (e.depth is None, e.depth or 0, e.number))
    return pd.DataFrame([e.shown() for e in entries], columns=STORY_COLUMNS)


def passed_over(chain: pd.DataFrame) -> list[Skip]:
    """Every target the request passed over without a call, as recorded."""
    if "skips" not in chain:  # a snapshot published before migration 18
        return []
    return [s for text in chain["skips"] for s in from_json(text)]


@dataclass(frozen=True, slots=True)
class _Entry:
    depth: int | None
    number: int  # the attempt number; 0 for a skip (never at an attempt's depth)
    target: str
    happened: str
    then: str = "—"
    why: str = "—"

    def shown(self) -> list[str]:
        place = "—" if self.depth is None else str(self.depth + 1)
        attempt = str(self.number) if self.number else "—"
        return [place, self.target, attempt, self.happened, self.then, self.why]


def _attempts(rows: list[dict[str, Any]]) -> list[_Entry]:
    entries = []
    for i, row in enumerate(rows):
        if row["outcome"] == "skipped":  # a request that made no call: its skips tell it
            if not _text(row.get("skips")):  # recorded before the skips were
                entries.append(_Entry(0, 0, row["target"], f"no call: {_said(row)}"))
            continue
        words = DECISIONS.get(row["decision"])
        then = words.then if words else str(row["decision"])
        why = words.why.get(_situation(row, rows[:i]), words.why[OTHERWISE]) if words else "—"
        if row["outcome"] == "error":
            why = f"{_label(row)}: {FAULTS.get(_text(row['fault_kind']), 'a failure')} → {why}"
        depth, number = int(row["fallback_depth"]), int(row["attempt_number"])
        entries.append(_Entry(depth, number, row["target"], _happened(row), then, why))
    return entries


def _skips(rows: list[dict[str, Any]]) -> list[_Entry]:
    entries = []
    for row in rows:
        for skip in from_json(row.get("skips")):
            why = f"{skip.why} ({skip.detail})" if skip.detail else skip.why
            entries.append(_Entry(skip.depth, 0, skip.target, f"skipped: {skip.name}", why=why))
    return entries


def _situation(row: dict[str, Any], before: list[dict[str, Any]]) -> str:
    """Which of a decision's explanations fits the attempt (DECISIONS)."""
    same = [b for b in before if b["target"] == row["target"] and b["outcome"] != "skipped"]
    if same and same[-1]["decision"] in _RETRIES:
        return AFTER_RETRY
    if int(row["fallback_depth"]) > 0:
        return ON_BACKUP
    return RATE_LIMITED if row["fault_kind"] == "rate_limit" else OTHERWISE


def _happened(row: dict[str, Any]) -> str:
    match row["outcome"]:
        case "success":
            broke = _text(row.get("quality_error"))
            return "answered (HTTP 200)" + (f", breaking its contract: {broke}" if broke else "")
        case "error":
            status = _status(row)
            return f"failed: {_said(row)} " + (f"(HTTP {status})" if status else "(no HTTP status)")
        case "cancelled":
            return "cancelled: the caller went away"
    return str(row["outcome"])


def _label(row: dict[str, Any]) -> str:
    """ "529 overloaded", or the class alone when no status line came (a reset, a timeout)."""
    status = _status(row)
    return f"{status} {_said(row)}" if status else _said(row)


def _said(row: dict[str, Any]) -> str:
    return _text(row.get("error_class")) or _text(row.get("error_message")) or "unknown"


def _status(row: dict[str, Any]) -> int | None:
    status = row.get("http_status")
    return None if status is None or pd.isna(status) else int(status)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
