"""The OpenTelemetry export: a span per request with a child span per attempt, and the GenAI
client metrics, over OTLP/HTTP (or any SDK exporter and reader handed in, as tests do).

    request hook (the request's task, O(1)) ──► deque ──► exporter thread: price, spans, metrics
        ──► BatchSpanProcessor (the SDK's thread) ──► OTLP/HTTP   PeriodicExportingMetricReader

Spans are made after the fact, with explicit start and end times from the request's and the
attempts' own timestamps, so nothing on the request path waits on the SDK: the chain hands a
finished `RequestDone` (engine.fallback.events) to `__call__`, an append. Attempts are priced
here, on this module's thread, with the same `Pricer` the recorder uses: pricing in the hook would
cost request-path time.

It must never fail or slow a request: the buffer is bounded (the oldest dropped and counted), the
SDK's span queue is bounded, each export is bounded by `timeout_s`, and an unreachable collector
costs only the SDK's threads their retries. `shutdown(timeout_s)` writes what is buffered and
flushes, each signal bounded by the timeout (`Switchover.aclose` runs it off the event loop).

Imports the OpenTelemetry SDK at the top: engine.runtime.build imports this module only when the
export is configured, and runs without it (one warning) when the SDK is not installed. Every
name emitted is in engine.telemetry.otel_names.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from engine.core.attempt import Attempt
from engine.fallback.events import RequestDone
from engine.telemetry import otel_names as n

__all__ = ["OtelExporter", "otlp_exporter"]

log = logging.getLogger("switchover.otel")

MAX_BUFFERED = 10_000  # requests waiting for this module's thread; beyond, the oldest dropped
WAKE_AT = 256  # requests buffered that wake the thread before its interval
WAKE_EVERY_S = 0.5
SPAN_QUEUE = 8_192  # the SDK's span queue (3 spans a request that fell back once)


class AttemptPricer(Protocol):
    """What is needed of engine.core.pricing.Pricer."""

    def price(self, attempt: Attempt) -> tuple[Decimal | None, str | None]: ...


def otlp_exporter(
    *,
    traces_url: str | None,
    metrics_url: str | None,
    service_name: str,
    headers: Mapping[str, str],
    timeout_s: float,
    pricer: AttemptPricer | None = None,
) -> OtelExporter:
    """The exporter over OTLP/HTTP (protobuf) to a collector's /v1/traces and /v1/metrics."""
    spans = metrics = None
    if traces_url is not None:
        spans = OTLPSpanExporter(endpoint=traces_url, headers=dict(headers), timeout=timeout_s)
    if metrics_url is not None:
        exporter = OTLPMetricExporter(
            endpoint=metrics_url, headers=dict(headers), timeout=timeout_s
        )
        metrics = PeriodicExportingMetricReader(
            exporter, export_timeout_millis=timeout_s * 1000
        )  # the interval: OTEL_METRIC_EXPORT_INTERVAL, else the SDK's 60 s
    return OtelExporter(
        span_exporter=spans,
        metric_reader=metrics,
        service_name=service_name,
        pricer=pricer,
        timeout_s=timeout_s,
    )


