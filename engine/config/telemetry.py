"""[telemetry]: the opt-in OpenTelemetry export (spans and the GenAI metrics over OTLP/HTTP,
engine.telemetry.otel); absent, and without the standard `OTEL_*` variables, nothing is exported.

    [telemetry]
    otlp_endpoint = "http://127.0.0.1:4318"   # the collector's base URL: /v1/traces, /v1/metrics
    service_name = "switchover"
    headers_env = "OTLP_HEADERS"               # names the variable holding "k=v,k2=v2" headers
    export_timeout_s = 2

The file's keys win over the environment (the file is the operator's word for this deployment;
`OTEL_*` variables are often set machine-wide for other programs); each key it leaves out falls
back to the standard variable. `OTEL_SDK_DISABLED=true` turns the export off whatever the file
says: it is the standard switch for turning OpenTelemetry off in an emergency. Headers (a
collector's token) are secrets: never in the file, only through a variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from engine.config.checks import Fail, no_unknown, table_of

_TELEMETRY_KEYS = ("otlp_endpoint", "service_name", "headers_env", "export_timeout_s")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DEFAULT_SERVICE = "switchover"
DEFAULT_TIMEOUT_S = 2.0
# The standard variables read (opentelemetry.io/docs/specs/otel/protocol/exporter/).
ENDPOINT, TRACES_ENDPOINT, METRICS_ENDPOINT = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
HEADERS, SERVICE_NAME, SDK_DISABLED = (
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_SDK_DISABLED",
)


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """[telemetry] as written; `export(environ)` says what is exported, the environment read."""

    otlp_endpoint: str | None = None
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "switchover"
    headers_env: str | None = None  # None: OTEL_EXPORTER_OTLP_HEADERS
    export_timeout_s: float = DEFAULT_TIMEOUT_S  # one export's bound, and shutdown's per signal

    def export(self, environ: Mapping[str, str]) -> OtlpExport | None:
        """Where spans and metrics go, or None: nothing configured, or OTEL_SDK_DISABLED."""
        if environ.get(SDK_DISABLED, "").strip().lower() == "true":
            return None
        base = self.otlp_endpoint or environ.get(ENDPOINT, "").strip() or None
        traces = _signal_url(self.otlp_endpoint, environ.get(TRACES_ENDPOINT), base, "traces")
        metrics = _signal_url(self.otlp_endpoint, environ.get(METRICS_ENDPOINT), base, "metrics")
        if traces is None and metrics is None:
            return None
        service = self.service_name or environ.get(SERVICE_NAME, "").strip() or DEFAULT_SERVICE
        raw = environ.get(self.headers_env or HEADERS, "")
        return OtlpExport(traces, metrics, service, parse_headers(raw), self.export_timeout_s)


@dataclass(frozen=True, slots=True)
class OtlpExport:
    """What the exporter is built with. `headers` may hold secrets: never logged or stored."""

    traces_url: str | None
    metrics_url: str | None
    service_name: str
    headers: Mapping[str, str]
    timeout_s: float

    def __repr__(self) -> str:  # the headers stay out of any log line that prints this
        return f"OtlpExport({self.traces_url!r}, {self.metrics_url!r}, {self.service_name!r})"


def _signal_url(
    from_file: str | None, signal_env: str | None, base: str | None, signal: str
) -> str | None:
    """A signal's URL: the file's base URL + /v1/<signal>; else the signal's own variable, used
    as it is (the specification's rule); else the base variable + /v1/<signal>."""
    if from_file is not None:
        return f"{from_file.rstrip('/')}/v1/{signal}"
    if signal_env and signal_env.strip():
        return signal_env.strip()
    return f"{base.rstrip('/')}/v1/{signal}" if base else None


def parse_headers(raw: str) -> dict[str, str]:
    """`k=v,k2=v2` (values URL-encoded), as OTEL_EXPORTER_OTLP_HEADERS; a malformed pair is
    left out rather than failing a start."""
    headers = {}
    for pair in raw.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers


def parse_telemetry(table: Any, fail: Fail) -> TelemetryConfig:
    table = table_of(table, "telemetry", fail)
    no_unknown(table, _TELEMETRY_KEYS, "telemetry", fail)
    endpoint = table.get("otlp_endpoint")
    if endpoint is not None and (
        not isinstance(endpoint, str)
        or not endpoint.startswith(("http://", "https://"))
        or len(endpoint) > 2048
    ):
        raise fail("telemetry.otlp_endpoint", "must be an http:// or https:// URL")
    service = table.get("service_name")
    if service is not None and (not isinstance(service, str) or not _SERVICE.fullmatch(service)):
        raise fail(
            "telemetry.service_name", "must be letters, digits, '.', '_' or '-' (at most 128)"
        )
    headers_env = table.get("headers_env")
    if headers_env is not None and (
        not isinstance(headers_env, str) or not _ENV_NAME.fullmatch(headers_env)
    ):
        raise fail("telemetry.headers_env", "must name an environment variable (like OTLP_HEADERS)")
    timeout = table.get("export_timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 30:
        raise fail("telemetry.export_timeout_s", "must be a number of seconds in (0, 30]")
    return TelemetryConfig(endpoint, service, headers_env, float(timeout))
