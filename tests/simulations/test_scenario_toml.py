"""Scenarios as TOML: the fields of recorded traffic read and checked, and every scenario written
back (`to_toml`) reads as the same scenario."""

from __future__ import annotations

import dataclasses
import tomllib
from decimal import Decimal

import pytest

from engine.behaviours.contracts import OutputContract
from engine.core.errors import ConfigError
from simulations.whatif.scenario import Latency, library, load_scenario, parse_scenario
from simulations.whatif.scenario_toml import to_toml

SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {
        "answer": {"type": "string", "maxLength": 400},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "score": {"anyOf": [{"type": "integer"}, {"type": "number", "minimum": 0.5}]},
    },
}
EVERYTHING = {
    "name": "Every option — \"quoted\" \\ and ünïcode",
    "description": "Two lines:\nthe second with a tab\tand a quote \"\"\" inside.",
    "duration": "90m",
    "start": "2026-11-24T14:00:00Z",
    "seed": 11,
    "backups": ["gpt/gpt-4.1-mini", "groq/llama-3.3-70b-versatile"],
    "traffic_scale": 0.25,
    "providers": {
        "claude": {"kind": "anthropic", "base_url": "http://127.0.0.1:8700",
                   "api_key_env": "DEMO_KEY", "key_kind": "own", "default_max_tokens": 512,
                   "connect_timeout_s": 2.5, "headers": {"anthropic-beta": "x"}},
        "gpt": {"kind": "openai", "supports_prefill": True},
        "local": {"kind": "openai", "base_url": "http://10.0.0.1:8000/v1",
                  "price_provider": "groq"},
    },
    "prompts": {
        "support-gpt": {"version": "3", "template": "{system}\nAnswer briefly."},
        "plain": {"version": "2026-11-30", "system": "You are terse."},
    },
    "routes": {
        "support": {
            "targets": ["claude/claude-sonnet-4-5",
                        {"target": "gpt/gpt-4.1-mini", "prompt": "support-gpt"},
                        {"target": "local/llama-3.1-70b", "context_window": 8192}],
            "budget_s": 20, "primary_retries": 0, "pii": ["cpf", "email"], "pii_restore": True,
            "output_schema": SCHEMA, "on_quality_error": "fall_back",
            "on_stream_failure": "continue", "adaptive_order": True, "own_keys_first": True,
        },
        "classify": {"targets": ["gpt/gpt-4.1-mini", {"target": "claude/claude-haiku-4-5",
                                                       "prompt": "plain"}], "pii": True},
    },
    "policy": {"breaker_cooldown_s": 20, "backoff_base_s": 0.15},
    "prices": {"local/llama-3.1-70b": {"input_mtok": 0.6, "output_mtok": "0.123456789012345678",
                                       "cache_read_mtok": 0.075, "source": "our GPU sheet"}},
    "traffic": {
        "rate_per_s": 3.5, "daily_curve": True,
        "routes": {
            "support": {"input_tokens": 1331, "output_tokens": 11, "cached_share": 0.9867,
                        "per_minute": [2, 0, 3.5, 1] * 20,
                        "input_quantiles": [1300, 1310, 1328, 1400, 2100],
                        "output_quantiles": [8, 9, 12, 40]},
            "classify": {"share": 0.35, "input_tokens": 46, "output_tokens": 5},
        },
    },
    "latency": {
        "median_ms": 347.1, "p99_ms": 2196.0,
        "claude/claude-haiku-4-5": {"median_ms": 354.6, "p99_ms": 2165.6, "ttft_ms": 180.25},
        "gpt/gpt-4.1-mini": {"median_ms": 349.7, "p99_ms": 2060},
    },
    "faults": [
        {"target": "claude/claude-sonnet-4-5", "kind": "overloaded", "start": "10m", "end": "55m"},
        {"target": "gpt", "kind": "rate_limit", "start": 61.5, "end": "70m", "rate": 0.4,
         "retry_after_s": 20},
        {"target": "claude/claude-haiku-4-5", "kind": "slow", "start": "1h", "end": "80m",
         "median_ms": 4000, "p99_ms": 12000},
        {"target": "claude", "kind": "server_error", "start": 0, "end": "90m",
         "flapping": {"period": "10m", "down": "150s"}},
    ],
    "limits": {"gpt/gpt-4.1-mini": {"rpm": 5000, "tpm": 2000000},
               "claude/claude-haiku-4-5": {"input_tpm": 400000, "output_tpm": 80000}},
}  # fmt: skip


def _again(scenario, text=None):
    return parse_scenario(tomllib.loads(text or to_toml(scenario)), source=scenario.source)


@pytest.mark.parametrize("path", library(), ids=lambda p: p.stem)
def test_every_library_scenario_reads_back_equal_from_its_toml(path):
    scenario = load_scenario(path)
    assert _again(scenario) == scenario


def test_a_scenario_with_every_option_reads_back_equal_from_its_toml():
    scenario = parse_scenario(EVERYTHING, source="everything.toml")
    again = _again(scenario)
    assert again == scenario
    # Equality of a Config leaves a target's prompt aside: compare what each target sends.
    for name, route in scenario.config.routes.items():
        assert [t.prompt for t in again.config.routes[name].targets] == [
            t.prompt for t in route.targets
        ]
    assert again.config.prices["local/llama-3.1-70b"].output_mtok == Decimal("0.123456789012345678")


