"""engine.core.money: dollars as people read them, one format for every page, alert, report and CLI
line; a whole and its parts that add up as shown."""

from __future__ import annotations

import random
from decimal import Decimal

import pandas as pd
import pytest

from engine.core.money import (
    column_digits,
    digits_for,
    format_change,
    format_parts,
    format_usd,
    read_usd,
    said_as_change,
    to_decimal,
)


def _value(shown: str) -> Decimal:
    """ "-$1,234.50" → Decimal("-1234.50"): what a reader takes a shown amount to be."""
    return Decimal(shown.replace("$", "").replace(",", ""))


def _decimals(shown: str) -> int:
    return len(shown.partition(".")[2])


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Decimal("1234.4"), "$1,234"),
        (Decimal("1234567.891"), "$1,234,568"),
        (Decimal("12.4"), "$12.40"),
        (Decimal("0.47"), "$0.47"),
        (Decimal("0.01"), "$0.01"),
        (Decimal("0.0021"), "$0.0021"),
        (Decimal("0.00214"), "$0.0021"),
        (Decimal("0.000255"), "$0.00026"),
        (Decimal("0.0000042"), "$0.0000042"),
        (Decimal("0.000000004"), "$0.000000004"),
        (Decimal(0), "$0.00"),
    ],
)
def test_an_amount_has_as_many_decimals_as_its_magnitude_needs(amount, shown):
    assert format_usd(amount) == shown


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Decimal("0.00999"), "$0.01"),
        (Decimal("0.009999"), "$0.01"),
        (Decimal("999.996"), "$1,000"),
        (Decimal("0.000995"), "$0.0010"),
    ],
)
def test_an_amount_that_rounds_into_the_next_magnitude_is_shown_as_that_magnitude(amount, shown):
    """$0.00999 is a cent to two significant digits: "$0.01", never "$0.0100"."""
    assert format_usd(amount) == shown


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Decimal("-0.0021"), "-$0.0021"),
        (Decimal("-12.4"), "-$12.40"),
        (Decimal("-1234.6"), "-$1,235"),
        (Decimal("-0.47"), "-$0.47"),
    ],
)
def test_the_sign_stands_before_the_dollar_sign(amount, shown):
    assert format_usd(amount) == shown


@pytest.mark.parametrize(
    ("amount", "digits"),
    [
        (Decimal("-0.004"), 2),
        (Decimal("-0.00004"), 4),
        (Decimal("-0.4"), 0),
        (Decimal("-0.0000000001"), None),
        (Decimal("-0.0000000004"), None),
        (Decimal("-0.0"), None),
        (-0.0, 2),
    ],
)
def test_an_amount_that_rounds_to_nothing_never_reads_negative(amount, digits):
    shown = format_usd(amount, digits)
    assert not shown.startswith("-") and _value(shown) == 0


def test_no_shown_amount_is_a_negative_zero_or_loses_its_sign_over_many_amounts():
    rng = random.Random(22)
    for _ in range(5000):
        amount = Decimal(rng.uniform(-1, 1)) * Decimal(10) ** rng.randint(-11, 5)
        digits = rng.choice([None, 0, 2, 4, 6])
        shown = format_usd(amount, digits)
        value = _value(shown)
        assert shown.startswith("-") == (value < 0), (amount, digits, shown)
        assert value == 0 or (value < 0) == (amount < 0), (amount, digits, shown)
        if digits is None:
            assert value != 0 or abs(amount) < Decimal("0.0000000005"), (amount, shown)
            assert abs(value - amount) <= abs(amount) / 20 + Decimal("0.5"), (amount, shown)


def test_the_decimals_asked_for_are_the_decimals_shown():
    assert format_usd(Decimal("0.5"), 4) == "$0.5000"
    assert format_usd(Decimal("1234.5678"), 2) == "$1,234.57"
    assert format_usd(Decimal("0.0021"), 2) == "$0.00"


@pytest.mark.parametrize("missing", [None, float("nan"), Decimal("NaN"), pd.NA])
def test_a_missing_amount_reads_as_nothing_never_as_none_or_nan(missing):
    assert format_usd(missing) == "$0.00"
    assert format_change(missing) == "no difference"
    assert to_decimal(missing) == 0


@pytest.mark.parametrize("infinite", [float("inf"), float("-inf"), Decimal("Infinity")])
def test_an_infinite_amount_is_refused_rather_than_shown(infinite):
    with pytest.raises(ValueError, match="not an amount of money"):
        format_usd(infinite)


def test_floats_ints_strings_and_decimals_of_one_amount_read_the_same():
    assert {format_usd(v) for v in (0.0021, "0.0021", Decimal("0.0021"))} == {"$0.0021"}
    assert format_usd(12) == format_usd(12.0) == format_usd("12") == "$12.00"


def test_digits_for_gives_the_decimals_of_the_amount_as_shown():
    assert [digits_for(v) for v in (5000, 12.4, 0.01, 0.0021, 0.0000042, 0, None)] == [
        0, 2, 2, 4, 7, 2, 2,
    ]  # fmt: skip
    assert digits_for(Decimal("-0.0021")) == digits_for(Decimal("0.0021"))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (Decimal("-0.0021"), "saved $0.0021"),
        (Decimal("0.0168"), "cost $0.02 more"),
        (Decimal("-12.4"), "saved $12.40"),
        (Decimal("1234"), "cost $1,234 more"),
        (Decimal(0), "no difference"),
        (Decimal("-0.0000000001"), "no difference"),
    ],
)
def test_a_difference_in_cost_is_said_as_a_saving_or_as_a_cost(change, said):
    assert format_change(change) == said


