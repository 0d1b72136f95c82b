"""A provider that answers from a scenario instead of a network: the simulator's peer.

It implements the engine's `Provider` protocol, so the real chain, breakers, classification and
recorder run unchanged above it; only the wire is gone. A failure is produced as the real
provider would produce it: an HTTP status with the dialect's own error body (from the fake
providers' fault catalogue), turned into an `AttemptError` by `engine.core.classify`, the same
function the HTTP adapters call. Time passes on the injected clock: a reply arrives after a
latency drawn from the scenario's lognormal (median, p99); one slower than the attempt's
timeout is a read timeout, as a hung connection would be.

Prompt caching: a model keeps a route's cacheable prompt warm for five minutes after it served
it (Anthropic's default TTL; OpenAI's automatic cache behaves alike). A cold model writes it
(cache write tokens), a warm one reads it: a backup starts cold, the primary is cold again after
a long outage, and re-warm costs appear on their own. Rate limits (requests and tokens a minute)
answer 429 with the seconds to the next minute.

Randomness is per request, never shared: a request's first attempt takes its latency from the
draw its arrival carries (`RequestDraws`), and anything further (fault draws, later attempts'
latencies, the chain's retry jitter) comes from a generator seeded by the request's number. So
what one request meets never depends on how many others ran before it, and a request the
simulator fast-forwards (simulations.whatif.fastforward) meets exactly what the chain would have.
"""

from __future__ import annotations

import contextvars
import json
import math
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import numpy as np

from engine.core.classify import classify_response
from engine.core.clock import Clock
from engine.core.messages import MessageEnd, Request, Response, StreamEvent, Text, TextDelta, Usage
from engine.providers.transport_faults import classify_exception
from simulations.fakes.faults import FAULTS
from simulations.whatif.scenario import Fault, Latency, Limits, RouteTraffic

CACHE_TTL_S = 300.0
_Z99 = 2.3263478740408408  # the standard normal's 99th percentile
_ERROR_DELAY = 0.1  # an error comes back after this share of a healthy answer's latency


class RequestDraws:
    """One request's randomness: its first attempt's latency draw (a standard normal, drawn
    with the traffic) and, made on first use, generators for everything else it meets."""

    __slots__ = ("_jitter", "_rng", "first_z", "seed")

    def __init__(self, seed: int, first_z: float) -> None:
        self.seed, self.first_z = seed, first_z
        self._rng: random.Random | None = None
        self._jitter: random.Random | None = None

    def take_first_z(self) -> float | None:
        z, self.first_z = self.first_z, math.nan
        return None if math.isnan(z) else z

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(self.seed)
        return self._rng

    @property
    def jitter(self) -> random.Random:
        if self._jitter is None:
            self._jitter = random.Random(self.seed ^ 0x5EED)
        return self._jitter


CURRENT: contextvars.ContextVar[RequestDraws] = contextvars.ContextVar("simulated_request")


class RequestJitter(random.Random):
    """The chain's retry jitter, drawn from the current request's own generator."""

    def random(self) -> float:
        return CURRENT.get().jitter.random()

    def uniform(self, a: float, b: float) -> float:
        return CURRENT.get().jitter.uniform(a, b)


