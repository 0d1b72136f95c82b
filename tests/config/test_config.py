"""switchover.toml: the documented shape loads; every mistake fails with one line naming the key."""

from __future__ import annotations

import re
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from engine.config import load_config, parse_config
from engine.core.errors import ConfigError
from engine.core.pricing import GENAI_PRICES_SOURCE

ISSUE_EXAMPLE = """
[providers.claude]
kind = "anthropic"                 # anthropic | openai (any OpenAI-compatible server)
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"

[providers.gpt]
kind = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

[routes.support]                   # callers ask for the model "support"
targets = ["claude/claude-sonnet-4-5", "claude/claude-haiku-4-5", "gpt/gpt-4.1-mini"]
budget_s = 20

[policy]                           # defaults for every route; a route may override any
primary_retries = 1
breaker_failures = 5
breaker_cooldown_s = 30
max_retry_after_wait_s = 2
"""


def test_the_documented_example_loads(tmp_path: Path):
    path = tmp_path / "switchover.toml"
    path.write_text(ISSUE_EXAMPLE)
    config = load_config(path)
    route = config.routes["support"]
    assert [t.name for t in route.targets] == [
        "claude/claude-sonnet-4-5",
        "claude/claude-haiku-4-5",
        "gpt/gpt-4.1-mini",
    ]
    assert route.policy.budget_s == 20
    assert route.policy.breaker_failures == 5
    assert config.providers["gpt"].kind == "openai"


def test_the_readme_example_is_the_documented_one():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    assert tomllib.loads(block.group(1)) == tomllib.loads(ISSUE_EXAMPLE)


def test_a_route_overrides_the_policy_defaults():
    data = tomllib.loads(ISSUE_EXAMPLE)
    data["routes"]["classify"] = {"targets": ["gpt/gpt-4.1-mini"], "primary_retries": 0}
    config = parse_config(data)
    assert config.routes["classify"].policy.primary_retries == 0
    assert config.routes["classify"].policy.breaker_cooldown_s == 30
    assert config.routes["support"].policy.primary_retries == 1


def test_model_names_may_contain_slashes():
    data = tomllib.loads(ISSUE_EXAMPLE)
    data["routes"]["open"] = {"targets": ["gpt/meta-llama/Llama-3.1-8B"]}
    target = parse_config(data).routes["open"].targets[0]
    assert (target.provider, target.model) == ("gpt", "meta-llama/Llama-3.1-8B")


def _broken(mutate) -> str:
    data = tomllib.loads(ISSUE_EXAMPLE)
    mutate(data)
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["routes"]["support"]["targets"].append("gtp/gpt-4.1"),
            "routes.support.targets[3]: provider 'gtp' is not defined",
        ),
        (
            lambda d: d["routes"]["support"].update(targets=[]),
            "routes.support.targets: must be a non-empty list",
        ),
        (
            lambda d: d["routes"]["support"]["targets"].append("just-a-model"),
            "routes.support.targets[3]: 'just-a-model' is not of the form provider/model",
        ),
        (
            lambda d: d["providers"]["gpt"].update(kind="azure"),
            "providers.gpt.kind: must be one of",
        ),
        (
            lambda d: d["providers"]["gpt"].update(api_key="sk-live-123"),
            "providers.gpt.api_key: keys are never kept in the file",
        ),
        (
            lambda d: d["providers"]["gpt"].update(base_url="api.openai.com"),
            "providers.gpt.base_url: must be an http(s) URL",
        ),
        (
            lambda d: d["policy"].update(breaker_failurs=3),
            "policy.breaker_failurs: unknown key",
        ),
        (
            lambda d: d["policy"].update(breaker_failures="five"),
            "policy.breaker_failures: must be an integer",
        ),
        (lambda d: d["policy"].update(budget_s=-1), "policy: budget_s must not be negative"),
        (
            lambda d: d["routes"]["support"].update(budget_s=True),
            "routes.support.budget_s: must be a number",
        ),
        (lambda d: d.update(pricing={}), "pricing: unknown section"),
        (lambda d: d.update(prices=[]), "prices: must be a table"),
        (
            lambda d: d.update(prices={"local/llama-3": {"input_mtok": 0.1, "output_mtok": 0.2}}),
            'prices."local/llama-3".source: say where this price comes from',
        ),
        (
            lambda d: d.update(
                prices={"llama-3": {"input_mtok": 0.1, "output_mtok": 0.2, "source": "  "}}
            ),
            'prices."llama-3".source: say where this price comes from',
        ),
        (
            lambda d: d.update(prices={"llama-3": {"output_mtok": 0.2, "source": "GPU bill"}}),
            'prices."llama-3".input_mtok: missing: give the price in USD per million tokens',
        ),
        (
            lambda d: d.update(
                prices={"llama-3": {"input_mtok": -1, "output_mtok": 0.2, "source": "GPU bill"}}
            ),
            'prices."llama-3".input_mtok: must be a non-negative number of USD per million tokens',
        ),
        (
            lambda d: d.update(
                prices={"llama-3": {"input_mtok": 1, "output_mtok": "cheap", "source": "x"}}
            ),
            'prices."llama-3".output_mtok: must be a non-negative number of USD per million '
            "tokens (got 'cheap')",
        ),
        (
            lambda d: d.update(
                prices={"llama-3": {"input_mtok": 1, "output_mtok": 1, "source": "x", "cache": 1}}
            ),
            'prices."llama-3".cache: unknown key',
        ),
        (
            lambda d: d["providers"]["gpt"].update(price_provider="grq"),
            f"providers.gpt.price_provider: {GENAI_PRICES_SOURCE} has no provider 'grq'",
        ),
        (lambda d: d.update(providers={}), "providers: define at least one provider"),
        (
            lambda d: d["routes"]["support"].update(pii=["cpf", "rg"]),
            "routes.support.pii: unknown kind 'rg' (kinds: cpf, cnpj, email, phone, card,",
        ),
        (
            lambda d: d["routes"]["support"].update(pii_restore=True),
            "routes.support.pii_restore: restores what `pii` masks: set `pii` too",
        ),
        (
            lambda d: d["routes"]["support"].update(adaptive_order="yes"),
            "routes.support.adaptive_order: must be true or false",
        ),
        (
            lambda d: d["routes"]["support"].update(on_quality_error="retry"),
            "routes.support.on_quality_error: must be one of record, fall_back",
        ),
        (
            lambda d: d["routes"]["support"].update(output_schema={"type": "objekt"}),
            "routes.support.output_schema: invalid output contract",
        ),
        (
            lambda d: d["routes"]["support"].update(output_schema="schemas/none.json"),
            "routes.support.output_schema: no such file",
        ),
        (
            lambda d: d["routes"]["support"]["targets"].append(
                {"target": "gpt/gpt-4.1", "prompt": "gpt-support"}
            ),
            "routes.support.targets[3].prompt: no [prompts.gpt-support] (defined: none defined)",
        ),
        (
            lambda d: d.update(prompts={"p": {"system": "Be brief."}}),
            'prompts.p.version: give the prompt a version, like "3"',
        ),
        (
            lambda d: d.update(prompts={"p": {"version": 1, "system": "a", "template": "b"}}),
            "prompts.p: give exactly one of system",
        ),
        (
            lambda d: d.update(prompts={"p": {"version": 1, "template": "Answer in JSON."}}),
            "prompts.p.template: must contain {system}",
        ),
    ],
)
def test_each_mistake_names_its_key(mutate, expected):
    assert expected in _broken(mutate)


