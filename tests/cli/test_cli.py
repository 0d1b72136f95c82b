"""The command line as a user types it: check a config, ask through a route."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.cli.main import app
from engine.core.paths import DataPaths
from simulations.demo.up import DEMO_KEY_ENV, demo_text
from simulations.fakes import FakeProviders

runner = CliRunner()


def _config(tmp_path: Path, fake: FakeProviders | None = None) -> Path:
    anthropic = fake.anthropic_url if fake else "https://api.anthropic.com"
    openai = fake.openai_url if fake else "https://api.openai.com/v1"
    path = tmp_path / "switchover.toml"
    path.write_text(
        f'[providers.claude]\nkind = "anthropic"\nbase_url = "{anthropic}"\n'
        'api_key_env = "CLI_TEST_KEY"\n'
        f'[providers.gpt]\nkind = "openai"\nbase_url = "{openai}"\napi_key_env = "CLI_TEST_KEY"\n'
        '[routes.support]\ntargets = ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]\n'
    )
    return path


def test_check_config_lists_routes_and_warns_of_missing_keys(tmp_path, monkeypatch):
    monkeypatch.delenv("CLI_TEST_KEY", raising=False)
    result = runner.invoke(app, ["check-config", "-c", str(_config(tmp_path))])
    assert result.exit_code == 0
    assert "support: claude/claude-sonnet-4-5 → gpt/gpt-4.1-mini" in result.stdout
    assert "CLI_TEST_KEY is not set" in result.stderr


def test_check_config_fails_with_one_line_naming_the_key(tmp_path):
    path = tmp_path / "switchover.toml"
    path.write_text('[providers.x]\nkind = "azure"\n')
    result = runner.invoke(app, ["check-config", "-c", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        "providers.x.kind: must be one of anthropic, openai (got 'azure')"
    )


@pytest.fixture
def fake():
    fake = FakeProviders.start_in_thread()
    yield fake
    fake.close()


@pytest.mark.parametrize("stream", [False, True])
def test_ask_shows_the_answer_and_every_attempt(tmp_path, monkeypatch, fake, stream):
    monkeypatch.setenv("CLI_TEST_KEY", "k")
    fake.script("claude-sonnet-4-5", ["overloaded", "overloaded"])
    args = ["ask", "support", "hello there", "-c", str(_config(tmp_path, fake))]
    result = runner.invoke(app, [*args, "--stream"] if stream else args)
    assert result.exit_code == 0, result.output
    assert "echo: hello there" in result.stdout
    assert result.stderr.count("claude/claude-sonnet-4-5") >= 2
    assert "gpt/gpt-4.1-mini" in result.stderr and "served" in result.stderr


def test_ask_reports_a_request_fault_without_trying_the_backup(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("CLI_TEST_KEY", "k")
    fake.script("claude-sonnet-4-5", ["invalid_request"])
    result = runner.invoke(app, ["ask", "support", "hi", "-c", str(_config(tmp_path, fake))])
    assert result.exit_code == 1
    assert "request rejected by the provider" in result.stderr
    assert fake.calls("gpt-4.1-mini") == []


def test_ask_without_a_config_goes_through_the_routes_of_the_demo_running(
    tmp_path, monkeypatch, fake
):
    """As the README says: `switchover ask support "…"` while `switchover up` runs the demo,
    with no switchover.toml and no key in this shell."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DEMO_KEY_ENV, "set")
    monkeypatch.delenv(DEMO_KEY_ENV)  # restored as it was (unset) after the test
    data = DataPaths(tmp_path / "data")
    data.root.mkdir()
    data.demo_config.write_text(demo_text(fake.port))  # as `switchover up` writes it
    result = runner.invoke(app, ["ask", "support", "hello there", "--data-dir", "data"])
    assert result.exit_code == 0, result.output
    assert "echo: hello there" in result.stdout
    assert "using the running demo's configuration" in result.stderr
    assert re.search(r"claude/claude-sonnet-4-5 .* \d{1,3}(,\d{3})* ms", result.stderr)
