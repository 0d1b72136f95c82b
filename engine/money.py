"""Money as people read it: "-$0.47", not "$-0.47". Every page, alert, report and table that
shows dollars formats them here."""

from __future__ import annotations

from decimal import Decimal


def format_usd(value: Decimal | float | int | str | None, digits: int = 2) -> str:
    """`value` dollars with `digits` decimals and the sign before the symbol; None is $0."""
    amount = Decimal(str(value)) if value is not None else Decimal(0)
    return f"{'-' if amount < 0 else ''}${abs(amount):,.{digits}f}"


def format_change(value: Decimal | float | int | str | None, digits: int = 4) -> str:
    """What a difference in cost means to a person: "saved $0.0168" when negative, "cost
    $0.0168 more" when positive, "no difference" at zero (at `digits` decimals)."""
    amount = Decimal(str(value)) if value is not None else Decimal(0)
    shown = format_usd(abs(amount), digits)
    if shown == format_usd(0, digits):
        return "no difference"
    return f"saved {shown}" if amount < 0 else f"cost {shown} more"
