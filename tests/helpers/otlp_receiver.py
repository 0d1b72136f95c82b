"""A real OTLP/HTTP receiver on loopback: accepts POST /v1/traces and /v1/metrics, decodes the
protobuf bodies with `opentelemetry.proto` (what a collector does), and keeps what arrived.

    with OtlpReceiver() as receiver:
        ... configure `otlp_endpoint = receiver.url`, send requests, flush the exporter ...
        receiver.spans()   # every span received, as (name, attributes, span)
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

_DECODERS = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


class OtlpReceiver:
    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, lower-cased names
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                decoders = _DECODERS.get(self.path)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if decoders is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                message = decoders[0].FromString(body)
                with receiver._lock:
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    target = receiver.traces if self.path == "/v1/traces" else receiver.metrics
                    target.append(message)
                reply = decoders[1]().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def spans(self) -> list[tuple[str, dict[str, Any], Any]]:
        with self._lock:
            requests = list(self.traces)
        return [
            (span.name, attributes(span.attributes), span)
            for request in requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def resource_attributes(self) -> list[dict[str, Any]]:
        with self._lock:
            requests = [*self.traces, *self.metrics]
        found = []
        for request in requests:
            for resource in getattr(request, "resource_spans", None) or request.resource_metrics:
                found.append(attributes(resource.resource.attributes))
        return found

    def metric_names(self) -> dict[str, Any]:
        """Every metric received by name (the last one of each), with its unit and points."""
        with self._lock:
            requests = list(self.metrics)
        return {
            metric.name: metric
            for request in requests
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


def attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None