def test_the_secret_never_appears_in_the_error():
    message = _broken(lambda d: d["providers"]["gpt"].update(api_key="sk-live-123"))
    assert "sk-live-123" not in message


def test_keys_come_from_the_environment_only():
    config = parse_config(tomllib.loads(ISSUE_EXAMPLE))
    assert config.providers["claude"].api_key({"ANTHROPIC_API_KEY": "k-1"}) == "k-1"
    with pytest.raises(ConfigError, match="environment variable ANTHROPIC_API_KEY is not set"):
        config.providers["claude"].api_key({})


def test_invalid_toml_and_missing_files_fail_in_one_line(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[routes.support\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_prices_load_as_exact_decimals_with_their_source():
    data = tomllib.loads(
        ISSUE_EXAMPLE
        + """
[prices."claude/claude-haiku-4-5"]   # a negotiated rate for this provider only
input_mtok = 0.8
output_mtok = 4
cache_read_mtok = "0.08"
source = "Acme contract, January 2026"

[prices."meta-llama/Llama-3.1-8B"]   # a bare model name: any provider serving it
input_mtok = 0.1
output_mtok = 0.1
source = "our GPU cost per token, measured 2026-01"
"""
    )
    prices = parse_config(data).prices
    contract = prices["claude/claude-haiku-4-5"]
    assert (contract.input_mtok, contract.output_mtok) == (Decimal("0.8"), Decimal("4"))
    assert contract.cache_read_mtok == Decimal("0.08")
    assert contract.cache_write_mtok is None  # the Pricer bills cache writes at the input price
    assert contract.source == "Acme contract, January 2026"
    assert prices["meta-llama/Llama-3.1-8B"].input_mtok == Decimal(
        "0.1"
    )  # not 0.1000000000000000055


def test_prices_are_optional_and_a_provider_may_name_its_price_provider():
    data = tomllib.loads(ISSUE_EXAMPLE)
    assert parse_config(data).prices == {}
    assert parse_config(data).providers["gpt"].price_provider is None
    data["providers"]["fast"] = {"kind": "openai", "base_url": "https://api.groq.com/openai/v1"}
    data["providers"]["fast"]["price_provider"] = "groq"
    assert parse_config(data).providers["fast"].price_provider == "groq"


def test_route_options_and_prompts_load(tmp_path: Path):
    (tmp_path / "intent.json").write_text('{"type": "object", "required": ["intent"]}')
    (tmp_path / "switchover.toml").write_text(
        ISSUE_EXAMPLE
        + """
[prompts.gpt-support]
version = 3
template = "{system}\\nAnswer in Portuguese."

[routes.classify]
targets = ["claude/claude-haiku-4-5", { target = "gpt/gpt-4.1-mini", prompt = "gpt-support" }]
adaptive_order = true
own_keys_first = true
pii = ["cpf", "card"]
pii_restore = true
output_schema = "intent.json"
on_quality_error = "fall_back"
"""
    )
    route = load_config(tmp_path / "switchover.toml").routes["classify"]
    options = route.options
    assert (options.adaptive_order, options.own_keys_first) == (True, True)
    assert options.pii is not None and options.pii.kinds == {"cpf", "card"} and options.pii.restore
    assert options.contract is not None and options.contract.schema["required"] == ["intent"]
    assert options.on_quality_error == "fall_back"
    assert route.targets[0].prompt is None
    assert route.targets[1].prompt is not None and route.targets[1].prompt.label == "gpt-support@3"
    defaults = load_config(tmp_path / "switchover.toml").routes["support"].options
    assert defaults.pii is None and defaults.contract is None and not defaults.adaptive_order