def test_a_difference_that_rounds_to_nothing_at_the_decimals_asked_is_no_difference():
    assert format_change(Decimal("-0.004"), 2) == "no difference"
    assert format_change(Decimal("-0.006"), 2) == "saved $0.01"
    assert format_change(Decimal("0.00004"), 4) == "no difference"


def test_a_saving_and_a_loss_shown_together_add_up_to_their_whole():
    """Prices $0.19 lower, $0.07 of cache lost: the whole is $0.12 less, and reads so."""
    whole, parts = format_parts(
        Decimal("-0.12"), {"price": Decimal("-0.19"), "cache": Decimal("0.07")}
    )
    assert (whole, parts) == ("-$0.12", {"price": "-$0.19", "cache": "$0.07"})


def test_parts_are_rounded_by_the_largest_remainder_so_they_add_up_as_shown():
    third = Decimal(1) / 3
    whole, parts = format_parts(Decimal(1), {"a": third, "b": third, "c": third})
    assert whole == "$1.00" and sorted(parts.values()) == ["$0.33", "$0.33", "$0.34"]
    # Rounded alone, each would read $0.0050 + $0.0050 = $0.01 beside a whole of $0.0100.
    whole, parts = format_parts(
        Decimal("0.0100"), {"a": Decimal("0.00504"), "b": Decimal("0.00496")}, digits=2
    )
    assert whole == "$0.01" and sorted(parts.values()) == ["$0.00", "$0.01"]


def test_the_group_shares_the_precision_its_largest_figure_needs():
    whole, parts = format_parts(
        Decimal("12.4021"), {"big": Decimal("12.4"), "small": Decimal("0.0021")}
    )
    assert (whole, parts) == ("$12.40", {"big": "$12.40", "small": "$0.00"})
    whole, parts = format_parts(Decimal("0.0031"), {"a": Decimal("0.0021"), "b": Decimal("0.001")})
    assert (whole, parts) == ("$0.0031", {"a": "$0.0021", "b": "$0.0010"})


def test_parts_add_up_to_their_whole_as_shown_over_many_random_groups():
    """Mixed signs and magnitudes, two to five parts, by magnitude or at given decimals: the
    parts as shown sum to the whole as shown, share its decimals, each is within one shown
    unit of its value, and none reads "-$0.00"."""
    rng = random.Random(5)
    for _ in range(3000):
        scale = Decimal(10) ** rng.randint(-7, 4)
        parts = {
            f"p{i}": (Decimal(rng.randint(-(10**6), 10**6)) / 10**6 * scale).quantize(
                Decimal("1E-9")
            )
            for i in range(rng.randint(2, 5))
        }
        whole = sum(parts.values(), Decimal(0))
        digits = rng.choice([None, None, 2, 4])
        shown_whole, shown = format_parts(whole, parts, digits)
        places = _decimals(shown_whole)
        unit = Decimal(1).scaleb(-places)
        assert sum(_value(s) for s in shown.values()) == _value(shown_whole), (parts, shown)
        assert abs(_value(shown_whole) - whole) <= unit / 2, (whole, shown_whole)
        for name, text in shown.items():
            assert _decimals(text) == places, (shown_whole, shown)
            assert abs(_value(text) - parts[name]) < unit, (parts, shown)
            assert not (text.startswith("-") and _value(text) == 0), text
        assert not (shown_whole.startswith("-") and _value(shown_whole) == 0), shown_whole


def test_a_whole_without_parts_is_shown_alone():
    assert format_parts(Decimal("0.47"), {}) == ("$0.47", {})


@pytest.mark.parametrize(
    ("shown", "said"),
    [("-$0.19", "saved $0.19"), ("$0.07", "cost $0.07 more"), ("$0.00", "no difference"),
     ("$1,234", "cost $1,234 more"), ("-$0.0021", "saved $0.0021")],
)  # fmt: skip
def test_a_part_as_shown_is_said_as_a_saving_or_a_cost_in_format_changes_words(shown, said):
    assert said_as_change(shown) == said
    assert read_usd(shown) == _value(shown)


def test_format_change_says_what_said_as_change_says_of_the_amount_as_shown():
    rng = random.Random(7)
    for _ in range(500):
        amount = Decimal(rng.uniform(-2, 2)) * Decimal(10) ** rng.randint(-6, 3)
        digits = rng.choice([None, 2, 4])
        assert format_change(amount, digits) == said_as_change(format_usd(amount, digits))


@pytest.mark.parametrize(
    ("amounts", "digits"),
    [
        ([Decimal("0.0105"), Decimal("0.0013")], 4),  # never "$0.01" beside "$0.00"
        ([Decimal("12.40"), Decimal("0.47")], 2),
        ([Decimal("1234"), Decimal("0.0021")], 2),  # two places past the largest at most
        ([Decimal("5000"), Decimal("1234")], 0),
        ([], 2),
        ([None, Decimal(0)], 2),
    ],
)
def test_a_column_to_compare_shows_its_smaller_amounts_within_two_places_of_its_largest(
    amounts, digits
):
    assert column_digits(amounts) == digits