class SimulatedProvider:
    def __init__(
        self,
        name: str,
        kind: str,
        *,
        clock: Clock,
        rng: random.Random,
        start: float,
        faults: tuple[Fault, ...],
        routes: Mapping[str, RouteTraffic],
        median_ms: float,
        p99_ms: float,
        limits: MinuteLimits | None = None,
        latency: Mapping[str, Latency] | None = None,
        caches: Caches | None = None,
    ) -> None:
        """`rng` serves calls made outside a simulated request (none in a simulation);
        `latency`: per target, where measured; `limits` and `caches`: the accounts' rate limits
        and the prompt caches, shared with the other providers and the fast-forward."""
        self.name, self.kind = name, kind
        self.clock, self.rng, self.start = clock, rng, start
        self.faults = faults
        self.routes = routes
        self.median_s, self.sigma = median_ms / 1000, _sigma(median_ms, p99_ms)
        self._latency_of = {
            target: (m.median_ms / 1000, _sigma(m.median_ms, m.p99_ms))
            for target, m in (latency or {}).items()
            if target.split("/", 1)[0] == name
        }
        self.limits = limits or MinuteLimits({})
        self.caches = caches or Caches()
        self._errors = {
            fault: _error(fault, kind)
            for fault in ("overloaded", "server_error", "auth", "rate_limit")
        }

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response:
        now = self.clock.now()
        target = f"{self.name}/{model}"
        draws = CURRENT.get(None)
        rng = self.rng if draws is None else draws.rng
        fault = self._fault(target, now - self.start, rng)
        latency = self._latency(target, fault, rng, None if draws is None else draws.take_first_z())
        if fault is not None and fault.kind not in ("timeout", "slow"):
            await self.clock.sleep(latency * _ERROR_DELAY)
            raise self._error_for(fault.kind, fault.retry_after_s)
        # A call the provider takes counts against its limits, answered or not: one that
        # times out was received, and a refusal comes back at once, however slow the model.
        prompt = request.estimated_input_tokens()
        limited = self.limits.over(target, now, prompt, request.max_tokens or 0)
        if limited is not None:
            await self.clock.sleep(latency * _ERROR_DELAY)
            raise self._error_for("rate_limit", limited)
        if (fault is not None and fault.kind == "timeout") or latency > timeout_s:
            await self.clock.sleep(timeout_s)
            raise classify_exception(httpx.ReadTimeout("simulated: no answer in time"), sent=True)
        await self.clock.sleep(latency)
        return Response(
            content=(Text("simulated answer"),),
            stop_reason="end_turn",
            usage=self._usage(request, model, prompt),
            model=model,
        )

    async def stream(
        self, request: Request, model: str, *, timeout_s: float
    ) -> AsyncIterator[StreamEvent]:
        answer = await self.complete(request, model, timeout_s=timeout_s)
        yield TextDelta(answer.text)
        yield MessageEnd(answer.stop_reason, answer.usage, model=model)

    async def aclose(self) -> None:
        return None

    # --- the scenario's say ----------------------------------------------------------------

    def _fault(self, target: str, t: float, rng: random.Random) -> Fault | None:
        for fault in self.faults:
            if fault.hits(target) and fault.active(t) and rng.random() < fault.rate:
                return fault
        return None

    def healthy_latency(self, target: str) -> tuple[float, float]:
        """(median in seconds, sigma) of the target's healthy lognormal latency."""
        return self._latency_of.get(target, (self.median_s, self.sigma))

    def _latency(
        self, target: str, fault: Fault | None, rng: random.Random, z: float | None
    ) -> float:
        median, sigma = self.healthy_latency(target)
        if fault is not None and fault.kind == "slow":
            median = (fault.median_ms or 0) / 1000
            sigma = _sigma(fault.median_ms or 1, fault.p99_ms or 4 * (fault.median_ms or 1))
        return median * math.exp(sigma * (rng.gauss(0, 1) if z is None else z))

    def _usage(self, request: Request, model: str, prompt: int) -> Usage:
        route = self.routes.get(request.feature or "")
        cacheable = int(prompt * route.cached_share) if route and request.cache_system else 0
        warm = self.caches.served((model, request.feature or ""), self.clock.now())
        return Usage(
            input_tokens=prompt - cacheable,
            output_tokens=request.max_tokens or 0,
            cache_read_tokens=cacheable if warm else 0,
            cache_write_tokens=0 if warm else cacheable,
        )

    def _error_for(self, kind: str, retry_after_s: float | None) -> Exception:
        status, body = self._errors[kind]
        headers = {"retry-after": f"{retry_after_s:.0f}"} if retry_after_s is not None else {}
        return classify_response(status, headers, body, now=self.clock.wall())


