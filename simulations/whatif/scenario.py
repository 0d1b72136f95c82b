"""What-if scenarios: traffic, a chain, and what goes wrong when, as TOML.

name = "Anthropic 529s for 2 h at peak"
duration = "6h"                       # simulated time
start = "2026-11-23T09:00:00Z"        # optional: when the simulated day begins (UTC)
backups = ["claude/claude-haiku-4-5", "gpt/gpt-4.1-mini"]   # candidates compared

[providers.claude]                    # as in switchover.toml; no URL or key needed
kind = "anthropic"
[routes.support]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]   # a candidate replaces the 2nd
[policy]                              # optional overrides, as in switchover.toml

[traffic]
rate_per_s = 20                       # at the daily peak
daily_curve = true                    # quiet nights, busy afternoons (UTC)
[traffic.routes.support]
share = 0.7                           # of the requests
input_tokens = 1800                   # mean prompt size (± 30 %)
output_tokens = 250                   # mean answer size (± 40 %)
cached_share = 0.8                    # of the prompt the primary reads from its cache
# Recorded traffic instead (simulations.whatif.from_store writes these): the route's requests in
# each minute from the start (the rate, share and curve are then ignored; a shorter list repeats),
# and sizes drawn from evenly spaced quantiles, the minimum first and the maximum last.
# per_minute = [3, 5, 4, ...]
# input_quantiles = [1510, 1512, ..., 1530]
# output_quantiles = [8, 9, ..., 12]

[latency]                             # healthy providers: time to the whole answer
median_ms = 600
p99_ms = 4000
[latency."claude/claude-haiku-4-5"]   # optional: a target's own, as measured
median_ms = 420
p99_ms = 2600
ttft_ms = 180                         # time to the first token, where streamed

[[faults]]
target = "claude/claude-sonnet-4-5"   # or a provider name: all its models
kind = "overloaded"                   # overloaded, server_error, rate_limit, auth, timeout, slow
start = "2h"                          # from the scenario's start
end = "4h"
rate = 1.0                            # share of requests that fail while it lasts
# also: retry_after_s (rate_limit), median_ms and p99_ms (slow),
# flapping = {period = "10m", down = "3m"}

[limits."gpt/gpt-4.1-mini"]           # the provider's rate limits on your account
rpm = 5000
tpm = 2000000

Top level, optional: `traffic_scale = 0.01` simulates 1 % of the traffic (rate limits unscaled).
`simulations.whatif.scenario_toml.to_toml(scenario)` writes a scenario back in this form; reading
it gives the same scenario.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from engine.config import Config, parse_config
from engine.config.alerting import parse_duration
from engine.core.errors import ConfigError
from simulations.whatif.calibration import Recorded
from simulations.whatif.scenario_traffic import (
    Latency,
    RouteTraffic,
    parse_latency,
    parse_routes_traffic,
    positive,
    table_of,
)

SCENARIOS_DIR = Path(__file__).parent / "scenarios"
FAULT_KINDS = ("overloaded", "server_error", "rate_limit", "auth", "timeout", "slow")
DEFAULT_START = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)  # a Monday
_TOP = ("name", "description", "duration", "start", "seed", "backups", "traffic_scale",
        "providers", "prompts", "routes", "policy", "prices", "traffic", "latency", "faults",
        "limits", "recorded", "recorded_faults")  # fmt: skip
CHAIN_KEYS = ("providers", "prompts", "routes", "policy", "prices")  # as in switchover.toml


@dataclass(frozen=True, slots=True)
class Fault:
    target: str  # "provider/model", or "provider" for every model it serves
    kind: str
    start_s: float
    end_s: float
    rate: float = 1.0
    retry_after_s: float | None = None
    median_ms: float | None = None
    p99_ms: float | None = None
    period_s: float | None = None  # flapping: down for `down_s` at the start of every period
    down_s: float | None = None

    def hits(self, target: str) -> bool:
        return self.target == target or self.target == target.split("/", 1)[0]

    def active(self, t: float) -> bool:
        if not self.start_s <= t < self.end_s:
            return False
        if self.period_s:
            return (t - self.start_s) % self.period_s < (self.down_s or 0)
        return True


@dataclass(frozen=True, slots=True)
class Limits:
    rpm: int | None = None
    tpm: int | None = None  # input + output tokens a minute
    # Providers that limit input and output tokens apart (Anthropic's ITPM and OTPM).
    input_tpm: int | None = None
    output_tpm: int | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    duration_s: float
    start: datetime
    seed: int
    config: Config  # providers, routes, policy, prices: the chain to simulate
    rate_per_s: float
    daily_curve: bool
    routes: Mapping[str, RouteTraffic]
    median_ms: float
    p99_ms: float
    faults: tuple[Fault, ...]
    limits: Mapping[str, Limits] = field(default_factory=dict)
    backups: tuple[str, ...] = ()
    source: str = ""
    # Per target ("provider/model"), where measured; the others use median_ms and p99_ms.
    target_latency: Mapping[str, Latency] = field(default_factory=dict)
    # The traffic simulated, as a share of the scenario's (a quick run at 1 %, say). Rates
    # are multiplied by it; rate limits are not, so headroom must be read against it.
    traffic_scale: float = 1.0
    # A replay of recorded traffic: what the store recorded over its window, which the run of
    # the chain that really served is held against (simulations.whatif.calibration).
    recorded: Recorded | None = None
    # The faults the record shows, where they are not `faults` (a from-traffic run injects an
    # outage that never happened): what the "as recorded" run replays.
    recorded_faults: tuple[Fault, ...] | None = None

    def scaled(self, factor: float) -> Scenario:
        return dataclasses.replace(self, traffic_scale=self.traffic_scale * factor)


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    if not path.exists() and (SCENARIOS_DIR / f"{path}.toml").exists():
        path = SCENARIOS_DIR / f"{path}.toml"  # a library scenario by its file name
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        names = ", ".join(p.stem for p in library())
        raise ConfigError(f"{path}: no such scenario (the library has: {names})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_scenario(data, source=str(path))


def library() -> list[Path]:
    return sorted(SCENARIOS_DIR.glob("*.toml"))


def parse_scenario(data: Mapping[str, Any], *, source: str = "scenario") -> Scenario:
    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {problem}")

    for key in data:
        if key not in _TOP:
            raise fail(key, f"unknown key (allowed: {', '.join(_TOP)})")
    chain = {k: data[k] for k in CHAIN_KEYS if k in data}
    config = parse_config(chain, source=source)
    duration = parse_duration(data.get("duration", "1h"))
    if not duration:
        raise fail("duration", 'must be a duration like "6h" or "7d"')
    start = data.get("start", DEFAULT_START)
    if isinstance(start, str):
        try:
            start = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError:
            raise fail("start", "must be a date and time like 2026-11-23T09:00:00Z") from None
    if not isinstance(start, datetime) or start.tzinfo is None:
        raise fail("start", "must be a date and time with a timezone (…Z for UTC)")
    traffic = table_of(data.get("traffic", {}), "traffic", fail)
    rate = traffic.get("rate_per_s", 5)
    if not positive(rate):
        raise fail("traffic.rate_per_s", "must be a positive number")
    routes = parse_routes_traffic(traffic, config.routes, duration, fail)
    scale = data.get("traffic_scale", 1.0)
    if not positive(scale):
        raise fail("traffic_scale", "must be a positive number (1 is the traffic as given)")
    latency, target_latency = parse_latency(data.get("latency", {}), fail)
    faults = tuple(_fault(i, raw, duration, fail) for i, raw in enumerate(data.get("faults", [])))
    limits = {
        target: Limits(raw.get("rpm"), raw.get("tpm"), raw.get("input_tpm"), raw.get("output_tpm"))
        for target, raw in table_of(data.get("limits", {}), "limits", fail).items()
    }
    backups = tuple(data.get("backups", ()))
    recorded, recorded_faults = _recorded(data, duration, fail)
    return Scenario(
        name=str(data.get("name", Path(source).stem)),
        description=str(data.get("description", "")),
        duration_s=duration,
        start=start.astimezone(UTC),
        seed=int(data.get("seed", 7)),
        config=config,
        rate_per_s=float(rate),
        daily_curve=bool(traffic.get("daily_curve", False)),
        routes=routes,
        median_ms=latency.median_ms,
        p99_ms=latency.p99_ms,
        faults=faults,
        limits=limits,
        backups=backups,
        source=source,
        target_latency=target_latency,
        traffic_scale=float(scale),
        recorded=recorded,
        recorded_faults=recorded_faults,
    )


def _recorded(
    data: Mapping[str, Any], duration: float, fail: Any
) -> tuple[Recorded | None, tuple[Fault, ...] | None]:
    """A saved replay's record (`[recorded]`, as simulations.whatif.scenario_toml writes it) and the
    faults its "as recorded" run replays (`[[recorded_faults]]`, when not the scenario's)."""
    raw = data.get("recorded")
    if raw is None:
        return None, None
    raw = table_of(raw, "recorded", fail)
    try:
        recorded = Recorded(
            int(raw["requests"]),
            int(raw["failed"]),
            int(raw["answered_by_fallback"]),
            Decimal(str(raw["cost_usd"])),
            None if "cache_loss_usd" not in raw else Decimal(str(raw["cache_loss_usd"])),
        )
    except (KeyError, ValueError, ArithmeticError) as exc:
        raise fail(
            "recorded", f"needs requests, failed, answered_by_fallback, cost_usd ({exc})"
        ) from None
    if raw.get("replays", "faults") == "faults":
        return recorded, None
    listed = data.get("recorded_faults", [])
    return recorded, tuple(_fault(i, f, duration, fail) for i, f in enumerate(listed))


def _fault(i: int, raw: Any, duration: float, fail: Any) -> Fault:
    where = f"faults[{i}]"
    raw = table_of(raw, where, fail)
    kind = raw.get("kind")
    if kind not in FAULT_KINDS:
        raise fail(f"{where}.kind", f"must be one of {', '.join(FAULT_KINDS)} (got {kind!r})")
    target = raw.get("target")
    if not isinstance(target, str) or not target:
        raise fail(f"{where}.target", 'name a target ("claude/claude-sonnet-4-5") or provider')
    start = parse_duration(raw.get("start", 0))
    end = parse_duration(raw.get("end", duration))
    if start is None or end is None or end <= start:
        raise fail(where, "start and end must be durations from the start, end after start")
    rate = raw.get("rate", 1.0)
    if not isinstance(rate, int | float) or not 0 < rate <= 1:
        raise fail(f"{where}.rate", "must be in (0, 1]")
    flapping = raw.get("flapping")
    period = down = None
    if flapping is not None:
        flapping = table_of(flapping, f"{where}.flapping", fail)
        period, down = parse_duration(flapping.get("period")), parse_duration(flapping.get("down"))
        if not period or down is None or down > period:
            raise fail(f"{where}.flapping", 'needs period and down (≤ period), like "10m", "3m"')
    if kind == "slow" and not positive(raw.get("median_ms")):
        raise fail(f"{where}.median_ms", "a slow fault needs its median latency")
    return Fault(
        target,
        kind,
        start,
        end,
        float(rate),
        raw.get("retry_after_s"),
        raw.get("median_ms"),
        raw.get("p99_ms"),
        period,
        down,
    )


def compressed(scenario: Scenario, factor: float) -> Scenario:
    """The same scenario `factor` times faster: durations, fault times, latencies and every
    policy time divided by it, the request rate multiplied. A live run of it (real HTTP, real
    clock) takes `duration / factor` seconds and must agree with its simulation."""
    from engine.fallback.policy import Policy

    def policy(p: Policy) -> Policy:
        times = {f: getattr(p, f) / factor for f in p.__dataclass_fields__ if f.endswith("_s")}
        return p.replace(**times)

    config = scenario.config
    routes = {
        name: dataclasses.replace(route, policy=policy(route.policy))
        for name, route in config.routes.items()
    }
    faults = tuple(
        dataclasses.replace(
            f,
            start_s=f.start_s / factor,
            end_s=f.end_s / factor,
            retry_after_s=None if f.retry_after_s is None else f.retry_after_s / factor,
            median_ms=None if f.median_ms is None else f.median_ms / factor,
            p99_ms=None if f.p99_ms is None else f.p99_ms / factor,
            period_s=None if f.period_s is None else f.period_s / factor,
            down_s=None if f.down_s is None else f.down_s / factor,
        )
        for f in scenario.faults
    )
    return dataclasses.replace(
        scenario,
        duration_s=scenario.duration_s / factor,
        config=dataclasses.replace(config, routes=routes, policy=policy(config.policy)),
        rate_per_s=scenario.rate_per_s * factor,
        median_ms=scenario.median_ms / factor,
        p99_ms=scenario.p99_ms / factor,
        target_latency={
            target: Latency(
                t.median_ms / factor, t.p99_ms / factor, t.ttft_ms and t.ttft_ms / factor
            )
            for target, t in scenario.target_latency.items()
        },
        faults=faults,
        daily_curve=False,
    )


def slug(text: str) -> str:
    """A name as a file or folder name: lower-case letters and digits joined by dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
