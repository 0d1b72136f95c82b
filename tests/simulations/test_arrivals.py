"""A scenario's traffic: seeded, in order, recorded schedules replayed minute by minute, sizes
drawn from their means or their quantiles."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from simulations.whatif.arrivals import Arrival, arrivals, daily_curve
from simulations.whatif.scenario import parse_scenario
from simulations.whatif.scenario_traffic import quantile_mean

BASE = {
    "duration": "2h",
    "start": "2026-11-24T00:00:00Z",
    "seed": 4,
    "providers": {"claude": {"kind": "anthropic"}, "gpt": {"kind": "openai"}},
    "routes": {"support": {"targets": ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]},
               "classify": {"targets": ["gpt/gpt-4.1-mini"]}},
    "traffic": {"rate_per_s": 3, "routes": {
        "support": {"share": 0.7, "input_tokens": 1800, "output_tokens": 250},
        "classify": {"share": 0.3, "input_tokens": 120, "output_tokens": 5}}},
}  # fmt: skip


def scenario(**traffic):
    data = {**BASE, "traffic": {**BASE["traffic"], **traffic}}
    return parse_scenario(data, source="test")


def recorded(schedule, **extra):
    routes = {"support": {"per_minute": schedule, "input_tokens": 1000, "output_tokens": 100,
                          **extra}}  # fmt: skip
    return scenario(routes=routes)


def per_minute(traffic, route, minutes):
    mine = traffic.at_s[traffic.route == traffic.routes.index(route)]
    return np.bincount((mine // 60).astype(int), minlength=minutes)


def test_the_same_seed_gives_the_same_traffic_and_another_seed_other_traffic():
    one, two = arrivals(scenario()), arrivals(scenario())
    other = arrivals(dataclasses.replace(scenario(), seed=5))
    for column in ("at_s", "route", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(one, column), getattr(two, column)), column
    assert not np.array_equal(one.at_s[:100], other.at_s[:100])


def test_traffic_is_columns_in_order_of_arrival_and_iterates_as_arrivals():
    traffic = arrivals(scenario())
    assert traffic.at_s.dtype == np.float64 and traffic.route.dtype == np.int16
    assert traffic.input_tokens.dtype == traffic.output_tokens.dtype == np.int64
    assert np.all(np.diff(traffic.at_s) >= 0) and traffic.at_s[0] >= 0
    assert traffic.at_s[-1] < 7200
    first = next(iter(traffic))
    route = traffic.routes[traffic.route[0]]
    assert first == Arrival(float(traffic.at_s[0]), route, int(traffic.input_tokens[0]),
                            int(traffic.output_tokens[0]))  # fmt: skip
    assert type(first.at_s) is float and type(first.input_tokens) is int
    assert sum(1 for _ in traffic) == len(traffic)
    assert traffic.count("support") + traffic.count("classify") == len(traffic)


def test_a_rate_gives_poisson_arrivals_split_by_share():
    traffic = arrivals(scenario())
    expected = 3 * 7200
    assert abs(len(traffic) - expected) < 4 * math.sqrt(expected)
    assert traffic.count("support") / len(traffic) == pytest.approx(0.7, abs=0.02)


def test_the_daily_curve_thins_each_minute_by_its_value():
    traffic = arrivals(dataclasses.replace(scenario(), duration_s=86_400.0, daily_curve=True))
    hours = np.bincount((traffic.at_s // 3600).astype(int), minlength=24)
    start = scenario().start
    for night, afternoon in ((3, 14), (1, 15)):
        curve = [daily_curve(start.replace(hour=h)) for h in (night, afternoon)]
        assert hours[night] / hours[afternoon] == pytest.approx(curve[0] / curve[1], rel=0.15)


def test_a_recorded_schedule_replays_each_minutes_count_and_ignores_the_rate():
    schedule = [3, 0, 7, 1, 12] * 24  # two hours
    traffic = arrivals(recorded(schedule))
    assert per_minute(traffic, "support", 120).tolist() == schedule
    minute = (traffic.at_s // 60).astype(int)
    assert np.all(traffic.at_s >= minute * 60) and np.all(traffic.at_s < minute * 60 + 60)


def test_a_scaled_schedule_rounds_each_minute_up_or_down_by_its_fraction():
    schedule = [10, 3, 0, 5] * 30
    scaled = arrivals(recorded(schedule).scaled(0.25))
    counts = per_minute(scaled, "support", 120)
    means = np.array(schedule) * 0.25
    assert np.all((counts == np.floor(means)) | (counts == np.ceil(means)))
    # The fractions' coin flips: their sum within four standard deviations of its mean.
    fractions = means - np.floor(means)
    spread = 4 * math.sqrt(float(np.sum(fractions * (1 - fractions))))
    assert abs(counts.sum() - means.sum()) <= spread


def test_a_schedule_shorter_than_the_scenario_repeats():
    traffic = arrivals(recorded([4, 0, 2]))
    assert per_minute(traffic, "support", 120).tolist() == ([4, 0, 2] * 40)


def test_a_scenario_can_mix_recorded_routes_and_rated_ones():
    routes = {"support": {"per_minute": [5] * 120, "input_tokens": 10, "output_tokens": 1},
              "classify": {"share": 1, "input_tokens": 10, "output_tokens": 1}}  # fmt: skip
    traffic = arrivals(scenario(routes=routes, rate_per_s=0.5))
    assert traffic.count("support") == 600
    assert abs(traffic.count("classify") - 3600) < 4 * 60
    assert np.all(np.diff(traffic.at_s) >= 0)


def test_sizes_drawn_from_quantiles_follow_them_between_min_and_max():
    quantiles = [400, 700, 900, 1100, 1500, 2000, 2600, 3400, 4500]
    traffic = arrivals(recorded([50] * 120, input_quantiles=quantiles,
                                output_quantiles=[5, 5, 400]))  # fmt: skip
    sizes = traffic.input_tokens
    assert sizes.min() >= 400 and sizes.max() <= 4500
    # Inverse-CDF between evenly spaced quantiles: each eighth of the draws in its interval,
    # and (stratified) the mean is the distribution's.
    levels = np.linspace(0, 1, len(quantiles))
    assert np.quantile(sizes, levels[1:-1]) == pytest.approx(quantiles[1:-1], abs=3)
    assert sizes.mean() == pytest.approx(quantile_mean(tuple(quantiles)), rel=0.001)
    assert set(np.unique(traffic.output_tokens)) <= set(range(5, 401))


def test_sizes_without_quantiles_vary_around_their_means():
    traffic = arrivals(scenario())
    support = traffic.input_tokens[traffic.route == traffic.routes.index("support")]
    answers = traffic.output_tokens[traffic.route == traffic.routes.index("support")]
    assert support.min() >= 1800 * 0.7 - 1 and support.max() <= 1800 * 1.3 + 1
    assert answers.min() >= 250 * 0.6 - 1 and answers.max() <= 250 * 1.4 + 1
    assert support.mean() == pytest.approx(1800, rel=0.01)


def test_a_last_partial_minute_gets_its_share_of_the_schedule():
    traffic = arrivals(dataclasses.replace(recorded([60] * 120), duration_s=90.0))
    assert len(traffic) == 60 + 30 and traffic.at_s.max() < 90
