"""A scenario's requests: when each arrives, on which route, and how large it is. Seeded, so every
run of a comparison (the baseline and each candidate) sees the same traffic.

Generated a minute at a time with numpy, columnar (`Traffic`): a week at 20 requests/s (about
7 M requests) takes a few seconds, not the minutes a Python loop over requests would.

- A route with a share of the rate: Poisson arrivals at `rate_per_s × traffic_scale`, thinned
  by the daily curve (`daily_curve`, which the demo's history follows too; constant within a
  minute, so each minute's count is Poisson with its own mean), routes drawn by share.
- A route with a recorded schedule (`per_minute`): in minute m, `per_minute[m] ×
  traffic_scale` requests, rounded up or down at random by its fraction (2.3 is 2 or, three
  times in ten, 3). Not Poisson: a recorded minute replays with the count it had, so a replayed
  incident of 100 requests is not ±10 % off before anything is simulated, and a scaled one
  still has the right mean. A schedule shorter than the scenario repeats.
- Arrival times are uniform within their minute; sizes are drawn around the route's means
  (±30 % prompt, ±40 % answer), or from its quantiles by inverse-CDF interpolation, with
  stratified draws so that a small window's sizes follow the distribution closely.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from simulations.whatif.scenario import Scenario
from simulations.whatif.scenario_traffic import RouteTraffic

MINUTE = 60.0


def daily_curve(at: datetime) -> float:
    """Traffic relative to its daily peak: quiet at night (UTC), busiest mid-afternoon."""
    hour = at.hour + at.minute / 60
    return 0.25 + 0.75 * max(0.0, math.sin(math.pi * (hour - 6) / 16)) if 6 <= hour <= 22 else 0.25


@dataclass(frozen=True, slots=True)
class Arrival:
    at_s: float  # from the scenario's start
    route: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, eq=False)
class Traffic:
    """The requests, one entry per request in every array, in order of arrival."""

    routes: tuple[str, ...]
    at_s: np.ndarray  # float64, seconds from the scenario's start, ascending
    route: np.ndarray  # int16, an index into `routes`
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.at_s)

    def __iter__(self) -> Iterator[Arrival]:
        names = self.routes
        columns = (self.at_s.tolist(), self.route.tolist(), self.input_tokens.tolist(),
                   self.output_tokens.tolist())  # fmt: skip
        for at, route, prompt, answer in zip(*columns, strict=True):
            yield Arrival(at, names[route], prompt, answer)

    def count(self, route: str) -> int:
        return int(np.count_nonzero(self.route == self.routes.index(route)))

    def save(self, folder: Path) -> None:
        """Into `folder`, for `load` in another process (drawing a week again costs seconds)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "routes.json").write_text(json.dumps(list(self.routes)))
        for name in _COLUMNS:
            np.save(folder / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, folder: Path) -> Traffic:
        routes = tuple(json.loads((folder / "routes.json").read_text()))
        columns = (np.load(folder / f"{name}.npy", mmap_mode="r") for name in _COLUMNS)
        return cls(routes, *columns)


_COLUMNS = ("at_s", "route", "input_tokens", "output_tokens")


def arrivals(scenario: Scenario) -> Traffic:
    """The scenario's requests (see the module's docstring); the same for the same seed."""
    rng = np.random.default_rng(scenario.seed)
    names = tuple(scenario.routes)
    minutes = max(1, math.ceil(scenario.duration_s / MINUTE))
    # The share of each minute inside the scenario: a last partial minute has fewer requests.
    width = np.minimum(MINUTE, scenario.duration_s - MINUTE * np.arange(minutes)) / MINUTE
    minute_parts, route_parts = [], []
    rated = [i for i, name in enumerate(names) if not scenario.routes[name].per_minute]
    if rated:
        shares = np.array([scenario.routes[names[i]].share for i in rated])
        mean = scenario.rate_per_s * scenario.traffic_scale * MINUTE * width
        if scenario.daily_curve:
            mean = mean * _curve(scenario, minutes)
        counts = rng.poisson(mean)
        minute_parts.append(np.repeat(np.arange(minutes), counts))
        picked = rng.choice(len(rated), size=int(counts.sum()), p=shares / shares.sum())
        route_parts.append(np.asarray(rated, dtype=np.int16)[picked])
    for i, name in enumerate(names):
        schedule = scenario.routes[name].per_minute
        if schedule:
            repeated = np.resize(np.asarray(schedule, dtype=np.float64), minutes)
            counts = _stochastic_round(repeated * scenario.traffic_scale * width, rng)
            minute_parts.append(np.repeat(np.arange(minutes), counts))
            route_parts.append(np.full(int(counts.sum()), i, dtype=np.int16))
    minute = np.concatenate(minute_parts)
    route = np.concatenate(route_parts)
    at = MINUTE * (minute + rng.random(len(minute)) * width[minute])
    order = np.argsort(at, kind="stable")
    at, route = at[order], route[order]
    prompt = np.empty(len(at), dtype=np.int64)
    answer = np.empty(len(at), dtype=np.int64)
    for i, name in enumerate(names):
        mine = np.flatnonzero(route == i)
        prompt[mine], answer[mine] = _sizes(scenario.routes[name], len(mine), rng)
    return Traffic(names, at, route, prompt, answer)


def _curve(scenario: Scenario, minutes: int) -> np.ndarray:
    """The daily curve for each minute of the scenario (it changes only by the minute)."""
    start = scenario.start
    minute_of_day = (start.hour * 60 + start.minute + np.arange(minutes)) % 1440
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
    by_minute = np.array([daily_curve(midnight + timedelta(minutes=m)) for m in range(1440)])
    return by_minute[minute_of_day]


def _stochastic_round(means: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each mean as its floor, plus one with the probability of its fraction."""
    floor = np.floor(means)
    return (floor + (rng.random(len(means)) < means - floor)).astype(np.int64)


def _sizes(route: RouteTraffic, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    prompt = _drawn(route.input_quantiles, route.input_tokens, 0.3, n, rng)
    answer = _drawn(route.output_quantiles, route.output_tokens, 0.4, n, rng)
    return prompt, answer


def _drawn(
    quantiles: tuple[int, ...], mean: int, spread: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    if not quantiles:
        return np.maximum(1, np.rint(mean * rng.uniform(1 - spread, 1 + spread, n))).astype(
            np.int64
        )
    # Stratified: one draw in each of n equal slices of (0, 1), in random order.
    u = (rng.permutation(n) + rng.random(n)) / max(n, 1)
    levels = np.linspace(0.0, 1.0, len(quantiles))
    return np.maximum(1, np.rint(np.interp(u, levels, quantiles))).astype(np.int64)
