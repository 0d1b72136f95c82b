"""`switchover targets`: an operator's switch from the command line is the one the chains read."""

from __future__ import annotations

import asyncio
import re

from typer.testing import CliRunner

from engine.cli.main import app
from engine.core.paths import DataPaths
from engine.state.switches_file import TargetSwitches
from simulations.demo.up import demo_text

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


def test_the_list_says_since_when_as_people_read_it(tmp_path):
    assert run(tmp_path, "disable", "gpt/gpt-4.1-mini").exit_code == 0
    listing = run(tmp_path, "list").output
    found = re.search(r"since (\S+ \S+ \S+ \S+ \S+) by", listing)
    assert found and re.fullmatch(r"\w{3} \d{1,2} \w{3} \d\d:\d\d UTC", found[1]), listing


def test_without_a_config_the_commands_act_on_the_routes_of_the_demo_running(tmp_path, monkeypatch):
    """`switchover up` without a switchover.toml runs the demo, which writes its configuration
    into its data folder: the commands run beside it find it there."""
    monkeypatch.chdir(tmp_path)  # no ./switchover.toml
    data = DataPaths(tmp_path / "data")
    data.root.mkdir()
    data.demo_config.write_text(demo_text(8700))  # as `switchover up` writes it
    result = runner.invoke(app, ["targets", "disable", "gpt/gpt-4.1-mini", "--data-dir", "data"])
    assert result.exit_code == 0, result.output
    assert "disabled for every route (support, classify)" in result.output
    assert asyncio.run(TargetSwitches(data.target_switches).disabled("classify")) == {
        "gpt/gpt-4.1-mini"
    }
    listing = runner.invoke(app, ["targets", "list", "--data-dir", "data"])
    assert "gpt/gpt-4.1-mini  disabled for every route" in listing.output
    assert "switchover.toml: no such file" not in listing.output


def test_without_a_config_or_a_demo_running_the_commands_say_which_config_to_pass(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for command in (["targets", "list"], ["targets", "disable", "gpt/gpt-4.1-mini"],
                    ["ask", "support", "hello"]):  # fmt: skip
        result = runner.invoke(app, [*command, "--data-dir", "data"])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert "-c path/to/switchover.toml" in said, said
        assert f"-c {DataPaths(tmp_path / 'data').demo_config.relative_to(tmp_path)}" in said
