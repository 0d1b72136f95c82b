"""A scenario's requests: when each arrives, on which route, and how large it is. Seeded, so every
run of a comparison (the baseline and each candidate) sees the same traffic."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from simulations.history import daily_curve
from simulations.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Arrival:
    at_s: float  # from the scenario's start
    route: str
    input_tokens: int
    output_tokens: int


def arrivals(scenario: Scenario) -> list[Arrival]:
    """The scenario's requests: Poisson arrivals at `rate_per_s` (thinned by the daily curve),
    routes by share, sizes around their means; seeded, so every run sees the same traffic."""
    rng = random.Random(scenario.seed)
    routes = list(scenario.routes.items())
    weights = [r.share for _, r in routes]
    out, t = [], 0.0
    while True:
        t += rng.expovariate(scenario.rate_per_s * scenario.traffic_scale)
        if t >= scenario.duration_s:
            return out
        if scenario.daily_curve and rng.random() > daily_curve(
            scenario.start + timedelta(seconds=t)
        ):
            continue
        name, route = rng.choices(routes, weights)[0]
        out.append(Arrival(t, name, max(1, round(route.input_tokens * rng.uniform(0.7, 1.3))),
                           max(1, round(route.output_tokens * rng.uniform(0.6, 1.4)))))  # fmt: skip
