"""The gateway's Prometheus metrics and its `/v1/status` and `/v1/models` documents.

Metrics (prometheus-client, text format at `/metrics`):

    switchover_gateway_requests_total{route, dialect, outcome}   one per HTTP request; outcome
        ok | stream_error | cancelled | bad_request | unauthorized | not_found | error, or the
        failure's cause (request, unavailable, internal, timeout, rate_limited, quota,
        credential; see engine.gateway.errors)
    switchover_gateway_fallbacks_total{route, dialect}           answered by a later target
    switchover_gateway_request_duration_seconds{route, dialect, stream}   until the last byte
    switchover_gateway_time_to_first_token_seconds{route, dialect}        until the stream head
    switchover_attempts_total{target, outcome, decision}         from the attempt hook
    switchover_attempt_duration_seconds{target, outcome}
    switchover_cost_usd_total{target}                            attempts as the recorder priced
        them (once, on its thread, when it wrote them); a gateway that records nothing has none
    switchover_breaker_state{target}                             0 closed, 1 half-open, 2 open
    switchover_breaker_store_shared                              1 breakers shared (the data
        folder's SQLite file, or Redis), 0 kept in the process's memory (no data folder, or the
        shared store unusable); the least over live workers
    switchover_breaker_store_fallback_total                      breaker calls answered from
        memory because the shared store was unusable
    switchover_recorder_written_total                            attempts the recorder wrote
        to spool files (or PostgreSQL)
    switchover_recorder_dropped_total                            attempts it lost: beyond
        max_buffered while writes failed, not valid rows (the scheduler alerts on these too:
        telemetry_loss)
    switchover_recorder_failed_flushes_total                     writes that failed (kept)
    switchover_recorder_buffered                                 attempts waiting to be written,
        summed over live workers
    switchover_recorder_failing                                  1 while a live worker's last
        write failed
    switchover_recorder_last_flush_timestamp_seconds             the latest successful write of
        any live worker (Unix time)

Several uvicorn workers: `switchover serve --workers N` points PROMETHEUS_MULTIPROC_DIR at a
fresh folder before the workers start, so prometheus-client's multiprocess mode sums counters
and histograms over every worker, whichever one answers the scrape. Breakers kept in each
worker's memory (no data folder, or its file unusable) can differ between workers; the gauge
reports the worst state any worker last saw (`multiprocess_mode="max"`), set after every
request that touched the target and at each scrape. With a shared store every worker sees one.
The recorder's counters follow `Recorder.stats()` by deltas, like the breaker store's fallbacks:
each worker adds what its own recorder counted since it last looked, at each scrape and after
requests, at most once a second. Attempts lost at exit
are not here (the process is gone): its status file tells the scheduler.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from engine.core.attempt import Attempt
from engine.gateway.worker_metrics import render_workers
from engine.runtime.switchover import Switchover
from engine.state.breaker import BreakerState, BreakerStore, MemoryBreakerStore, describe
from engine.telemetry.recorder import Recorder

log = logging.getLogger("switchover.gateway")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}
# `*_created` series double the exposition and say nothing a scrape interval would not.
disable_created_metrics()

RECORDER_REFRESH_S = 1.0  # after requests, `Recorder.stats()` is read at most this often
_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    def __init__(
        self, *, recorder: Recorder | None = None, breakers_shared: bool | None = None
    ) -> None:
        self.multiprocess_dir = os.environ.get(MULTIPROC_ENV) or None
        # A registry per instance, so that tests can build many apps in one process; in
        # multiprocess mode the values live in files and a fresh collector reads them all.
        self.registry = CollectorRegistry(auto_describe=True)
        self._request_metrics(self.registry)
        self._attempt_metrics(self.registry)
        self._breaker_metrics(self.registry)
        if breakers_shared is not None:
            # Said the moment the gauge exists: the gauge is the least over the live workers,
            # and its initial 0 read by a scrape of a worker still starting said "not shared".
            self.store_shared.set(1 if breakers_shared else 0)
        self._fallbacks_seen = 0
        self._recorder_metrics(self.registry)
        self.recorder = recorder
        if recorder is not None:  # priced once, by the recorder, off the request path
            recorder.on_priced(self.on_priced)
        self._recorder_seen = (0, 0, 0)  # written, dropped, failed flushes: counted so far
        self._recorder_read_at = float("-inf")

    def _request_metrics(self, r: CollectorRegistry) -> None:
        self.requests = Counter(
            "switchover_gateway_requests",
            "Gateway requests by route, caller dialect and outcome.",
            ["route", "dialect", "outcome"],
            registry=r,
        )
        self.fallbacks = Counter(
            "switchover_gateway_fallbacks",
            "Gateway requests answered by a target after the route's first.",
            ["route", "dialect"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "switchover_gateway_request_duration_seconds",
            "Gateway request duration, until the last byte of the answer.",
            ["route", "dialect", "stream"],
            buckets=_SECONDS,
            registry=r,
        )
        self.ttft_seconds = Histogram(
            "switchover_gateway_time_to_first_token_seconds",
            "Streamed requests: time until the response head (the first content).",
            ["route", "dialect"],
            buckets=_SECONDS,
            registry=r,
        )

    def _attempt_metrics(self, r: CollectorRegistry) -> None:
        self.attempts = Counter(
            "switchover_attempts",
            "Provider attempts by target, outcome and the decision taken after it.",
            ["target", "outcome", "decision"],
            registry=r,
        )
        self.attempt_seconds = Histogram(
            "switchover_attempt_duration_seconds",
            "Provider attempt latency.",
            ["target", "outcome"],
            buckets=_SECONDS,
            registry=r,
        )
        self.cost = Counter(
            "switchover_cost_usd",
            "Cost of provider attempts in USD, as recorded (attempts of unpriced models count 0).",
            ["target"],
            registry=r,
        )

    def _breaker_metrics(self, r: CollectorRegistry) -> None:
        self.breaker_state = Gauge(
            "switchover_breaker_state",
            "Circuit breaker per target: 0 closed, 1 half-open, 2 open (worst over workers).",
            ["target"],
            multiprocess_mode="max",
            registry=r,
        )
        self.store_shared = Gauge(
            "switchover_breaker_store_shared",
            "1 when breaker state is shared (SQLite file or Redis), 0 when in process memory.",
            multiprocess_mode="livemin",
            registry=r,
        )
        self.store_fallbacks = Counter(
            "switchover_breaker_store_fallback",
            "Breaker calls answered from process memory because the shared store was unusable.",
            registry=r,
        )

    def _recorder_metrics(self, r: CollectorRegistry) -> None:
        self.recorder_written = Counter(
            "switchover_recorder_written",
            "Attempts the recorder wrote to spool files (or PostgreSQL).",
            registry=r,
        )
        self.recorder_dropped = Counter(
            "switchover_recorder_dropped",
            "Attempts the recorder lost before writing them (buffer full, invalid rows).",
            registry=r,
        )
        self.recorder_failed = Counter(
            "switchover_recorder_failed_flushes",
            "Recorder writes that failed; their attempts stay buffered for the next try.",
            registry=r,
        )
        self.recorder_buffered = Gauge(
            "switchover_recorder_buffered",
            "Attempts recorded and not yet written (sum over live workers).",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.recorder_failing = Gauge(
            "switchover_recorder_failing",
            "1 while the recorder's last write failed (in any live worker).",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.recorder_last_flush = Gauge(
            "switchover_recorder_last_flush_timestamp_seconds",
            "When the recorder last wrote successfully, Unix time (latest over live workers).",
            multiprocess_mode="livemax",
            registry=r,
        )

    # --- recording ---------------------------------------------------------------------

    def on_attempt(self, attempt: Attempt) -> None:
        """The attempt hook: counters only, never I/O."""
        self.attempts.labels(attempt.target, attempt.outcome, attempt.decision).inc()
        self.attempt_seconds.labels(attempt.target, attempt.outcome).observe(
            attempt.latency_ms / 1000
        )

    def on_priced(self, attempt: Attempt, cost: Decimal | None) -> None:
        """The recorder's listener (its thread): an attempt written, with its price."""
        if cost:
            self.cost.labels(attempt.target).inc(float(cost))

    def request_done(
        self,
        *,
        route: str,
        dialect: str,
        outcome: str,
        seconds: float,
        stream: bool,
        fallback: bool = False,
    ) -> None:
        self.requests.labels(route, dialect, outcome).inc()
        self.request_seconds.labels(route, dialect, "true" if stream else "false").observe(seconds)
        if fallback:
            self.fallbacks.labels(route, dialect).inc()
        if self.recorder is not None:
            now = time.monotonic()
            if now - self._recorder_read_at >= RECORDER_REFRESH_S:
                self._recorder_read_at = now
                self.refresh_recorder(self.recorder)

    def first_token(self, *, route: str, dialect: str, seconds: float) -> None:
        self.ttft_seconds.labels(route, dialect).observe(seconds)

    async def refresh_breakers(
        self, breakers: BreakerStore, targets: Iterable[str] | None = None
    ) -> None:
        """Copy breaker states into the gauge: the named targets, or every known one."""
        if targets is None:
            states = await breakers.snapshot_all()
        else:
            states = {t: await breakers.snapshot(t) for t in set(targets)}
        for target, state in states.items():
            self.breaker_state.labels(target).set(BREAKER_CODES.get(state.status, 0))
        self.store_shared.set(1 if breakers_shared(breakers) else 0)
        fallbacks = getattr(breakers, "fallbacks", 0)  # the store counts; the counter follows
        if fallbacks > self._fallbacks_seen:
            self.store_fallbacks.inc(fallbacks - self._fallbacks_seen)
            self._fallbacks_seen = fallbacks

    def refresh_recorder(self, recorder: Recorder | None) -> None:
        """Copy `recorder.stats()` into the metrics (counters by what grew since the last
        look), and keep it to refresh after requests. Counters only: no I/O."""
        if recorder is None:
            return
        if recorder is not self.recorder:  # a first look (or another recorder): from zero
            self.recorder, self._recorder_seen = recorder, (0, 0, 0)
        stats = recorder.stats()
        now = (stats.written, stats.dropped, stats.failed_flushes)
        counters = (self.recorder_written, self.recorder_dropped, self.recorder_failed)
        for counter, seen, value in zip(counters, self._recorder_seen, now, strict=True):
            if value > seen:
                counter.inc(value - seen)
        self._recorder_seen = now
        self.recorder_buffered.set(stats.buffered)
        self.recorder_failing.set(1 if stats.failing else 0)
        if stats.last_flush_at is not None:
            self.recorder_last_flush.set(stats.last_flush_at.timestamp())

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        return render_workers(self.multiprocess_dir)


