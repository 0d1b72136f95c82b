"""The OpenTelemetry export through the real chain, on the in-memory exporter and reader: a
request span with a child per attempt, the GenAI metrics, error.type on failures."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.chain_rig import BACKUP, KEYS, PRIMARY, PROMPT, Rig
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from engine.core.errors import RequestFailed
from engine.core.pricing import Pricer
from engine.telemetry import otel_names as n
from engine.telemetry.otel import OtelExporter


@pytest.fixture
def otel():
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    exporter = OtelExporter(span_exporter=spans, metric_reader=metrics, pricer=Pricer())
    yield exporter, spans, metrics
    exporter.shutdown()


def rig_with(otel: Any, **policy: Any) -> Rig:
    rig = Rig(**policy)
    rig.chain.request_hooks.append(otel[0])
    return rig


def finished(otel: Any) -> tuple[Any, list[Any]]:
    """The one request span and its attempt children, in order, after a flush."""
    exporter, spans, _ = otel
    assert exporter.force_flush()
    done = spans.get_finished_spans()
    [request] = [s for s in done if s.parent is None]
    children = sorted((s for s in done if s.parent is not None), key=lambda s: s.start_time)
    assert all(c.parent.span_id == request.context.span_id for c in children)
    return request, children


def points(otel: Any) -> dict[str, Any]:
    data = otel[2].get_metrics_data()
    return {m.name: m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}


def test_a_request_that_falls_back_is_one_request_span_with_an_attempt_child_each(otel):
    rig = rig_with(otel, primary_retries=0)
    rig.script(PRIMARY, "529")
    assert rig.complete().provider == "gpt"
    request, (first, second) = finished(otel)
    assert request.name == "chat support" and request.kind is SpanKind.INTERNAL
    assert request.status.status_code is StatusCode.UNSET
    assert request.attributes[n.OPERATION_NAME] == "chat"
    assert request.attributes[n.REQUEST_MODEL] == "support"
    assert request.attributes[n.RESPONSE_MODEL] == "gpt-4o"
    assert request.attributes[n.SERVED_BY] == BACKUP
    assert request.attributes[n.FALLBACK_DEPTH] == 1 and request.attributes[n.ATTEMPTS] == 2
    assert n.ERROR_TYPE not in request.attributes
    assert first.name == "chat claude-sonnet-4-5" and first.kind is SpanKind.CLIENT
    assert first.attributes[n.PROVIDER_NAME] == "anthropic"
    assert first.attributes[n.ERROR_TYPE] == "overloaded"
    assert first.attributes[n.DECISION] == "fall_back"
    assert first.attributes[n.TARGET] == PRIMARY
    assert first.attributes[n.ATTEMPT_NUMBER] == 1 and first.attributes[n.SERVED] is False
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes[n.PROVIDER_NAME] == "openai"
    assert second.attributes[n.RESPONSE_MODEL] == "gpt-4o"
    assert second.attributes[n.DECISION] == "served"
    assert second.attributes[n.FALLBACK_DEPTH] == 1
    assert second.attributes[n.BREAKER_STATE] == "closed"
    assert second.attributes[n.OUTPUT_TOKENS] > 0
    assert second.attributes[n.REQUEST_ID] == request.attributes[n.REQUEST_ID]
    assert second.attributes[n.COST_USD] > 0
    assert first.start_time <= second.start_time <= second.end_time <= request.end_time


def test_the_attempt_spans_carry_no_prompt_text_and_no_key(otel):
    rig = rig_with(otel, primary_retries=0)
    rig.script(PRIMARY, "529")
    rig.complete()
    request, children = finished(otel)
    values = " ".join(str(v) for s in (request, *children) for v in s.attributes.values())
    assert "4111" not in values and PROMPT not in values
    assert not any(key in values for key in KEYS.values())


def test_input_tokens_count_the_cache_as_the_convention_says(otel):
    rig = rig_with(otel)
    rig.complete()
    _, [attempt] = finished(otel)
    a = rig.attempts[0]
    all_input = a.input_tokens + a.cache_read_tokens + a.cache_write_tokens
    assert attempt.attributes[n.INPUT_TOKENS] == all_input
    assert attempt.attributes[n.CACHE_READ_TOKENS] == a.cache_read_tokens
    assert attempt.attributes[n.CACHE_CREATION_TOKENS] == a.cache_write_tokens


def test_a_failed_request_carries_error_type_on_its_span_and_its_metrics(otel):
    rig = rig_with(otel, primary_retries=0)
    rig.script(PRIMARY, "invalid_request")
    with pytest.raises(RequestFailed):
        rig.complete()
    request, [attempt] = finished(otel)
    assert request.status.status_code is StatusCode.ERROR
    assert request.attributes[n.ERROR_TYPE] == attempt.attributes[n.ERROR_TYPE]
    assert attempt.attributes[n.DECISION] == "fail_fast"
    [point] = points(otel)[n.OPERATION_DURATION].data.data_points
    assert point.attributes[n.ERROR_TYPE] == request.attributes[n.ERROR_TYPE]


def test_every_target_failing_is_all_unavailable_on_the_request_span(otel):
    rig = rig_with(otel, primary_retries=0)
    rig.fake.set_default("529")
    rig.fails()
    request, children = finished(otel)
    assert request.attributes[n.ERROR_TYPE] == "all_unavailable" and len(children) == 2
    assert n.RESPONSE_MODEL not in request.attributes


def test_the_genai_metrics_have_the_conventions_names_units_and_buckets(otel):
    rig = rig_with(otel, primary_retries=0)
    rig.script(PRIMARY, "529")
    rig.complete()
    rig.stream()
    otel[0].force_flush()
    found = points(otel)
    tokens, duration = found[n.TOKEN_USAGE], found[n.OPERATION_DURATION]
    assert (tokens.unit, duration.unit, found[n.TIME_TO_FIRST_CHUNK].unit) == ("{token}", "s", "s")
    kinds = {p.attributes[n.TOKEN_TYPE] for p in tokens.data.data_points}
    assert kinds == {"input", "output"}
    assert all(tuple(p.explicit_bounds) == n.TOKEN_BUCKETS for p in tokens.data.data_points)
    assert all(tuple(p.explicit_bounds) == n.DURATION_BUCKETS for p in duration.data.data_points)
    by_provider = {
        (p.attributes[n.PROVIDER_NAME], p.attributes.get(n.ERROR_TYPE)): p.count
        for p in duration.data.data_points
    }
    assert by_provider == {
        ("anthropic", "overloaded"): 1,
        ("openai", None): 1,
        ("anthropic", None): 1,
    }
    [first_chunk] = found[n.TIME_TO_FIRST_CHUNK].data.data_points
    assert first_chunk.count == 1 and first_chunk.attributes[n.ROUTE] == "support"
    assert tuple(first_chunk.explicit_bounds) == n.FIRST_CHUNK_BUCKETS


def test_a_stream_is_a_request_span_with_its_time_to_first_chunk(otel):
    rig = rig_with(otel)
    rig.stream()
    request, [attempt] = finished(otel)
    assert request.attributes[n.REQUEST_STREAM] is True
    assert attempt.attributes[n.TIME_TO_FIRST_CHUNK_ATTR] >= 0


def test_a_hook_that_cannot_keep_up_drops_the_oldest_and_counts_them():
    exporter = OtelExporter(span_exporter=None, metric_reader=None, max_buffered=2)
    try:
        exporter._stop.set()  # the thread idle: the buffer only fills
        rig = Rig()
        rig.chain.request_hooks.append(exporter)
        for _ in range(5):
            rig.complete()
        assert exporter.dropped >= 1 and len(exporter._buffer) <= 2
    finally:
        exporter.shutdown()
