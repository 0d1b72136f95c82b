"""Scenarios built from the team's own recorded traffic: "what would last Tuesday's outage have
cost with Haiku as the backup?"

    scenario_from_traffic    a date range of recorded traffic, and an outage you describe
    scenario_from_incident   a recorded incident: its window, its fault schedule, its traffic
    replayable_incidents     the incidents the second can replay
    recorded_window          what the record says of a window, to set a replay beside

Everything is read from the published snapshots (engine.published.read.PublishedData: the traffic
profile, engine.store.traffic_profile), never the database, so it works while the scheduler
runs; and only counts and distributions are read, never a prompt. A scenario has:

  - the chain of `config` (switchover.toml) with every route option, without the way to reach
    its providers (no URL or key is needed to simulate);
  - per route, the requests recorded in each minute (`per_minute`; request faults aside: they
    fail fast, whatever the backup), the quantiles of its prompt and answer sizes over the
    window's hours scaled to the mean of the window's own answers, and the share of the prompt
    its primary read from its cache when warm;
  - per target, its measured latency (p50, p99, time to the first token); the team's typical
    latency for a target never measured (a new backup);
  - the faults: the outage described, or the incident's own (simulations.whatif.fault_schedule).
Bad input (a window with no traffic, an unknown incident or target) is a ConfigError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pandas as pd

from engine.config import Config, parse_config, parse_target
from engine.core.errors import ConfigError
from engine.core.fault_families import describe
from engine.core.money import format_usd
from engine.published.catalogue import LEVELS, REPLAY_MARGIN
from engine.published.read import PublishedData
from simulations.whatif.calibration import NANO, Recorded
from simulations.whatif.recorded_incidents import (
    incident,
    overlapping,
    recorded_faults,
    replayable_incidents,
    touched_routes,
)
from simulations.whatif.scenario import FAULT_KINDS, Fault, Latency, Limits, RouteTraffic, Scenario
from simulations.whatif.scenario_toml import chain_tables, duration
from simulations.whatif.scenario_traffic import quantile_mean

__all__ = [
    "OUTAGE_KINDS",
    "Outage",
    "Recorded",
    "recorded_window",
    "replayable_incidents",  # simulations.whatif.recorded_incidents
    "scenario_from_incident",
    "scenario_from_traffic",
]

MINUTE = timedelta(minutes=1)
OUTAGE_KINDS = tuple(k for k in FAULT_KINDS if k != "slow")  # "slow" needs a latency, not a kind
SIZE_LEVELS = 21  # quantiles a scenario keeps of each size: every 5 %
_MIX_POINTS = 200  # points drawn from each hour's quantiles to mix hours into one distribution


@dataclass(frozen=True, slots=True)
class Outage:
    """The outage to inject: `target` (provider/model, or a provider) fails `kind` for
    `length_s` from `start_s` after the window's start, on `rate` of its calls."""

    target: str
    start_s: float
    length_s: float
    kind: str
    rate: float = 1.0
    retry_after_s: float | None = None  # rate_limit: the Retry-After it sends


def scenario_from_traffic(
    published: PublishedData,
    config: Config,
    start: datetime,
    end: datetime,
    *,
    outage: Outage | None,
    backups: Sequence[str] = (),
    limits: Mapping[str, Limits] | None = None,
) -> Scenario:
    """The recorded traffic of [start, end) (UTC, to the minute) through `config`'s routes,
    with `outage` injected (None: the traffic alone, a baseline)."""
    start, end = _minute(start), _until_now(_minute(end, up=True))
    if end <= start:
        raise ConfigError(f"the window {start:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M} is empty")
    chain = _chain(config, start, end)
    faults = () if outage is None else (_outage_fault(outage, chain, start, end),)
    what = "no outage" if outage is None else _outage_text(outage)
    name = f"Recorded traffic {_span(start, end)}, {what}"
    description = (
        f"Built from the store: the routes of {config.source}, the requests recorded each "
        f"minute from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC, their sizes, cache "
        f"hits and latency; {what}."
    )
    window = _Window(start, end, tuple(chain.routes))
    built = _scenario(published, chain, window, name, description, faults, backups, limits)
    # Calibrated against the window as it was: its own incidents, through its own chain.
    happened = recorded_faults(published, overlapping(published, start, end), start, end)
    return dataclasses.replace(
        built,
        recorded=_measured(recorded_window(published, start, end, window.routes), built, published),
        recorded_faults=tuple(happened),
    )


