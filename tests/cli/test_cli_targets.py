"""`switchover targets`: an operator's switch from the command line is the one the chains read."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from engine.cli.main import app
from engine.core.paths import DataPaths
from engine.state.switches_file import TargetSwitches

runner = CliRunner()
CONFIG = """
[providers.claude]
kind = "anthropic"
[providers.gpt]
kind = "openai"
[routes.support]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]
[routes.classify]
targets = ["gpt/gpt-4.1-mini"]
"""


def run(tmp_path, *args: str):
    config = tmp_path / "switchover.toml"
    config.write_text(CONFIG)
    data = tmp_path / "data"
    return runner.invoke(app, ["targets", *args, "-c", str(config), "--data-dir", str(data)])


def disabled(tmp_path, route: str) -> frozenset[str]:
    switches = TargetSwitches(DataPaths(tmp_path / "data").target_switches)
    return asyncio.run(switches.disabled(route))


def test_disable_then_enable_a_target_for_every_route(tmp_path):
    result = run(tmp_path, "disable", "gpt/gpt-4.1-mini", "--reason", "key rotated")
    assert result.exit_code == 0, result.output
    assert "disabled for every route (support, classify)" in result.output
    assert disabled(tmp_path, "support") == disabled(tmp_path, "classify") == {"gpt/gpt-4.1-mini"}
    listing = run(tmp_path, "list")
    assert "gpt/gpt-4.1-mini  disabled for every route" in listing.output
    assert "key rotated" in listing.output
    assert run(tmp_path, "enable", "gpt/gpt-4.1-mini").exit_code == 0
    assert disabled(tmp_path, "support") == frozenset()
    assert "No target is disabled." in run(tmp_path, "list").output


def test_a_switch_for_one_route_leaves_the_others_alone(tmp_path):
    assert run(tmp_path, "disable", "gpt/gpt-4.1-mini", "--route", "support").exit_code == 0
    assert disabled(tmp_path, "support") == {"gpt/gpt-4.1-mini"}
    assert disabled(tmp_path, "classify") == frozenset()


def test_an_unknown_target_or_route_fails_with_one_line_naming_what_exists(tmp_path):
    result = run(tmp_path, "disable", "claude/claude-opus-4")
    assert result.exit_code == 2
    assert "unknown target 'claude/claude-opus-4'" in result.output
    assert "claude/claude-sonnet-4-5" in result.output
    result = run(tmp_path, "disable", "gpt/gpt-4.1-mini", "--route", "billing")
    assert result.exit_code == 2 and "unknown route 'billing'" in result.output
