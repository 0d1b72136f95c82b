"""The two keys of mid-stream continuation: a route's `on_stream_failure` and a provider's
`supports_prefill`, validated with one line naming the key, and built into the chain."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import parse_config
from engine.core.errors import ConfigError
from engine.fallback.continuation import supports_continuation
from engine.runtime.switchover import Switchover


def config(route: dict[str, Any] | None = None, **providers: dict[str, Any]) -> Any:
    tables = {
        "claude": {"kind": "anthropic", "api_key_env": "K"},
        "gpt": {"kind": "openai", "api_key_env": "K"},
        "vllm": {"kind": "openai", "base_url": "http://vllm:8000/v1", "supports_prefill": True},
        "proxy": {"kind": "anthropic", "base_url": "http://proxy", "supports_prefill": False},
    }
    for name, table in providers.items():
        tables[name] = {**tables.get(name, {}), **table}
    targets = ["claude/a", "gpt/b", "vllm/c", "proxy/d"]
    return parse_config(
        {"providers": tables, "routes": {"chat": {"targets": targets, **(route or {})}}},
        source="test.toml",
    )


def test_by_default_a_route_reports_a_committed_failure_in_band():
    assert config().routes["chat"].options.on_stream_failure == "error"
    with Switchover(config(), environ={"K": "k"}) as sw:
        assert sw.chain("chat").continue_streams is False


def test_a_route_that_continues_builds_a_chain_that_does():
    cfg = config({"on_stream_failure": "continue"})
    assert cfg.routes["chat"].options.on_stream_failure == "continue"
    with Switchover(cfg, environ={"K": "k"}) as sw:
        chain = sw.chain("chat")
        assert chain.continue_streams is True
        capable = {t.name: supports_continuation(t) for t in chain.targets}
    # Anthropic by kind, OpenAI-compatible only where declared, and a refusal declared too.
    assert capable == {"claude/a": True, "gpt/b": False, "vllm/c": True, "proxy/d": False}


def test_an_unknown_stream_failure_mode_names_the_key():
    with pytest.raises(ConfigError) as caught:
        config({"on_stream_failure": "retry"})
    assert str(caught.value) == (
        "test.toml: routes.chat.on_stream_failure: must be one of error, continue"
    )


def test_supports_prefill_must_be_true_or_false():
    with pytest.raises(ConfigError) as caught:
        config(gpt={"supports_prefill": "yes"})
    assert str(caught.value) == (
        "test.toml: providers.gpt.supports_prefill: must be true or false (got 'yes')"
    )
