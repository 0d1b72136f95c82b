"""The fault catalogue as data, and the fault-spec syntax."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulations.fakes.faults import CATALOGUE, FAULT_NAMES, FAULTS, embedded_fault, parse_spec

CATALOGUE_MD = Path("/work/shared/reference/fault-catalogue.md")


def test_every_catalogue_row_has_at_least_one_named_fault():
    rows = set(range(1, 27))
    if CATALOGUE_MD.exists():  # the shared reference, when this checkout sits beside it
        rows = {int(n) for n in re.findall(r"^\| (\d+) \|", CATALOGUE_MD.read_text(), re.M)}
    assert rows <= {f.row for f in CATALOGUE}


def test_every_http_error_fault_has_a_shape_in_both_dialects():
    for fault in CATALOGUE:
        if fault.kind in ("error", "rate_limit"):
            assert fault.anthropic is not None and fault.openai is not None, fault.name


def test_names_are_unique_and_listed():
    assert len(FAULT_NAMES) == len(set(FAULT_NAMES)) == len(CATALOGUE)
    assert {"ok", "overloaded", "rate_limit", "reset", "stream_cut", "bad_tool_args"} <= set(FAULTS)


@pytest.mark.parametrize(
    ("spec", "name", "params"),
    [
        ("overloaded", "overloaded", {}),
        ("529", "overloaded", {}),
        ("429", "rate_limit", {}),
        ("522", "cf_52x", {"status": 522}),
        ("rate_limit:retry_after=3", "rate_limit", {"retry_after": 3}),
        (
            "rate_limit:retry_after=1.5,reset=date",
            "rate_limit",
            {"retry_after": 1.5, "reset": "date"},
        ),
        ("slow_drip:start=true,interval=0.01", "slow_drip", {"start": True, "interval": 0.01}),
        ({"fault": "stream_cut", "after_events": 3}, "stream_cut", {"after_events": 3}),
        ('{"fault": "reset", "mode": "fin"}', "reset", {"mode": "fin"}),
        ("read_timeout:delay=inf", "read_timeout", {"delay": float("inf")}),
    ],
)
def test_specs_parse_from_strings_and_objects(spec, name, params):
    parsed = parse_spec(spec)
    assert parsed.name == name
    assert dict(parsed.params) == params


def test_a_parsed_spec_prints_back_as_a_spec():
    spec = parse_spec("rate_limit:retry_after=3,reset=date")
    assert parse_spec(str(spec)) == spec


def test_missing_parameters_fall_back_to_the_fault_defaults():
    assert parse_spec("rate_limit").get("retry_after") == 3
    assert parse_spec("rate_limit_long").get("retry_after") == 3600
    assert parse_spec("stream_cut").get("after_events") == 3
    bad_event = parse_spec("bad_event")
    assert (bad_event.get("after_events"), bad_event.get("count")) == (3, 1)


@pytest.mark.parametrize(
    "bad", ["no_such_fault", "rate_limit:retry_after", "ok:rate=2", {"after": 1}, 42]
)
def test_a_bad_spec_is_refused_with_a_reason(bad):
    with pytest.raises(ValueError):
        parse_spec(bad)


@pytest.mark.parametrize(
    ("error_type", "fault"),
    [
        ("overloaded_error", "overloaded"),
        ("api_error", "server_error"),
        ("rate_limit_error", "rate_limit"),
        ("insufficient_quota", "quota"),
        ("context_length_exceeded", "context_overflow"),
        ("auth", "auth"),
    ],
)
def test_embedded_errors_are_named_by_either_dialects_type_or_by_fault(error_type, fault):
    assert embedded_fault(error_type).name == fault


def test_only_http_error_faults_can_be_embedded():
    with pytest.raises(ValueError):
        embedded_fault("stream_cut")