class OtelExporter:
    """The request hook (`__call__`) that turns finished requests into spans and metrics."""

    def __init__(
        self,
        *,
        span_exporter: SpanExporter | None,
        metric_reader: MetricReader | None,
        service_name: str = "switchover",
        pricer: AttemptPricer | None = None,
        timeout_s: float = 2.0,
        max_buffered: int = MAX_BUFFERED,
    ) -> None:
        self.pricer = pricer
        self.timeout_s = timeout_s
        self.max_buffered = max_buffered
        self.dropped = 0  # requests dropped from a full buffer
        resource = Resource.create({"service.name": service_name})
        self._traces = TracerProvider(resource=resource)
        if span_exporter is not None:
            self._traces.add_span_processor(
                BatchSpanProcessor(
                    span_exporter,
                    max_queue_size=SPAN_QUEUE,
                    schedule_delay_millis=1000,
                    export_timeout_millis=timeout_s * 1000,
                )
            )
        readers = [metric_reader] if metric_reader is not None else []
        self._metrics = MeterProvider(resource=resource, metric_readers=readers)
        self._tracer = self._traces.get_tracer(n.SCOPE, schema_url=n.SCHEMA_URL)
        self._instruments = _Instruments(self._metrics.get_meter(n.SCOPE, schema_url=n.SCHEMA_URL))
        self._buffer: deque[RequestDone] = deque()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._lock = threading.Lock()  # held by whoever emits: this thread, or a flush
        self._failed_at = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="switchover-otel", daemon=True)
        self._thread.start()

    def __call__(self, done: RequestDone) -> None:
        """The request hook: an append and a length check, never the SDK, never a raise."""
        buffer = self._buffer
        if len(buffer) >= self.max_buffered:
            with contextlib.suppress(IndexError):  # the thread may have emptied it meanwhile
                buffer.popleft()
                self.dropped += 1
        buffer.append(done)
        if len(buffer) >= WAKE_AT and not self._wake.is_set():
            self._wake.set()

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Everything buffered made into spans and metrics, and exported, now (tests, exit)."""
        millis = int((timeout_s or self.timeout_s) * 1000)
        self._drain()
        spans = self._traces.force_flush(millis)
        metrics = self._metrics.force_flush(millis)
        return bool(spans and metrics)

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop the thread, export what is buffered, shut the SDK down; each signal bounded by
        `timeout_s`. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=timeout_s or self.timeout_s)
        self.force_flush(timeout_s)
        self._traces.shutdown()
        self._metrics.shutdown(timeout_millis=(timeout_s or self.timeout_s) * 1000)

    # --- this module's thread --------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(WAKE_EVERY_S)
            self._wake.clear()
            self._drain()

    def _drain(self) -> None:
        with self._lock:
            while self._buffer:
                done = self._buffer.popleft()
                try:
                    self._emit(done)
                except Exception:  # a bug here must not stop the export of what follows
                    if time.monotonic() - self._failed_at > 60:
                        self._failed_at = time.monotonic()
                        log.exception(
                            "exporting request %s to OpenTelemetry failed", done.request_id
                        )

    def _emit(self, done: RequestDone) -> None:
        costs = [self._cost(a) for a in done.attempts]
        start = _ns(done.started_at)
        span = self._tracer.start_span(
            n.request_span_name(done.route),
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes=request_attributes(done, costs),
        )
        if done.error_type is not None:
            span.set_status(Status(StatusCode.ERROR, done.error_type))
        parent = trace.set_span_in_context(span)
        for attempt, cost in zip(done.attempts, costs, strict=True):
            child = self._tracer.start_span(
                n.attempt_span_name(attempt.model),
                context=parent,
                kind=SpanKind.CLIENT,
                start_time=_ns(attempt.started_at),
                attributes=attempt_attributes(attempt, cost),
            )
            if attempt.outcome != "success":
                child.set_status(Status(StatusCode.ERROR, attempt.error_class or attempt.outcome))
            child.end(end_time=_ns(attempt.started_at) + int(attempt.latency_ms * 1e6))
            self._instruments.measure(attempt)
        span.end(end_time=start + int(done.duration_s * 1e9))

    def _cost(self, attempt: Attempt) -> Decimal | None:
        if self.pricer is None:
            return None
        try:
            return self.pricer.price(attempt)[0]
        except Exception:  # an unknown price shape: the span goes without a cost
            log.debug("pricing %s failed", attempt.target, exc_info=True)
            return None


class _Instruments:
    """The GenAI client metrics, one point per attempt (each is a call to a provider)."""

    def __init__(self, meter: Any) -> None:
        self.tokens = meter.create_histogram(
            n.TOKEN_USAGE,
            unit=n.TOKEN_UNIT,
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(n.TOKEN_BUCKETS),
        )
        self.duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit=n.SECONDS,
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self.first_chunk = meter.create_histogram(
            n.TIME_TO_FIRST_CHUNK,
            unit=n.SECONDS,
            description="Time to receive the first chunk of a streamed response",
            explicit_bucket_boundaries_advisory=list(n.FIRST_CHUNK_BUCKETS),
        )

    def measure(self, attempt: Attempt) -> None:
        base = {**operation_attributes(attempt), n.ROUTE: attempt.route}
        self.duration.record(attempt.latency_ms / 1000, base)
        if attempt.streamed and attempt.ttft_ms is not None:
            self.first_chunk.record(attempt.ttft_ms / 1000, base)
        tokens = _all_input(attempt), attempt.output_tokens
        if any(tokens):
            self.tokens.record(tokens[0], {**base, n.TOKEN_TYPE: n.TOKEN_INPUT})
            self.tokens.record(tokens[1], {**base, n.TOKEN_TYPE: n.TOKEN_OUTPUT})


# --- attributes (pure) ---------------------------------------------------------------------


def operation_attributes(attempt: Attempt) -> dict[str, Any]:
    """What identifies one GenAI client operation, on its span and its metrics alike: the
    operation, provider and model, and the model that answered or the error type."""
    attributes: dict[str, Any] = {
        n.OPERATION_NAME: n.OPERATION,
        n.PROVIDER_NAME: attempt.provider_kind,
        n.REQUEST_MODEL: attempt.model,
    }
    if attempt.outcome == "success":
        attributes[n.RESPONSE_MODEL] = attempt.model
    else:
        attributes[n.ERROR_TYPE] = _error_type(attempt)
    return attributes


def attempt_attributes(attempt: Attempt, cost: Decimal | None) -> dict[str, Any]:
    """An attempt span's attributes: names, counts, times and classes, never text or keys."""
    a = attempt
    attributes: dict[str, Any] = {
        **operation_attributes(a),
        n.REQUEST_STREAM: a.streamed,
        **_usage(a),
        n.ROUTE: a.route,
        n.TARGET: a.target,
        n.DECISION: str(a.decision),
        n.FALLBACK_DEPTH: a.fallback_depth,
        n.BREAKER_STATE: a.breaker_state,
        n.ATTEMPT_NUMBER: a.attempt_number,
        n.REQUEST_ID: a.request_id,
        n.SERVED: a.served,
    }
    if a.http_status is not None:
        attributes[n.HTTP_STATUS] = a.http_status
    if a.provider_request_id:
        attributes[n.RESPONSE_ID] = a.provider_request_id
    if a.streamed and a.ttft_ms is not None:
        attributes[n.TIME_TO_FIRST_CHUNK_ATTR] = a.ttft_ms / 1000
    if cost is not None:
        attributes[n.COST_USD] = float(cost)
    return attributes