# --- /v1/status ----------------------------------------------------------------------------


async def status_document(sw: Switchover) -> dict[str, Any]:
    """Routes with their targets, each target's breaker with the seconds it stays open or
    cooling, and this process's recorder ("telemetry"). Times count on the engine's clock;
    nothing here names a key."""
    now = sw.clock.now()
    states = await sw.breakers.snapshot_all()
    targets = {t.name for route in sw.config.routes.values() for t in route.targets}
    return {
        "pid": os.getpid(),
        # The memory store keeps breakers per process: with several workers, this one's view.
        "breakers_shared": breakers_shared(sw.breakers),
        "breaker_store": breaker_store_kind(sw.breakers),
        "routes": [
            {
                "name": route.name,
                "targets": [t.name for t in route.targets],
                "budget_s": route.policy.budget_s,
            }
            for route in sw.config.routes.values()
        ],
        "breakers": {
            target: describe(states.get(target, BreakerState()), now)
            for target in sorted(targets | set(states))
        },
        "telemetry": telemetry_document(sw.recorder),
    }


def telemetry_document(recorder: Recorder | None) -> dict[str, Any]:
    """This process's recorder: where attempts go, what is waiting, written and lost, and
    the last write error (the recorder's own I/O; credentials in it are masked)."""
    if recorder is None:
        return {"recording": False}
    stats = recorder.stats()
    return {
        "recording": True,
        "destination": "postgresql" if recorder.sink is not None else str(recorder.spool_dir),
        "buffered": stats.buffered,
        "written": stats.written,
        "files": stats.files,
        "dropped": stats.dropped,
        "failed_flushes": stats.failed_flushes,
        "failing": stats.failing,
        "last_error": stats.last_error,
        "last_flush_at": stats.last_flush_at.isoformat() if stats.last_flush_at else None,
    }


