"""What the fake will do next: scripted faults, time-varying schedules and latency.

Controls are keyed by model name, with "*" for every model. For a provider request the fault
comes from, in order: the request's `x-fake-fault` header, a `<model>#<spec>` model name
(both handled by `app.py`), the model's script queue, the "*" script queue, an active
schedule entry for the model, then for "*", and finally the default fault ("ok").

Schedules are relative to when they are set and read the injected clock, so a test can move
a `VirtualClock` through an outage without sleeping.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.clock import Clock
from simulations.fakes.faults import FaultSpec, parse_spec

Spec = str | Mapping[str, Any] | FaultSpec
_Z99 = 2.3263478740408408  # the standard normal's 99th percentile


@dataclass(frozen=True)
class Window:
    """Down between `start` and `end` (clock seconds)."""

    start: float
    end: float
    spec: FaultSpec

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True)
class Flap:
    """Down for the first `down` seconds of every `period`, counted from `origin`."""

    origin: float
    period: float
    down: float
    spec: FaultSpec

    def active(self, now: float) -> bool:
        return now >= self.origin and (now - self.origin) % self.period < self.down


@dataclass(frozen=True)
class Latency:
    """Time to the response head (fixed, or lognormal by median and p99) and between tokens."""

    fixed_s: float | None = None
    median_s: float | None = None
    p99_s: float | None = None
    token_interval_s: float = 0.0

    def sample(self, rng: random.Random) -> float:
        if self.median_s is not None:
            p99 = max(self.p99_s or self.median_s, self.median_s)
            sigma = math.log(p99 / self.median_s) / _Z99 if self.median_s > 0 else 0.0
            return rng.lognormvariate(math.log(self.median_s), sigma) if self.median_s > 0 else 0.0
        return self.fixed_s or 0.0


class Controls:
    def __init__(self, clock: Clock, rng: random.Random, default: Spec = "ok") -> None:
        self.clock = clock
        self.rng = rng
        self.default = parse_spec(default)
        self._queues: dict[str, deque[FaultSpec]] = {}
        self._cycle: dict[str, bool] = {}
        self._schedule: dict[str, list[Window | Flap]] = {}
        self._latency: dict[str, Latency] = {}
        self._poison: dict[bytes, FaultSpec] = {}

    def clear(self) -> None:
        self._poison.clear()
        self._queues.clear()
        self._cycle.clear()
        self._schedule.clear()
        self._latency.clear()

    def script(
        self, model: str, faults: Iterable[Spec], *, cycle: bool = False, append: bool = False
    ) -> None:
        """Faults consumed one per request to `model` ("*": any model); `cycle` repeats them."""
        specs = [parse_spec(f) for f in faults]
        queue = self._queues.setdefault(model, deque())
        if not append:
            queue.clear()
        queue.extend(specs)
        self._cycle[model] = cycle

    def poison(self, text: str, spec: Spec) -> None:
        """Every request whose body contains `text` gets `spec`, on every model, as a real
        provider fails some payloads (a 500, a dropped connection) whoever sends them."""
        self._poison[text.encode()] = parse_spec(spec)

    def poisoned(self, body: bytes) -> FaultSpec | None:
        return next((spec for text, spec in self._poison.items() if text in body), None)

    def scripted(self, model: str) -> list[str]:
        return [str(s) for s in self._queues.get(model, ())]

    def schedule(
        self,
        model: str = "*",
        windows: Iterable[Mapping[str, Any]] = (),
        flapping: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
        *,
        append: bool = False,
    ) -> None:
        """Windows `{start_s, end_s, fault, rate?}` and flapping `{period_s, down_s, fault,
        rate?, offset_s?}`, in seconds from now."""
        now = self.clock.now()
        entries: list[Window | Flap] = []
        for w in windows:
            entries.append(
                Window(now + float(w["start_s"]), now + float(w["end_s"]), _with_rate(w))
            )
        for f in [flapping] if isinstance(flapping, Mapping) else flapping:
            period, down = float(f["period_s"]), float(f["down_s"])
            if period <= 0 or not 0 <= down <= period:
                raise ValueError("flapping needs period_s > 0 and 0 <= down_s <= period_s")
            entries.append(Flap(now + float(f.get("offset_s", 0.0)), period, down, _with_rate(f)))
        if append:
            self._schedule.setdefault(model, []).extend(entries)
        else:
            self._schedule[model] = entries

    def latency(
        self,
        model: str = "*",
        *,
        fixed_ms: float | None = None,
        median_ms: float | None = None,
        p99_ms: float | None = None,
        token_interval_ms: float | None = None,
    ) -> None:
        def s(ms: float | None) -> float | None:
            return None if ms is None else float(ms) / 1000.0

        self._latency[model] = Latency(
            s(fixed_ms), s(median_ms), s(p99_ms), s(token_interval_ms) or 0.0
        )

    def choose(self, model: str) -> tuple[FaultSpec, str]:
        """The fault for the next request to `model`, and where it came from."""
        for key in (model, "*"):
            queue = self._queues.get(key)
            if queue:
                spec = queue.popleft()
                if self._cycle.get(key):
                    queue.append(spec)
                return spec, "script"
        now = self.clock.now()
        for key in (model, "*"):
            for entry in self._schedule.get(key, ()):
                if entry.active(now):
                    return entry.spec, "schedule"
        return self.default, "default"

    def applies(self, spec: FaultSpec) -> bool:
        """Draw against the spec's `rate`."""
        rate = float(spec.get("rate", 1.0))
        return rate >= 1.0 or self.rng.random() < rate

    def _latency_for(self, model: str) -> Latency:
        return self._latency.get(model) or self._latency.get("*") or Latency()

    def head_delay(self, model: str) -> float:
        return self._latency_for(model).sample(self.rng)

    def token_interval(self, model: str) -> float:
        return self._latency_for(model).token_interval_s


def _with_rate(entry: Mapping[str, Any]) -> FaultSpec:
    spec = parse_spec(entry["fault"])
    if "rate" in entry:
        spec = parse_spec({"fault": spec.name, **spec.params, "rate": float(entry["rate"])})
    return spec
