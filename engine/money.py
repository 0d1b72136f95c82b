"""Money as people read it: "-$0.47", not "$-0.47". Every page, alert, report and table that
shows dollars formats them here."""

from __future__ import annotations

from decimal import Decimal


def format_usd(value: Decimal | float | int | str | None, digits: int = 2) -> str:
    """`value` dollars with `digits` decimals and the sign before the symbol; None is $0."""
    amount = Decimal(str(value)) if value is not None else Decimal(0)
    return f"{'-' if amount < 0 else ''}${abs(amount):,.{digits}f}"