def test_the_written_scenario_reads_as_a_person_writes_one():
    text = to_toml(parse_scenario(EVERYTHING, source="everything.toml"))
    assert 'duration = "90m"' in text and "start = 2026-11-24T14:00:00Z" in text
    assert '[latency."claude/claude-haiku-4-5"]' in text and "[[faults]]" in text
    assert 'flapping = { period = "10m", down = "150s" }' in text
    assert text.index("[providers.claude]") < text.index("[routes.support]") < text.index(
        "[traffic]"
    ) < text.index("[[faults]]")  # fmt: skip
    assert max(len(line) for line in text.splitlines()) <= 100, "long lists are wrapped"


def test_a_schema_toml_cannot_hold_is_refused_not_changed():
    """A JSON Schema may hold null (a default, an enum member); TOML has none."""
    scenario = parse_scenario(EVERYTHING, source="s")
    route = scenario.config.routes["support"]
    contract = OutputContract({"type": "object", "properties": {"a": {"default": None}}})
    route = dataclasses.replace(route, options=dataclasses.replace(route.options,
                                                                   contract=contract))  # fmt: skip
    config = dataclasses.replace(scenario.config, routes={**scenario.config.routes,
                                                          "support": route})  # fmt: skip
    with pytest.raises(ConfigError, match="JSON null cannot be written as TOML"):
        to_toml(dataclasses.replace(scenario, config=config))


def test_recorded_traffic_fields_are_read_as_given():
    scenario = parse_scenario(EVERYTHING, source="s")
    support = scenario.routes["support"]
    assert support.per_minute[:4] == (2.0, 0.0, 3.5, 1.0) and support.share == 0
    assert support.input_quantiles == (1300, 1310, 1328, 1400, 2100)
    assert scenario.traffic_scale == 0.25
    assert scenario.target_latency["claude/claude-haiku-4-5"] == Latency(354.6, 2165.6, 180.25)
    assert scenario.target_latency["gpt/gpt-4.1-mini"].ttft_ms is None
    assert (scenario.median_ms, scenario.p99_ms) == (347.1, 2196.0)


def test_sizes_given_only_as_quantiles_take_their_mean():
    routes = {"support": {"per_minute": [1], "input_quantiles": [100, 200, 600],
                          "output_quantiles": [10, 10]}}  # fmt: skip
    scenario = parse_scenario(_with_traffic(routes), source="s")
    # Linear between evenly spaced quantiles: (100+200)/2 and (200+600)/2, averaged.
    assert scenario.routes["support"].input_tokens == 275
    assert scenario.routes["support"].output_tokens == 10


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"per_minute": [1, -2], "input_tokens": 1, "output_tokens": 1}, "per_minute: must be"),
        ({"per_minute": [1] * 61, "input_tokens": 1, "output_tokens": 1},
         "per_minute: has 61 minutes; the scenario lasts 60"),
        ({"per_minute": [1], "input_quantiles": [5, 3], "output_tokens": 1},
         "input_quantiles: must be at least two token counts, ascending"),
        ({"per_minute": [1], "input_quantiles": [5], "output_tokens": 1}, "input_quantiles"),
        ({"input_tokens": 1, "output_tokens": 1}, "share: must be a positive number"),
        ({"per_minute": [1], "output_tokens": 1}, "input_tokens: must be a positive number"),
        ({"share": 1, "input_tokens": 1, "output_tokens": 1, "per_minut": [1]},
         "per_minut: unknown key"),
    ],
)  # fmt: skip
def test_bad_recorded_traffic_says_which_key_is_wrong(route, message):
    with pytest.raises(ConfigError, match=message):
        parse_scenario(_with_traffic({"support": route}), source="s")


@pytest.mark.parametrize(
    ("latency", "message"),
    [
        ({"claude/claude-haiku-4-5": {"median_ms": 0, "p99_ms": 9}}, "median_ms: must be"),
        ({"claude/claude-haiku-4-5": {"median_ms": 1, "p99_ms": 9, "p50": 1}}, "p50: unknown"),
        ({"haiku": {"median_ms": 1, "p99_ms": 9}}, 'name a target as "provider/model"'),
        ({"p95_ms": 3}, "latency.p95_ms: unknown key"),
    ],
)
def test_bad_latency_says_which_key_is_wrong(latency, message):
    with pytest.raises(ConfigError, match=message):
        parse_scenario({**_with_traffic(None), "latency": latency}, source="s")


@pytest.mark.parametrize("scale", [0, -1, "half", float("inf")])
def test_the_traffic_scale_is_a_positive_number(scale):
    with pytest.raises(ConfigError, match="traffic_scale: must be a positive number"):
        parse_scenario({**_with_traffic(None), "traffic_scale": scale}, source="s")


def _with_traffic(routes):
    return {
        "duration": "1h",
        "providers": {"claude": {"kind": "anthropic"}},
        "routes": {"support": {"targets": ["claude/claude-sonnet-4-5"]}},
        "traffic": {"routes": routes or {"support": {"share": 1, "input_tokens": 10,
                                                     "output_tokens": 5}}},
    }  # fmt: skip
