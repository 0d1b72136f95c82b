"""[prices."provider/model"] or [prices."model"]: prices that win over genai-prices', for a
model it lacks or prices wrongly. Every price says where it comes from (`source`), and amounts
are exact Decimals, never binary floats.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.config.checks import Fail, no_unknown, table_of
from engine.core.pricing import PriceOverride

_PRICE_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "source")


def parse_prices(data: Any, fail: Fail) -> Mapping[str, PriceOverride]:
    return {
        name: _price(name, table, fail) for name, table in table_of(data, "prices", fail).items()
    }


def _price(name: str, table: Any, fail: Fail) -> PriceOverride:
    where = f'prices."{name}"'
    table = table_of(table, where, fail)
    no_unknown(table, _PRICE_KEYS, where, fail)
    prices: dict[str, Decimal] = {}
    for key in _PRICE_KEYS[:4]:
        if key not in table:
            if key in ("input_mtok", "output_mtok"):
                raise fail(f"{where}.{key}", "missing: give the price in USD per million tokens")
            continue
        value = _usd(table[key])
        if value is None:
            raise fail(
                f"{where}.{key}",
                f"must be a non-negative number of USD per million tokens (got {table[key]!r})",
            )
        prices[key] = value
    source = table.get("source")
    if not isinstance(source, str) or not source.strip():
        raise fail(f"{where}.source", "say where this price comes from")
    return PriceOverride(**prices, source=source.strip())


def _usd(value: Any) -> Decimal | None:
    """A TOML number or a decimal string as an exact Decimal: 0.075 stays 0.075 (the float's
    shortest repr, not its binary expansion); None when it is not a non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(repr(value) if isinstance(value, float) else value)
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and amount >= 0 else None