def _measured(recorded: Recorded, scenario: Scenario, published: PublishedData) -> Recorded:
    """`recorded` with its cache loss as unmeasured (None) where the store could not price all
    of it: a minute in which backups answered a route whose primary reads from its cache, yet
    not a cent of cache was lost. The store prices a lost cache with the primary's hit ratio
    over the day before each hour, and in its first day there is none (a part of the window
    priced, the rest not, compares as wrongly as none)."""
    warm = [name for name, traffic in scenario.routes.items() if traffic.cached_share > 0]
    if not warm or recorded.cache_loss_usd is None or not recorded.answered_by_fallback:
        return recorded
    end = scenario.start + timedelta(seconds=scenario.duration_s)
    frame = published.query("traffic_minute", since=scenario.start, until=end)
    fell_back = frame[frame["route"].isin(warm) & (frame["answered_by_fallback"] > 0)]
    if (fell_back["cache_loss_usd"] <= 0).any():
        return dataclasses.replace(recorded, cache_loss_usd=None)
    return recorded


def _until_now(end: datetime) -> datetime:
    """A window's end, never past the current minute: the minutes after it have no traffic
    yet, and replayed as recorded they would read as a lull."""
    return min(end, _minute(datetime.now(UTC)))


def scenario_from_incident(
    published: PublishedData,
    config: Config,
    incident_id: str,
    *,
    backups: Sequence[str] = (),
    limits: Mapping[str, Limits] | None = None,
    with_overlapping: bool = False,
) -> Scenario:
    """The recorded incident `incident_id` replayed: its window with REPLAY_MARGIN either side,
    the faults its attempts show, and the traffic of the routes it touched: those that needed
    a fallback or failed, and those whose primary its target is. The other routes' traffic
    never met the fault; with a backup candidate in their chains too, the comparison would
    price changes this incident did not cause. An incident of another target or family inside
    the window is not replayed as a fault (its routes' traffic stays, as recorded) unless
    `with_overlapping`: the question is what this incident cost."""
    found = incident(published, incident_id)
    minutes = published.query("incident_minutes", incident_ids=[incident_id])
    start = minutes["bucket"].min().to_pydatetime()
    end = _until_now(minutes["bucket"].max().to_pydatetime() + MINUTE)
    around = overlapping(published, start, end)
    if not with_overlapping:
        around = around[around["incident_id"] == incident_id]
    chain = _chain(config, start, end)
    window = _Window(start, end, touched_routes(around, chain, incident_id))
    faults = recorded_faults(published, around, start, end)
    recorded = recorded_window(published, start, end, window.routes)
    name = f"Replay of {describe(found['target'], found['family'])} {_span(start, end)}"
    description = (
        f"Incident {incident_id} as recorded, {REPLAY_MARGIN.seconds // 60} minutes either "
        f"side, on {', '.join(window.routes)}: {recorded.requests:,} requests, "
        f"{recorded.answered_by_fallback:,} answered by a fallback, {recorded.failed:,} failed, "
        f"{format_usd(recorded.cost_usd)} in all; its fault schedule and traffic from the store."
    )
    built = _scenario(published, chain, window, name, description, faults, backups, limits)
    return dataclasses.replace(built, recorded=_measured(recorded, built, published))


def recorded_window(
    published: PublishedData, start: datetime, end: datetime, routes: Iterable[str] | None = None
) -> Recorded:
    """What the record says of [start, end) on `routes` (all of them when None)."""
    frame = published.query("traffic_minute", since=start, until=end)
    if routes is not None:
        frame = frame[frame["route"].isin(list(routes))]
    requests = int((frame["requests"] - frame["request_faults"]).sum())
    # DuckDB hands DECIMAL(18,9) over as float64: each back to its nine decimals, then added.
    cost = sum((Decimal(v).quantize(NANO) for v in frame["cost_usd"]), Decimal(0))
    cache_loss = sum((Decimal(v).quantize(NANO) for v in frame["cache_loss_usd"]), Decimal(0))
    return Recorded(
        requests,
        int(frame["failed"].sum()),
        int(frame["answered_by_fallback"].sum()),
        cost,
        cache_loss,
    )


# --- the parts of a scenario ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Window:
    start: datetime
    end: datetime
    routes: tuple[str, ...]  # those whose traffic the scenario sends


