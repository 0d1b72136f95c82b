"""Money the pages show beside its parts, as text that adds up as shown: the fallback premium
(price difference + cache loss), an incident's extra cost (fallback premium + re-warm), and a
table's column of dollars at one precision (with its total, adding up as shown). Pure:
amounts in, text out; the formatting itself is engine.core.money's, so every page, alert and
report writes money the same way.

A difference in cost (a premium, a price difference, an extra cost) is said as a saving or a
cost ("saved $0.19", "cost $0.07 more"); a cache loss or a re-warm never goes below zero and
reads as an amount ("$0.07").
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import pandas as pd

from engine.core.money import (
    Amount,
    column_digits,
    digits_for,
    format_parts,
    format_usd,
    read_usd,
    said_as_change,
    to_decimal,
)


def premium_parts(price_difference: Amount, cache_loss: Amount) -> dict[str, str]:
    """The fallback premium and its two parts, at the precision the largest needs, rounded so
    that the parts as shown add up to the premium as shown."""
    price, cache = to_decimal(price_difference), to_decimal(cache_loss)
    whole, parts = format_parts(price + cache, {"price": price, "cache": cache})
    return {
        "fallback premium": said_as_change(whole),
        "price difference": said_as_change(parts["price"]),
        "cache loss": parts["cache"],
    }


def extra_cost_parts(
    price_difference: Amount, cache_loss: Amount, rewarm: Amount
) -> dict[str, str]:
    """An incident's extra cost = fallback premium + re-warm, and the premium = price
    difference + cache loss: five figures at one precision, each identity holding as shown."""
    price, cache, warm = (to_decimal(v) for v in (price_difference, cache_loss, rewarm))
    premium = price + cache
    digits = digits_for(max(abs(v) for v in (premium + warm, premium, price, cache, warm)))
    whole, parts = format_parts(
        premium + warm, {"price": price, "cache": cache, "rewarm": warm}, digits
    )
    # The premium as shown is the sum of its parts as shown, so both identities hold.
    shown_premium = format_usd(read_usd(parts["price"]) + read_usd(parts["cache"]), digits)
    return {
        "extra cost": said_as_change(whole),
        "fallback premium": said_as_change(shown_premium),
        "price difference": said_as_change(parts["price"]),
        "cache loss": parts["cache"],
        "re-warm": parts["rewarm"],
    }


def usd_column(values: Iterable[object], *, change: bool = False, missing: str = "—") -> list[str]:
    """A table's column of dollars at one precision (engine.core.money.column_digits), so that the
    rows line up and compare; as differences ("saved $0.11") when `change`. A missing amount
    reads `missing`, never None, nan or <NA>."""
    amounts = [None if pd.isna(v) else to_decimal(v) for v in values]  # type: ignore[arg-type]
    digits = column_digits(a for a in amounts if a is not None)
    return [
        missing
        if a is None
        else said_as_change(format_usd(a, digits))
        if change
        else format_usd(a, digits)
        for a in amounts
    ]


def usd_column_and_total(
    values: Iterable[object], *, change: bool = False, missing: str = "—"
) -> tuple[list[str], str]:
    """A column as `usd_column` shows it and its total, rounded together (the largest-remainder
    rule of format_parts), so that the column as shown adds up to the total as shown."""
    amounts = [None if pd.isna(v) else to_decimal(v) for v in values]  # type: ignore[arg-type]
    present = {str(i): a for i, a in enumerate(amounts) if a is not None}
    total = sum(present.values(), Decimal(0))
    whole, parts = format_parts(total, present, column_digits([*present.values(), total]))
    say = said_as_change if change else str
    column = [missing if a is None else say(parts[str(i)]) for i, a in enumerate(amounts)]
    return column, say(whole)


def usd_each(values: Iterable[object], missing: str = "—") -> list[str]:
    """Dollars in cells read one at a time (an attempt's cost), each by its own magnitude
    ("$0.012", "$0.00026"): one precision would show most of them as $0.00."""
    return [missing if pd.isna(v) else format_usd(v) for v in values]  # type: ignore[arg-type]
