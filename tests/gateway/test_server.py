"""`switchover serve` and the worker factory: what is checked before anything listens."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from engine.cli.main import app as cli
from engine.core.errors import ConfigError
from engine.gateway import server

CONFIG = """
[providers.gpt]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "TEST_GW_OPENAI_KEY"

[routes.support]
targets = ["gpt/gpt-4o-mini"]
"""


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.8.0.1", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("gateway.example", False)],
)  # fmt: skip
def test_only_loopback_counts_as_local(host: str, loopback: bool):
    assert server.is_loopback(host) is loopback


def test_a_public_address_needs_gateway_keys():
    with pytest.raises(ConfigError, match="SWITCHOVER_GATEWAY_KEYS"):
        server.check_bind("0.0.0.0", frozenset())
    server.check_bind("0.0.0.0", frozenset({"k"}))
    server.check_bind("127.0.0.1", frozenset())  # local development: allowed, with a warning


def test_serve_refuses_to_start_unguarded_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(server.KEYS_ENV, raising=False)
    config = tmp_path / "switchover.toml"
    config.write_text(CONFIG)
    result = CliRunner().invoke(cli, ["serve", "--config", str(config), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "refusing to serve" in result.output


def test_serve_names_a_missing_provider_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TEST_GW_OPENAI_KEY", raising=False)
    config = tmp_path / "switchover.toml"
    config.write_text(CONFIG)
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 2 and "TEST_GW_OPENAI_KEY" in result.output


def test_settings_come_from_the_environment():
    settings = server.settings_from_env({server.KEYS_ENV: " a, b ,,", server.MAX_BODY_ENV: "1.5"})
    assert settings.keys == {"a", "b"} and settings.max_body_bytes == 1_572_864
    with pytest.raises(ConfigError, match=server.MAX_BODY_ENV):
        server.settings_from_env({server.MAX_BODY_ENV: "lots"})


def test_a_worker_builds_the_gateway_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "switchover.toml"
    config.write_text(CONFIG)
    monkeypatch.setenv(server.CONFIG_ENV, str(config))
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TEST_GW_OPENAI_KEY", "sk-test")
    monkeypatch.setenv(server.KEYS_ENV, "k1")
    with TestClient(server.app_from_env()) as client:
        assert client.get("/readyz").json() == {"status": "ready", "routes": 1}
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"x-api-key": "k1"}).status_code == 200