def breakers_shared(breakers: BreakerStore) -> bool:
    """Whether other processes see the same breakers: the workers of this host (the data
    folder's SQLite file) or of every host (Redis). False in memory, and while a shared store
    has fallen back to memory."""
    return not isinstance(breakers, MemoryBreakerStore) and getattr(breakers, "shared", True)


def breaker_store_kind(breakers: BreakerStore) -> str:
    """Where the breakers are kept: "memory", "sqlite" (this host) or "redis" (every host);
    another store by its class name (`FooBreakerStore` is "foo")."""
    if isinstance(breakers, MemoryBreakerStore):
        return "memory"
    return type(breakers).__name__.removesuffix("BreakerStore").lower()


# --- /v1/models ----------------------------------------------------------------------------


def models_document(sw: Switchover, created: int) -> dict[str, Any]:
    """The routes as models, in one list both official SDKs read: OpenAI's
    `{object: list, data: [{id, object, created, owned_by}]}` and Anthropic's
    `{data: [{id, type, display_name, created_at}], has_more, first_id, last_id}` (each SDK
    ignores the other's fields). `created`: when the gateway started (a route has no date)."""
    names = list(sw.config.routes)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
    data = [
        {
            "id": name,
            "object": "model",
            "type": "model",
            "created": created,
            "created_at": stamp,
            "display_name": name,
            "owned_by": "switchover",
        }
        for name in names
    ]
    return {
        "object": "list",
        "data": data,
        "has_more": False,
        "first_id": names[0] if names else None,
        "last_id": names[-1] if names else None,
    }
