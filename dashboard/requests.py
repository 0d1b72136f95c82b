"""One request's attempts as a person reads them, for the Explorer: who answered it, and when
a later target finished a stream that broke mid-answer (engine.fallback.continuation), the parts of
that
one answer. Pure: the request's attempts (a DataFrame of `request_attempts`) in, text and a
table out; no Streamlit, no queries.
"""

from __future__ import annotations

from decimal import Decimal

import pandas as pd

from dashboard.request_story import passed_over
from engine.core.money import format_parts, to_decimal

# How the failure that ended a part reads in a sentence ("after a cut at 412 characters").
_FAILURES = {"stream_cut": "a cut", "stream_stalled": "a stall"}
PART_COLUMNS = ["part", "attempt_number", "target", "from_character", "output_tokens",
                "tokens_estimated", "cost"]  # fmt: skip


def verdict(chain: pd.DataFrame) -> str:
    """One sentence: the route, how many attempts (the calls made; the targets skipped beside
    them), and who answered (in parts, if continued)."""
    calls = int((chain["outcome"] != "skipped").sum())
    head = f"Route **{chain.iloc[0]['route']}**: {_attempts(calls)}{_skipped(chain)}, "
    answered = chain[chain["served"] & (chain["outcome"] == "success")]
    if answered.empty:
        return head + "**not answered**" + _broken_off(chain) + "."
    pieces = _pieces(chain)
    if len(pieces) < 2:
        return head + f"answered by **{answered.iloc[-1]['target']}**."
    told = [f"one answer in {len(pieces)} parts: begun by **{pieces.iloc[0]['target']}**"]
    for i in range(1, len(pieces)):
        before, part = pieces.iloc[i - 1], pieces.iloc[i]
        told.append(
            f"{'continued' if i == 1 else 'then'} on **{part['target']}** after "
            f"{_failure(before['error_class'])} at {_count(part['continued_chars'])} characters"
        )
    return head + ", ".join(told) + "."


def parts(chain: pd.DataFrame) -> pd.DataFrame | None:
    """The parts of a continued request's answer, one row each (the attempts whose text the
    caller got, in order), their cost as shown; None for any other request."""
    pieces = _continued(chain)
    if pieces is None:
        return None
    _, costs = _costs(pieces)
    shown = pieces.assign(
        part=range(1, len(pieces) + 1),
        from_character=[0, *(_count(c) for c in pieces["continued_chars"].iloc[1:])],
        cost=costs,
    )
    return shown[PART_COLUMNS].reset_index(drop=True)


def parts_cost(chain: pd.DataFrame) -> str | None:
    """ "The answer cost $0.00026: $0.00017 + $0.00009": the parts at one precision, adding
    up as shown to the total beside them. None unless the request was continued."""
    pieces = _continued(chain)
    if pieces is None:
        return None
    total, costs = _costs(pieces)
    addends = " + ".join(costs)
    if pieces["cost_usd"].isna().any():
        return f"The priced parts of the answer cost {total} ({addends})."
    return f"The answer cost {total}: {addends}, each part priced by its own usage."


def _costs(pieces: pd.DataFrame) -> tuple[str, list[str]]:
    """The priced parts' total and each part's cost as shown (engine.core.money.format_parts: one
    precision, adding up); "no known price" for a part whose model has none."""
    priced = {str(i): to_decimal(c) for i, c in enumerate(pieces["cost_usd"]) if pd.notna(c)}
    total, shown = format_parts(sum(priced.values(), Decimal(0)), priced)
    return total, [shown.get(str(i), "no known price") for i in range(len(pieces))]


def _continued(chain: pd.DataFrame) -> pd.DataFrame | None:
    pieces = _pieces(chain)
    if len(pieces) < 2 or pieces.iloc[-1]["outcome"] != "success":
        return None
    return pieces


def present(chain: pd.DataFrame, columns: list[str]) -> list[str]:
    """Those of `columns` that hold a value for some attempt of the request (none of them in
    a snapshot published before they existed): a column of blanks says nothing."""
    return [c for c in columns if c in chain and chain[c].notna().any()]


def _pieces(chain: pd.DataFrame) -> pd.DataFrame:
    """The attempts whose text reached the caller, in order, when the answer was continued
    (a served part followed by served continuations); the served attempt alone otherwise."""
    if "continues_attempt" not in chain:  # a snapshot published before migration 11
        return chain[chain["served"]].head(1)
    continued = chain["continues_attempt"].notna() & chain["served"]
    if not continued.any():
        return chain[chain["served"]].head(1)
    return chain[chain["served"]].sort_values("attempt_number")


def _broken_off(chain: pd.DataFrame) -> str:
    """For a stream that broke mid-answer and that no backup could continue: where it broke."""
    if "continues_attempt" not in chain:
        return ""
    tried = chain[chain["continues_attempt"].notna()]
    first = chain[chain["decision"] == "continue_elsewhere"]
    if tried.empty or first.empty:
        return ""
    chars = _count(tried.iloc[0]["continued_chars"])
    return (
        f": the stream broke off after {_failure(first.iloc[0]['error_class'])} at {chars} "
        f"characters, and no backup could continue it"
    )


def _failure(error_class: object) -> str:
    if not isinstance(error_class, str) or not error_class:
        return "a failure"
    return _FAILURES.get(error_class, f"an error ({error_class})")


def _count(value: object) -> int:
    return 0 if pd.isna(value) else int(value)  # type: ignore[arg-type]


def _attempts(n: int) -> str:
    return "no attempt" if n == 0 else f"{n} attempt" if n == 1 else f"{n} attempts"


def _skipped(chain: pd.DataFrame) -> str:
    """ " (1 target skipped)" beside the attempts, when the chain passed any over."""
    n = len(passed_over(chain))
    return "" if n == 0 else f" ({n} target skipped)" if n == 1 else f" ({n} targets skipped)"
