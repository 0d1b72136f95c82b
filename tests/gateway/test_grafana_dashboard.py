"""docs/grafana/switchover-gateway.json, the dashboard users import into Grafana, queries only
what the gateway exports: every panel's PromQL names metrics (and groups by labels) that a real
gateway's /metrics shows after traffic, so a renamed metric fails here and not on a team's
wall during an incident."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import jsonschema

from engine.core.paths import DataPaths

from .conftest import GatewayFactory
from .test_app import ANTHROPIC_PATH, OPENAI_PATH, body

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "switchover-gateway.json"

# What Grafana needs of an imported dashboard for its panels to run: the shape is checked
# before the queries are.
_TARGET = {
    "type": "object",
    "required": ["refId", "expr"],
    "properties": {"refId": {"type": "string"}, "expr": {"type": "string", "minLength": 1}},
}
SCHEMA = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "datasource", "targets"],
                "properties": {
                    "type": {"enum": ["timeseries", "state-timeline", "stat", "table"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["h", "w", "x", "y"],
                        "properties": {"w": {"type": "integer", "maximum": 24}},
                    },
                    "datasource": {
                        "type": "object",
                        "required": ["type", "uid"],
                        "properties": {"type": {"const": "prometheus"}},
                    },
                    "targets": {"type": "array", "minItems": 1, "items": _TARGET},
                },
            },
        },
    },
}

_TYPE_LINE = re.compile(r"^# TYPE (\S+) (counter|gauge|histogram|summary)$")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ")
_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
_METRIC = re.compile(r"\b(switchover_[a-z0-9_]+)\b")
_GROUPING = re.compile(r"\bby \(([^)]*)\)")
_MATCHER = re.compile(r"\b(switchover_[a-z0-9_]+)\{([^}]*)\}")


def exported(exposition: str) -> dict[str, set[str]]:
    """Every series name a scrape can show (a family's names with their type's suffixes), each
    with the labels its samples carry."""
    names: dict[str, set[str]] = {}
    for line in exposition.splitlines():
        if match := _TYPE_LINE.match(line):
            family, kind = match.groups()
            # The text format names a counter's family with its `_total` already.
            family = family.removesuffix("_total") if kind == "counter" else family
            for suffix in _SUFFIXES[kind]:
                names.setdefault(family + suffix, set())
        elif (match := _SAMPLE.match(line)) and match.group(1) in names:
            labels = match.group(2) or ""
            names[match.group(1)] |= {pair.split("=")[0] for pair in labels.split(",") if pair}
    return names


def problems(expr: str, names: dict[str, set[str]]) -> list[str]:
    """What in one PromQL query the gateway does not export: unknown series, and labels that
    the query groups by or matches on but that none of its series carries."""
    metrics = set(_METRIC.findall(expr))
    if not metrics:
        return [f"{expr!r} reads no switchover metric"]
    found = [f"unknown metric {m}" for m in sorted(metrics) if m not in names]
    known = set().union(*(names.get(m, set()) for m in metrics))
    for group in _GROUPING.findall(expr):
        for label in filter(None, (part.strip() for part in group.split(","))):
            if label not in known:
                found.append(f"{expr!r} groups by {label!r}, which no series of it carries")
    for metric, matchers in _MATCHER.findall(expr):
        for label in re.findall(r"([a-z_]+)\s*[=!~]", matchers):
            if label not in names.get(metric, set()):
                found.append(f"{metric} has no label {label!r}")
    return found


def _scrape_after_traffic(gateway: GatewayFactory, tmp_path: Path) -> str:
    gw = gateway(
        {"support": ["claude/primary#529", "gpt/gpt-4o-mini"]},
        record_to=DataPaths(tmp_path / "data"),
    )
    assert httpx.post(gw.url + OPENAI_PATH, json=body("support")).status_code == 200
    streamed = httpx.post(gw.url + ANTHROPIC_PATH, json=body("support", stream=True))
    assert streamed.status_code == 200
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()  # the cost counter moves when the recorder prices what it writes
    return httpx.get(gw.url + "/metrics").text


def test_the_grafana_dashboard_has_the_shape_grafana_imports():
    dashboard = json.loads(DASHBOARD.read_text())
    jsonschema.validate(dashboard, SCHEMA)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_every_panel_queries_metrics_and_labels_the_gateway_exports(
    gateway: GatewayFactory, tmp_path: Path
):
    names = exported(_scrape_after_traffic(gateway, tmp_path))
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    found = [problem for expr in queries for problem in problems(expr, names)]
    assert found == []
    read = set().union(*(_METRIC.findall(expr) for expr in queries))
    # What the issue asks the dashboard to show: requests, fallback rate, breakers, cost, TTFT.
    for wanted in (
        "switchover_gateway_requests_total",
        "switchover_gateway_fallbacks_total",
        "switchover_breaker_state",
        "switchover_cost_usd_total",
        "switchover_gateway_time_to_first_token_seconds_bucket",
    ):
        assert wanted in read, f"no panel shows {wanted}"


def test_the_check_catches_a_renamed_metric_or_label():
    names = {"switchover_gateway_requests_total": {"route", "dialect", "outcome"}}
    assert problems("sum(rate(switchover_gateway_requests_total[5m]))", names) == []
    assert problems("rate(switchover_gateway_request_total[5m])", names) == [
        "unknown metric switchover_gateway_request_total"
    ]
    grouped = problems("sum by (target) (rate(switchover_gateway_requests_total[5m]))", names)
    assert len(grouped) == 1 and "'target'" in grouped[0]
    matched = problems('switchover_gateway_requests_total{model="x"}', names)
    assert matched == ["switchover_gateway_requests_total has no label 'model'"]
    assert problems("up", names) == ["'up' reads no switchover metric"]
