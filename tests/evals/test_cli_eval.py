"""`switchover eval` as CI runs it, against the fake providers on loopback: a table per target,
the run written for the scheduler, and an exit code to gate on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.cli.main import app
from simulations.fakes import FakeProviders

runner = CliRunner()
PRIMARY, BACKUP = "claude-sonnet-4-5", "gpt-4.1-mini"
CASES = "".join(
    f'[[cases]]\nname = "case {i}"\nprompt = "question {i}"\nregex = "^echo: question"\n'
    for i in range(4)
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviders]:
    fake = FakeProviders.start_in_thread()
    yield fake
    fake.close()


@pytest.fixture
def fake(server: FakeProviders, monkeypatch: pytest.MonkeyPatch) -> FakeProviders:
    server.reset()
    monkeypatch.setenv("EVAL_TEST_KEY", "k")
    return server


def files(tmp_path: Path, fake: FakeProviders, cases: str = 'route = "support"\n' + CASES):
    config = tmp_path / "switchover.toml"
    config.write_text(
        f'[providers.claude]\nkind = "anthropic"\nbase_url = "{fake.anthropic_url}"\n'
        'api_key_env = "EVAL_TEST_KEY"\n'
        f'[providers.gpt]\nkind = "openai"\nbase_url = "{fake.openai_url}"\n'
        'api_key_env = "EVAL_TEST_KEY"\n'
        f'[routes.support]\ntargets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n'
        f'[routes.classify]\ntargets = ["gpt/{BACKUP}"]\n'
    )
    case_file = tmp_path / "cases.toml"
    case_file.write_text(cases)
    return config, case_file


def evaluate(tmp_path: Path, fake: FakeProviders, *args: str, cases: str | None = None):
    config, case_file = files(tmp_path, fake, *([cases] if cases is not None else []))
    data = tmp_path / "data"
    return runner.invoke(
        app, ["eval", str(case_file), "-c", str(config), "--data-dir", str(data), *args]
    )


def written(tmp_path: Path) -> list[dict]:
    folder = tmp_path / "data" / "control" / "evals"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_every_target_passing_prints_the_table_and_exits_zero(tmp_path, fake):
    result = evaluate(tmp_path, fake)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "Route support: 4 cases per target, minimum pass rate 90 %" in lines[0]
    for target in (f"claude/{PRIMARY}", f"gpt/{BACKUP}"):
        (row,) = [line for line in lines if line.startswith(target)]
        assert "4/4" in row and "100 %" in row and "$0.0" in row and "BELOW" not in row
    (run,) = written(tmp_path)
    assert f"Run {run['run_id']} written to " in result.stdout
    assert run["route"] == "support" and len(run["results"]) == 8
    assert "8/8 calls" in result.stderr  # progress goes to stderr


def test_a_backup_below_the_minimum_is_flagged_with_its_failures_and_exits_one(tmp_path, fake):
    fake.script(BACKUP, ["ok:text=I cannot help with that", "400"])
    result = evaluate(tmp_path, fake, "--concurrency", "1")
    assert result.exit_code == 1, result.output
    (row,) = [line for line in result.stdout.splitlines() if line.startswith(f"gpt/{BACKUP}")]
    assert "2/4" in row and "50 %" in row and row.endswith("BELOW 90 %")
    assert f"Failed on gpt/{BACKUP}:" in result.stdout
    assert "case 0: regex '^echo: question' not found" in result.stdout
    assert "case 1: error: invalid_request " in result.stdout
    assert f"Failed on claude/{PRIMARY}" not in result.stdout


def test_only_the_first_ten_failures_of_a_target_are_listed(tmp_path, fake):
    many = "".join(
        f'[[cases]]\nname = "case {i}"\nprompt = "q {i}"\nmust_contain = ["never"]\n'
        for i in range(12)
    )
    result = evaluate(tmp_path, fake, "--route", "classify", cases=many)
    assert result.exit_code == 1
    assert "case 9: must_contain 'never' missing" in result.stdout
    assert "case 10:" not in result.stdout and "… and 2 more" in result.stdout
    assert len(written(tmp_path)[0]["results"]) == 12


def test_json_output_is_the_written_run_with_a_summary_per_target(tmp_path, fake):
    fake.script(BACKUP, ["400"])
    result = evaluate(tmp_path, fake, "--json", "--concurrency", "1")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    (run,) = written(tmp_path)
    assert {k: v for k, v in body.items() if k not in ("targets", "written_to")} == run
    assert Path(body["written_to"]).name == f"{run['run_id']}.json"
    primary, backup = body["targets"]
    assert (primary["target"], primary["passed"], primary["meets_minimum"]) == (
        f"claude/{PRIMARY}", 4, True,
    )  # fmt: skip
    assert (backup["passed"], backup["pass_rate"], backup["meets_minimum"]) == (3, 0.75, False)


def test_route_flag_overrides_the_case_files_route(tmp_path, fake):
    result = evaluate(tmp_path, fake, "--route", "classify", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["route"] == "classify" and [t["target"] for t in body["targets"]] == [
        f"gpt/{BACKUP}"
    ]
    assert fake.calls(PRIMARY) == []


@pytest.mark.parametrize(
    ("cases", "args", "message"),
    [
        (CASES, (), "name the route to evaluate: --route R"),
        (CASES, ("--route", "billing"), "unknown route 'billing' (routes: classify, support)"),
        ('[[cases]]\nname = "a"\nprompt = "hi"\n', (), "cases[0]: give at least one check"),
        ('[[cases]]\nname = "a"\nprompt = "hi"\nregex = "("\n', (), "cases[0].regex: not a valid"),
    ],
)
def test_bad_input_fails_with_one_line_and_exit_code_two(tmp_path, fake, cases, args, message):
    result = evaluate(tmp_path, fake, *args, cases=cases)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "data").exists()


def test_a_missing_provider_key_is_a_clear_error(tmp_path, fake, monkeypatch):
    monkeypatch.delenv("EVAL_TEST_KEY")
    result = evaluate(tmp_path, fake)
    assert result.exit_code == 2
    assert "providers.claude.api_key_env: environment variable EVAL_TEST_KEY is not set" in (
        result.stderr
    )