def request_attributes(done: RequestDone, costs: list[Decimal | None]) -> dict[str, Any]:
    """The request span's: the route as its model, the answer's usage (the served attempt's),
    what every attempt cost together (when all were priced)."""
    attributes: dict[str, Any] = {
        n.OPERATION_NAME: n.OPERATION,
        n.REQUEST_MODEL: done.route,
        n.REQUEST_STREAM: done.streamed,
        n.ROUTE: done.route,
        n.REQUEST_ID: done.request_id,
        n.ATTEMPTS: len(done.attempts),
    }
    served = next((a for a in reversed(done.attempts) if a.served), None)
    if served is not None:
        attributes[n.PROVIDER_NAME] = served.provider_kind
        attributes[n.RESPONSE_MODEL] = served.model
        attributes[n.SERVED_BY] = served.target
        attributes[n.FALLBACK_DEPTH] = served.fallback_depth
        attributes.update(_usage(served))
    if done.attempts:
        attributes[n.DECISION] = str(done.attempts[-1].decision)
    if done.error_type is not None:
        attributes[n.ERROR_TYPE] = done.error_type
    if costs and all(c is not None for c in costs):
        attributes[n.COST_USD] = float(sum(c for c in costs if c is not None))
    return attributes


def _usage(a: Attempt) -> dict[str, int]:
    return {
        n.INPUT_TOKENS: _all_input(a),
        n.OUTPUT_TOKENS: a.output_tokens,
        n.CACHE_READ_TOKENS: a.cache_read_tokens,
        n.CACHE_CREATION_TOKENS: a.cache_write_tokens,
    }


def _all_input(a: Attempt) -> int:
    """The convention's input count includes the cache's; an Attempt's excludes it."""
    return a.input_tokens + a.cache_read_tokens + a.cache_write_tokens


def _error_type(a: Attempt) -> str:
    return a.error_class or ("cancelled" if a.outcome == "cancelled" else "_OTHER")


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1e9)
