"""The simulator runs the route production runs: its chain for a route with every option equals
the one `Switchover` builds from the same configuration (targets, prompts, context windows,
price providers, PII, contract, order and policy); only the providers under it differ."""

from __future__ import annotations

import tomllib

from engine.config import parse_config
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from simulations.whatif.scenario import parse_scenario
from simulations.whatif.simulate import _Run

CONFIG = """
[providers.claude]
kind = "anthropic"
[providers.fast]
kind = "openai"
base_url = "http://vllm:8000/v1"
price_provider = "groq"
supports_prefill = true

[prompts.fast-support]
version = 3
template = "{system}\\nAnswer in Portuguese."

[routes.support]
targets = ["claude/claude-sonnet-4-5", {target = "fast/llama-3.3-70b-versatile", prompt = "fast-support", context_window = 128000}]
budget_s = 12
primary_retries = 0
pii = ["cpf", "card"]
pii_restore = true
adaptive_order = true
on_quality_error = "fall_back"
on_stream_failure = "continue"
output_schema = { type = "object", required = ["intent"], properties = { intent = { type = "string" } } }
"""  # noqa: E501


def _described(chain) -> dict:
    return {
        "route": chain.route,
        "targets": [
            (
                t.name,
                t.key_kind,
                t.prompt and t.prompt.label,
                t.context_window,
                t.price_provider,
                t.prefill,
            )
            for t in chain.targets
        ],
        "policy": chain.policy,
        "pii": chain.pii,
        "contract": chain.contract and chain.contract.schema,
        "fall_back_on_quality": chain.fall_back_on_quality,
        "continue_streams": chain.continue_streams,
        "order": type(chain.order).__name__ if chain.order else None,
        "adaptive": bool(chain.order and chain.order.scores is not None),
    }


def test_the_simulators_chain_is_productions_for_a_route_with_every_option(tmp_path):
    data = tomllib.loads(CONFIG)
    config = parse_config(data)
    production = Switchover(config, environ={})
    scenario = parse_scenario(
        {
            **data,
            "traffic": {
                "routes": {"support": {"share": 1, "input_tokens": 100, "output_tokens": 10}}
            },
        }
    )
    simulated = _Run(
        scenario, scenario.config, [], DataPaths(tmp_path), faults=True, fast_forward=True
    )
    ours, theirs = production.chain("support"), simulated.host.chain("support")
    assert _described(theirs) == _described(ours)
    described = _described(ours)
    assert described["pii"] is not None and described["contract"] is not None
    assert described["targets"][1][2] is not None, "the backup's own prompt is kept"
    assert described["adaptive"] and described["continue_streams"]
    assert type(theirs.targets[0].provider).__name__ == "SimulatedProvider"
    production.close()
