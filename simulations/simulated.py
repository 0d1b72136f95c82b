"""A provider that answers from a scenario instead of a network: the simulator's peer.

It implements the engine's `Provider` protocol, so the real chain, breakers, classification and
recorder run unchanged above it; only the wire is gone. A failure is produced as the real
provider would produce it: an HTTP status with the dialect's own error body (from the fake
providers' fault catalogue), turned into an `AttemptError` by `engine.classify`, the same
function the HTTP adapters call. Time passes on the injected clock: a reply arrives after a
latency drawn from the scenario's lognormal (median, p99); one slower than the attempt's
timeout is a read timeout, as a hung connection would be.

Prompt caching: a model keeps a route's cacheable prompt warm for five minutes after it served
it (Anthropic's default TTL; OpenAI's automatic cache behaves alike). A cold model writes it
(cache write tokens), a warm one reads it: a backup starts cold, the primary is cold again after
a long outage, and re-warm costs appear on their own. Rate limits (requests and tokens a minute)
answer 429 with the seconds to the next minute.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import AsyncIterator, Mapping

import httpx

from engine.classify import classify_exception, classify_response
from engine.clock import Clock
from engine.types import MessageEnd, Request, Response, StreamEvent, Text, TextDelta, Usage
from simulations.fakes.faults import FAULTS
from simulations.scenario import Fault, Limits, RouteTraffic

CACHE_TTL_S = 300.0
_Z99 = 2.3263478740408408  # the standard normal's 99th percentile
_ERROR_DELAY = 0.1  # an error comes back after this share of a healthy answer's latency


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
        limits: Mapping[str, Limits] | None = None,
    ) -> None:
        self.name, self.kind = name, kind
        self.clock, self.rng, self.start = clock, rng, start
        self.faults = faults
        self.routes = routes
        self.median_s, self.sigma = median_ms / 1000, _sigma(median_ms, p99_ms)
        self.limits = dict(limits or {})
        self._warm: dict[tuple[str, str], float] = {}  # (model, route) → cache expiry
        self._minute: dict[str, tuple[int, int, int]] = {}  # target → (minute, requests, tokens)
        self._errors = {fault: _error(fault, kind) for fault in ("overloaded", "server_error",
                                                                 "auth", "rate_limit")}  # fmt: skip

    async def complete(self, request: Request, model: str, *, timeout_s: float) -> Response:
        now = self.clock.now()
        target = f"{self.name}/{model}"
        fault = self._fault(target, now - self.start)
        latency = self._latency(fault)
        if (fault is not None and fault.kind == "timeout") or latency > timeout_s:
            await self.clock.sleep(timeout_s)
            raise classify_exception(httpx.ReadTimeout("simulated: no answer in time"), sent=True)
        if fault is not None and fault.kind != "slow":
            await self.clock.sleep(latency * _ERROR_DELAY)
            raise self._error_for(fault.kind, fault.retry_after_s)
        prompt = request.estimated_input_tokens()
        limited = self._over_limit(target, prompt + (request.max_tokens or 0))
        if limited is not None:
            await self.clock.sleep(latency * _ERROR_DELAY)
            raise self._error_for("rate_limit", limited)
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

    def _fault(self, target: str, t: float) -> Fault | None:
        for fault in self.faults:
            if fault.hits(target) and fault.active(t) and self.rng.random() < fault.rate:
                return fault
        return None

    def _latency(self, fault: Fault | None) -> float:
        median, sigma = self.median_s, self.sigma
        if fault is not None and fault.kind == "slow":
            median = (fault.median_ms or 0) / 1000
            sigma = _sigma(fault.median_ms or 1, fault.p99_ms or 4 * (fault.median_ms or 1))
        return median * math.exp(sigma * self.rng.gauss(0, 1))

    def _usage(self, request: Request, model: str, prompt: int) -> Usage:
        route = self.routes.get(request.feature or "")
        cacheable = int(prompt * route.cached_share) if route and request.cache_system else 0
        key, now = (model, request.feature or ""), self.clock.now()
        warm = self._warm.get(key, -math.inf) > now
        self._warm[key] = now + CACHE_TTL_S
        return Usage(
            input_tokens=prompt - cacheable,
            output_tokens=request.max_tokens or 0,
            cache_read_tokens=cacheable if warm else 0,
            cache_write_tokens=0 if warm else cacheable,
        )

    def _over_limit(self, target: str, tokens: int) -> float | None:
        """Seconds to the next minute when this request would pass the target's limits."""
        limits = self.limits.get(target)
        if limits is None:
            return None
        now = self.clock.now()
        minute = int(now // 60)
        seen_minute, requests, used = self._minute.get(target, (minute, 0, 0))
        if seen_minute != minute:
            requests, used = 0, 0
        if (limits.rpm is not None and requests + 1 > limits.rpm) or (
            limits.tpm is not None and used + tokens > limits.tpm
        ):
            return 60 - now % 60
        self._minute[target] = (minute, requests + 1, used + tokens)
        return None

    def _error_for(self, kind: str, retry_after_s: float | None) -> Exception:
        status, body = self._errors[kind]
        headers = {"retry-after": f"{retry_after_s:.0f}"} if retry_after_s is not None else {}
        return classify_response(status, headers, body, now=self.clock.wall())


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
