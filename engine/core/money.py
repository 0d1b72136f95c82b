"""Money as people read it, in one format for every page, alert, report and CLI line: the sign
before the symbol ("-$0.0021", not "$-0.0021"), and as many decimals as the amount's magnitude
needs ($1,234, $12.40, $0.47, $0.0021, $0.0000042).

A whole shown beside its parts uses `format_parts`: one precision for the group, with the parts
rounded so that, as shown, they add up to the whole as shown. What fallbacks cost is such a
whole: extra cost = price difference + cache loss + re-warm (+ wasted), the price difference
being the fallback premium less the cache loss (`price_difference`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import TypeVar

__all__ = [
    *("column_digits", "digits_for", "format_change", "format_parts", "format_usd"),
    *("price_difference", "read_usd", "said_as_change", "to_decimal"),
]

Amount = Decimal | float | int | str | None
MAX_DIGITS = 9  # the store's money columns are DECIMAL(18,9): nano-dollars
Sum = TypeVar("Sum", Decimal, float)


def price_difference(fallback_premium: Sum, cache_loss: Sum) -> Sum:
    """What the backups' prices alone cost beyond the primaries': the fallback premium (cost on
    the backup less the primary's estimated cost) is this plus the cache loss (the prompt-cache
    discount the primary would have given). Negative when the backups are cheaper: a saving.
    Exact on Decimals (the store's sums); the dashboard's float sums pass through the same."""
    return fallback_premium - cache_loss


def to_decimal(value: Amount) -> Decimal:
    """`value` as a Decimal; None (and NaN or pandas' NA, which frames use for a missing
    number) is $0. An infinite amount is a bug upstream, never shown: ValueError."""
    if value is None:
        return Decimal(0)
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        if str(value) == "<NA>":  # pandas.NA, without importing pandas into the core
            return Decimal(0)
        raise ValueError(f"{value!r} is not an amount of money") from None
    if amount.is_infinite():
        raise ValueError(f"{value!r} is not an amount of money")
    return Decimal(0) if amount.is_nan() else amount


def digits_for(value: Amount) -> int:
    """Decimals that show `value` sensibly: none from $1,000, cents from a cent, and below a
    cent two significant digits (at least four decimals, at most nine). Judged on the amount
    as it would be shown, so that $0.00999 reads "$0.01" (not "$0.0100"), $999.996 "$1,000",
    and an amount that is nothing even in nano-dollars "$0.00"."""
    amount = abs(to_decimal(value))
    places = _places(amount)
    if places == 0:
        return 0
    shown = amount.quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)
    if shown == 0:
        return 2
    return min(places, _places(shown))


def column_digits(values: Iterable[Amount]) -> int:
    """Decimals for amounts shown in one column (or row) to be compared: what the finest of
    them needs, so that $0.0105 beside $0.0013 does not read $0.01 beside $0.00, but at most
    two places beyond what the largest needs (beside $1,234, $0.0021 reads "$0.00")."""
    amounts = [abs(to_decimal(v)) for v in values]
    largest = digits_for(max(amounts, default=Decimal(0)))
    finest = max((digits_for(a) for a in amounts if a), default=largest)
    return max(largest, min(finest, largest + 2))


def _places(amount: Decimal) -> int:
    if amount >= 1000:
        return 0
    if amount >= Decimal("0.01") or amount == 0:
        return 2
    leading = -amount.adjusted()  # 0.0021 → 3: the position of its first significant digit
    return min(MAX_DIGITS, max(4, leading + 1))


def format_usd(value: Amount, digits: int | None = None) -> str:
    """`value` dollars with the sign before the symbol, with `digits` decimals or, by default,
    as many as its magnitude needs (`digits_for`). An amount that rounds to zero reads "$0.00"
    (never "-$0.00")."""
    amount = to_decimal(value)
    places = digits_for(amount) if digits is None else digits
    rounded = amount.quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)
    sign = "-" if rounded < 0 else ""
    return f"{sign}${abs(rounded):,.{places}f}"


def format_change(value: Amount, digits: int | None = None) -> str:
    """What a difference in cost means to a person: "saved $0.0021" when negative, "cost
    $0.0021 more" when positive, "no difference" when it rounds to zero."""
    return said_as_change(format_usd(value, digits))


def said_as_change(shown: str) -> str:
    """A difference in cost as shown (by `format_usd`, or a part from `format_parts`) in
    `format_change`'s words: "-$0.19" is "saved $0.19", "$0.07" "cost $0.07 more", "$0.00"
    "no difference"."""
    amount = read_usd(shown)
    if not amount:
        return "no difference"
    return f"saved {shown.lstrip('-')}" if amount < 0 else f"cost {shown} more"


def format_parts(
    total: Amount, parts: Mapping[str, Amount], digits: int | None = None
) -> tuple[str, dict[str, str]]:
    """The whole and its parts, as shown: one precision for all (`digits`, else what the
    largest of them needs), the parts rounded by the largest-remainder rule so that they add
    up to the whole as shown. The parts must sum to the whole."""
    whole = to_decimal(total)
    named = {name: to_decimal(v) for name, v in parts.items()}
    places = digits if digits is not None else _group_digits([whole, *named.values()])
    unit = Decimal(1).scaleb(-places)
    shown = _largest_remainder(whole, named, unit)
    return format_usd(whole, places), {name: format_usd(v, places) for name, v in shown.items()}


def read_usd(shown: str) -> Decimal:
    """The amount a person reads in a figure `format_usd` or `format_parts` showed ("-$1,234"
    is -1234): whether a part shows as nothing, or which way it goes, is judged as shown."""
    return Decimal(shown.replace("$", "").replace(",", ""))


def _group_digits(values: list[Decimal]) -> int:
    largest = max((abs(v) for v in values), default=Decimal(0))
    return digits_for(largest)


def _largest_remainder(
    whole: Decimal, parts: dict[str, Decimal], unit: Decimal
) -> dict[str, Decimal]:
    """Each part rounded down to `unit`, and the units the rounded whole still lacks given to
    the parts with the largest remainders: no part moves by a whole unit, and they add up."""
    floors = {name: (value / unit).to_integral_value(ROUND_FLOOR) for name, value in parts.items()}
    missing = int(whole.quantize(unit, ROUND_HALF_EVEN) / unit - sum(floors.values(), Decimal(0)))
    by_remainder = sorted(parts, key=lambda name: parts[name] / unit - floors[name], reverse=True)
    for name in by_remainder[: max(0, missing)]:
        floors[name] += 1
    return {name: floors[name] * unit for name in parts}
