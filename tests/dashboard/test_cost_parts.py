"""The money the pages show beside its parts: as shown, the parts add up to the whole, at one
precision, a saving said as a saving; a table's column of dollars at one precision, with "—"
where an amount is missing."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import numpy as np
import pandas as pd
from helpers.dashboard_pages import dollars

from dashboard.cost_parts import (
    extra_cost_parts,
    premium_parts,
    usd_column,
    usd_column_and_total,
    usd_each,
)


def _decimals(said: str) -> int:
    """The decimals of the amount in `said`; -1 for "no difference" (any precision)."""
    found = re.search(r"\$[\d,]+(?:\.(\d+))?", said)
    return -1 if found is None else len(found[1] or "")


def test_a_premium_whose_backups_were_cheaper_says_the_saving_and_the_cache_lost():
    assert premium_parts(Decimal("-0.19"), Decimal("0.07")) == {
        "fallback premium": "saved $0.12",
        "price difference": "saved $0.19",
        "cache loss": "$0.07",
    }


def test_an_extra_cost_states_its_premium_its_parts_and_the_re_warm():
    assert extra_cost_parts(Decimal("-0.19"), Decimal("0.07"), Decimal("0.02")) == {
        "extra cost": "saved $0.10",
        "fallback premium": "saved $0.12",
        "price difference": "saved $0.19",
        "cache loss": "$0.07",
        "re-warm": "$0.02",
    }


def test_the_premium_and_the_extra_cost_add_up_as_shown_over_many_random_incidents():
    rng = random.Random(22)
    for _ in range(2000):
        scale = Decimal(10) ** rng.randint(-6, 3)
        price = Decimal(rng.randint(-(10**6), 10**6)) / 10**6 * scale
        cache, warm = (Decimal(rng.randint(0, 10**6)) / 10**6 * scale for _ in range(2))
        shown = extra_cost_parts(price, cache, warm)
        read = {name: dollars(said) for name, said in shown.items()}
        assert read["extra cost"] == read["fallback premium"] + read["re-warm"], shown
        assert read["fallback premium"] == read["price difference"] + read["cache loss"], shown
        assert len({_decimals(s) for s in shown.values()} - {-1}) == 1, shown
        assert not any(s.startswith("-") for s in (shown["cache loss"], shown["re-warm"]))
        premium = premium_parts(price, cache)
        read = {name: dollars(said) for name, said in premium.items()}
        assert read["fallback premium"] == read["price difference"] + read["cache loss"], premium


def test_a_column_shares_one_precision_and_says_a_missing_amount_as_a_dash():
    column = pd.Series([Decimal("0.0105"), None, np.nan, Decimal("0.0013")], dtype=object)
    assert usd_column(column) == ["$0.0105", "—", "—", "$0.0013"]
    assert usd_column(pd.Series([12.4, pd.NA, 0.5], dtype=object)) == ["$12.40", "—", "$0.50"]


def test_a_column_of_differences_is_said_as_savings_and_costs():
    assert usd_column([-0.1075, 0.0021, 0.0], change=True) == [
        "saved $0.1075", "cost $0.0021 more", "no difference",
    ]  # fmt: skip


def test_cells_read_one_at_a_time_each_show_their_own_magnitude():
    assert usd_each([0.012, 0.00026, None, float("nan")]) == ["$0.01", "$0.00026", "—", "—"]


def test_a_column_and_its_total_add_up_as_shown_over_many_random_columns():
    rng = random.Random(36)
    for _ in range(1000):
        scale = Decimal(10) ** rng.randint(-5, 2)
        values = [Decimal(rng.randint(-(10**6), 10**6)) / 10**6 * scale
                  for _ in range(rng.randint(1, 8))]  # fmt: skip
        column, total = usd_column_and_total([*values, None])
        assert column[-1] == "—"
        assert dollars(total) == sum(dollars(c) for c in column[:-1]), (column, total)
        assert len({_decimals(s) for s in [*column[:-1], total]}) == 1, (column, total)


def test_a_column_of_differences_and_its_total_say_savings_and_costs():
    # -0.16015 alone would read $0.1602 (half-even): beside $0.0060 it gives up the unit the
    # total, $0.1661, lacks.
    assert usd_column_and_total([Decimal("-0.16015"), Decimal("-0.00598")], change=True) == (
        ["saved $0.1601", "saved $0.0060"], "saved $0.1661",
    )  # fmt: skip
    assert usd_column_and_total([Decimal("-0.1075"), Decimal("0.0021"), 0], change=True) == (
        ["saved $0.1075", "cost $0.0021 more", "no difference"], "saved $0.1054",
    )  # fmt: skip
    assert usd_column_and_total([], change=True) == ([], "no difference")