def _scenario(
    published: PublishedData,
    chain: Config,
    window: _Window,
    name: str,
    description: str,
    faults: Iterable[Fault],
    backups: Sequence[str],
    limits: Mapping[str, Limits] | None,
) -> Scenario:
    for backup in backups:
        _check_target(backup, "backup")
    for target in limits or {}:
        _check_target(target, "limits")
    start, end = window.start, window.end
    routes = _routes(published, chain, window)
    seconds = (end - start).total_seconds()
    everyone, per_target = _latencies(published, start, end)
    requests = sum(sum(r.per_minute) for r in routes.values())
    return Scenario(
        name=name,
        description=description,
        duration_s=seconds,
        start=start,
        seed=7,
        config=chain,
        rate_per_s=requests / seconds,
        daily_curve=False,
        routes=routes,
        median_ms=everyone.median_ms,
        p99_ms=everyone.p99_ms,
        faults=tuple(faults),
        limits=dict(limits or {}),
        backups=tuple(backups),
        source=chain.source,
        target_latency=per_target,
    )


def _chain(config: Config, start: datetime, end: datetime) -> Config:
    """`config`'s chain, every route option kept, as a scenario holds it (no URL, no key); its
    source names the window (and is the scenario's)."""
    source = f"{config.source}, traffic of {_span(start, end)}"
    return parse_config(chain_tables(config, reach=False), source=source)