class MinuteLimits:
    """The accounts' rate limits (requests, tokens, input or output tokens a minute, per
    target), counted in whole minutes of the virtual clock. A refused call is not counted.
    The simulated providers check and count each call as it is made; the fast-forward a run of
    the calls it answers (in time order, before anything else calls the target) at once."""

    def __init__(self, limits: Mapping[str, Limits]) -> None:
        self.limits = dict(limits)
        # target → (minute, requests, input tokens, output tokens) in the minute so far
        self._minute: dict[str, tuple[int, int, int, int]] = {}

    def __contains__(self, target: object) -> bool:
        return target in self.limits

    def over(self, target: str, now: float, prompt: int, output: int) -> float | None:
        """None when a call at `now` passes (it is counted); else the seconds to the next
        minute, the Retry-After of its refusal."""
        limits = self.limits.get(target)
        if limits is None:
            return None
        minute = int(now // 60)
        seen, requests, used_in, used_out = self._minute.get(target, (minute, 0, 0, 0))
        if seen != minute:
            requests, used_in, used_out = 0, 0, 0
        after = (requests + 1, used_in + prompt, used_out + output)
        if _exceeds(limits, *after):
            return 60 - now % 60
        self._minute[target] = (minute, *after)
        return None

    def passing(self, target: str, at: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> int:
        """How many of these calls (sorted by time) pass in turn, up to the first refused.
        Nothing is counted."""
        limits = self.limits.get(target)
        if limits is None or not len(at):
            return len(at)
        minute = at // 60
        seen, *before = self._minute.get(target, (-1, 0, 0, 0))
        counted = seen == minute[0]
        # Were they all in one minute with what is counted, would they pass? Then they do.
        most = (len(at), int(prompt.sum()), int(output.sum()))
        if not _exceeds(limits, *(a + b for a, b in zip(most, before, strict=True))):
            return len(at)
        requests, used_in, used_out = _running_by_minute(
            minute, (np.ones(len(at), np.int64), prompt, output), before if counted else (0, 0, 0)
        )
        over = np.asarray(_exceeds(limits, requests, used_in, used_out))
        return int(np.argmax(over)) if over.any() else len(at)

    def count(self, target: str, at: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> None:
        """Count these calls (sorted by time, each known to pass): what is kept is the last
        minute's totals."""
        if target not in self.limits or not len(at):
            return
        minute = at // 60
        last = int(minute[-1])
        first = int(np.searchsorted(minute, minute[-1]))
        seen, requests, used_in, used_out = self._minute.get(target, (-1, 0, 0, 0))
        if seen != last:
            requests, used_in, used_out = 0, 0, 0
        self._minute[target] = (
            last,
            requests + len(at) - first,
            used_in + int(prompt[first:].sum()),
            used_out + int(output[first:].sum()),
        )


def _running_by_minute(
    minute: np.ndarray, columns: tuple[np.ndarray, ...], before: Any
) -> list[np.ndarray]:
    """Each column's running sum within each minute (`minute` sorted), the first minute's
    starting from `before`."""
    starts = np.concatenate(([0], np.flatnonzero(np.diff(minute)) + 1))
    sizes = np.diff(np.concatenate((starts, [len(minute)])))
    totals = []
    for values, base in zip(columns, before, strict=True):
        running = np.cumsum(values, dtype=np.int64)
        running -= np.repeat(np.concatenate(([0], running))[starts], sizes)
        running[: sizes[0]] += base
        totals.append(running)
    return totals


def _exceeds(limits: Limits, requests: Any, used_in: Any, used_out: Any) -> Any:
    """Whether running totals (numbers, or arrays of them) pass any of `limits`."""
    over: Any = np.zeros(np.shape(requests), dtype=bool)
    totals = (requests, used_in, used_out, used_in + used_out)
    caps = (limits.rpm, limits.input_tpm, limits.output_tpm, limits.tpm)
    for value, cap in zip(totals, caps, strict=True):
        if cap is not None:
            over = over | (value > cap)
    return over


class Caches:
    """Which prompt caches are warm: a model's cache for a route is warm when it served that
    route less than CACHE_TTL_S before. Answers the chain's requests as they complete, and
    keeps the completions of fast-forwarded requests (known before they happen) to count them
    when their time comes; `on_served` hears of every answer the chain's requests got."""

    def __init__(self, on_served: Callable[[Any, float], None] | None = None) -> None:
        self._last: dict[Any, float] = {}  # key → the latest completion so far
        self._ahead: dict[Any, np.ndarray] = {}  # key → sorted times of completions to come
        self.on_served = on_served

    def served(self, key: Any, now: float) -> bool:
        """A request on `key` completes at `now`: was the cache warm?"""
        last = self.latest_before(key, now)
        self._last[key] = now
        if self.on_served is not None:
            self.on_served(key, now)
        return last + CACHE_TTL_S > now

    def latest_before(self, key: Any, now: float) -> float:
        last = self._last.get(key, -math.inf)
        ahead = self._ahead.get(key)
        if ahead is not None and len(ahead) and ahead[0] <= now:
            i = int(ahead.searchsorted(now, side="right"))
            last = max(last, float(ahead[i - 1]))
            self._ahead[key] = ahead[i:]
        self._last[key] = last
        return last

    def will_serve(self, key: Any, completions: Any, now: float) -> None:
        """Fast-forwarded requests on `key` complete at these (sorted) times, none before
        `now`. Those of earlier calls that are past by `now` are folded into the latest
        completion first: kept apart, every call would merge and sort a week of them."""
        if len(completions):
            self.latest_before(key, now)
            ahead = self._ahead.get(key)
            if ahead is None or not len(ahead):
                self._ahead[key] = completions
                return
            merged = np.concatenate([ahead, completions])
            if ahead[-1] > completions[0]:
                merged.sort(kind="mergesort")
            self._ahead[key] = merged

    def will_serve_one(self, key: Any, completion: float, now: float) -> None:
        self.will_serve(key, np.array([completion]), now)


def _sigma(median_ms: float, p99_ms: float) -> float:
    return max(0.0, math.log(max(p99_ms, median_ms) / median_ms) / _Z99)


def _error(fault: str, kind: str) -> tuple[int, bytes]:
    """The status and error body `kind`'s API sends for `fault`, from the fault catalogue."""
    shape = FAULTS[fault].shape(kind)
    assert shape is not None, fault
    message = shape.message.replace("{model}", "model").replace("{retry_after}", "60")
    if kind == "anthropic":
        body = {"type": "error", "error": {"type": shape.type, "message": message}}
    else:
        body = {"error": {"message": message, "type": shape.type, "code": shape.code,
                          "param": None}}  # fmt: skip
    return shape.status, json.dumps(body).encode()