def _routes(published: PublishedData, chain: Config, window: _Window) -> dict[str, RouteTraffic]:
    start, end = window.start, window.end
    traffic = published.query("traffic_minute", since=start, until=end)
    traffic = traffic[traffic["route"].isin(list(window.routes))]
    counts = traffic["requests"] - traffic["request_faults"]
    if counts.sum() <= 0:
        raise ConfigError(
            f"no recorded requests on {', '.join(window.routes)} from {start:%Y-%m-%d %H:%M} to "
            f"{end:%Y-%m-%d %H:%M} UTC (the store keeps 35 days; is that the right window?)"
        )
    index = ((traffic["bucket"] - pd.Timestamp(start)) // pd.Timedelta(minutes=1)).to_numpy()
    sizes = published.query("traffic_sizes", since=start, until=end)
    routes = {}
    for route in window.routes:
        mine = (traffic["route"] == route).to_numpy()
        if not counts[mine].sum():
            continue
        per_minute = np.zeros(round((end - start) / MINUTE), dtype=np.int64)
        np.add.at(per_minute, index[mine], counts[mine].to_numpy())
        shape = _sizes(published, route, sizes)
        routes[route] = _route_traffic(shape, traffic[mine], per_minute, counts.sum())
    return routes


def _sizes(published: PublishedData, route: str, sizes: pd.DataFrame) -> pd.DataFrame:
    """The route's hours of sizes in the window; all of its hours when nothing in the window
    was answered (an outage with no backup), to give the sizes a shape."""
    hours = sizes[sizes["route"] == route]
    if hours.empty:
        everything = published.query("traffic_sizes")
        hours = everything[everything["route"] == route]
    if hours.empty:
        raise ConfigError(f"route {route}: no answered request in the store to size its traffic")
    return hours


def _route_traffic(
    hours: pd.DataFrame, window: pd.DataFrame, per_minute: np.ndarray, total: int
) -> RouteTraffic:
    """The shape of the sizes from the hours' quantiles, scaled to the mean of the window's own
    answers (the window's cost is linear in it); the primary's warm cache share."""
    levels = np.linspace(0, 1, SIZE_LEVELS)
    answers = window["answers"].sum()
    quantiles = []
    for kind in ("prompt_tokens", "output_tokens"):
        shape = _mixed(hours["answers"], hours[kind], levels)
        mean = quantile_mean(shape)  # of sizes drawn linearly between the levels
        if answers:
            shape = shape * (window[kind].sum() / answers / mean)
        quantiles.append(tuple(int(v) for v in np.rint(shape)))
    warm = hours["warm_prompt_tokens"].sum()
    cached = hours["warm_cache_read_tokens"].sum() / warm if warm else 0.0
    (input_q, output_q), share = quantiles, per_minute.sum() / total
    return RouteTraffic(
        round(float(share), 6),
        max(1, round(quantile_mean(input_q))),
        max(1, round(quantile_mean(output_q))),
        round(float(cached), 4),
        tuple(float(n) for n in per_minute),
        input_q,
        output_q,
    )


def _latencies(
    published: PublishedData, start: datetime, end: datetime
) -> tuple[Latency, dict[str, Latency]]:
    """Each target's latency over the window's hours, and everyone's (for a target never
    measured); the scenario's defaults when nothing answered at all."""
    hours = published.query("target_latency", since=start, until=end)
    if hours.empty:
        hours = published.query("target_latency")
    if hours.empty:
        return Latency(600.0, 4000.0), {}
    per_target = {target: _latency(rows) for target, rows in hours.groupby("target")}
    return _latency(hours), per_target


def _latency(rows: pd.DataFrame) -> Latency:
    p50, p99 = _mixed(rows["answers"], rows["latency_ms"], np.array([0.5, 0.99]))
    streamed = rows[rows["streams"] > 0]
    ttft = None
    if not streamed.empty:
        (ttft,) = _mixed(streamed["streams"], streamed["ttft_ms"], np.array([0.5]))
    # A scenario's latencies are positive: an answer recorded at 0 ms (a clock that did not
    # move, a cached reply) is read as the simulation's smallest step, 0.1 ms.
    p50 = max(round(float(p50), 1), 0.1)
    ttft = None if ttft is None else max(round(float(ttft), 1), 0.1)
    return Latency(p50, max(round(float(p99), 1), p50), ttft)


def _mixed(weights: Iterable[float], quantiles: Iterable[Sequence[float]], at: np.ndarray):
    """The quantiles `at` of the mixture of several hours' distributions, each given by its
    quantiles at LEVELS over its `weight` values: together, the distribution of all of them.

    An hour's quantile at level p (DuckDB's quantile_cont) is its order statistic 1 + p(n-1);
    read as a share of the hour's values that is (p(n-1) + ½)/n, so an hour of 20 answers keeps
    a twentieth of its weight at its maximum, as the pooled values do (at level p the tail of a
    small hour would be far too light: a p99 20 % low). Each hour stands for _MIX_POINTS values
    of its quantile function on that scale; the pooled values are read at `at`, with the
    smallest and largest kept exactly."""
    grid = (np.arange(_MIX_POINTS) + 0.5) / _MIX_POINTS
    levels = np.asarray(LEVELS)
    values, mass, lows, highs = [], [], [], []
    for weight, q in zip(weights, quantiles, strict=True):
        q, n = np.asarray(q, dtype=np.float64), max(1.0, float(weight))
        values.append(np.interp(grid, (levels * (n - 1) + 0.5) / n, q))
        mass.append(np.full(_MIX_POINTS, n / _MIX_POINTS))
        lows.append(q[0])
        highs.append(q[-1])
    pooled, w = np.concatenate(values), np.concatenate(mass)
    order = np.argsort(pooled, kind="stable")
    pooled, w = pooled[order], w[order]
    position = (np.cumsum(w) - w / 2) / w.sum()
    out = np.interp(at, position, pooled)
    return np.where(at <= 0, min(lows), np.where(at >= 1, max(highs), out))


# --- faults -----------------------------------------------------------------------------


def _outage_fault(outage: Outage, chain: Config, start: datetime, end: datetime) -> Fault:
    targets = {t.name for r in chain.routes.values() for t in r.targets}
    if outage.target not in targets and outage.target not in chain.providers:
        raise ConfigError(
            f"outage: {outage.target!r} is no target of the routes ({', '.join(sorted(targets))})"
            " nor a provider"
        )
    if outage.kind not in OUTAGE_KINDS:
        raise ConfigError(f"outage: kind must be one of {', '.join(OUTAGE_KINDS)}")
    seconds = (end - start).total_seconds()
    if not (0 <= outage.start_s < seconds and outage.length_s > 0):
        raise ConfigError(
            f"outage: it must start inside the window (0 to {duration(seconds)}) and last a while"
        )
    if not 0 < outage.rate <= 1:
        raise ConfigError("outage: its rate is a share of the calls, in (0, 1]")
    ends = min(seconds, outage.start_s + outage.length_s)
    return Fault(
        outage.target, outage.kind, outage.start_s, ends, outage.rate, outage.retry_after_s
    )


def _outage_text(outage: Outage) -> str:
    share = "" if outage.rate == 1 else f" on {outage.rate:.0%} of its calls"
    return (
        f"{outage.target} {outage.kind} for {duration(outage.length_s)} from "
        f"+{duration(outage.start_s)}{share}"
    )


# --- small things -------------------------------------------------------------------------


def _check_target(target: str, where: str) -> None:
    try:
        parse_target(target)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _minute(at: datetime, *, up: bool = False) -> datetime:
    if at.tzinfo is None:
        raise ConfigError(f"{at}: give a time with its zone (UTC)")
    at = at.astimezone(UTC)
    floor = at.replace(second=0, microsecond=0)
    return floor + MINUTE if up and floor != at else floor


def _span(start: datetime, end: datetime) -> str:
    if end - start >= timedelta(days=1) and start.time() == end.time() == datetime.min.time():
        return f"{start:%Y-%m-%d}..{end:%Y-%m-%d} UTC"
    return f"{start:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M} UTC"
