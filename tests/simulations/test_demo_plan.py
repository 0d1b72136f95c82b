"""A demo plan from TOML (`switchover up --demo-plan`): what a rehearsal can set, and the
mistakes it is told about."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from engine.config import ConfigError, parse_config
from simulations.demo.up import Plan, demo_text


def _plan(tmp_path: Path, text: str) -> Plan:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return Plan.load(path)


def test_a_plans_settle_time_becomes_the_demo_routes_incident_settle(tmp_path: Path):
    plan = _plan(tmp_path, "cycle_s = 600\nhistory = false\nincident_settle_s = 30\n")
    config = parse_config(tomllib.loads(demo_text(8700, plan.incident_settle_s)), source="demo")
    assert config.alerting.incident_settle_s == 30


def test_a_plan_without_a_settle_time_keeps_the_default_two_minutes(tmp_path: Path):
    plan = _plan(tmp_path, "cycle_s = 600\n")
    assert plan.incident_settle_s is None
    config = parse_config(tomllib.loads(demo_text(8700, plan.incident_settle_s)), source="demo")
    assert config.alerting.incident_settle_s == 120


@pytest.mark.parametrize("settle", ["0", "-5", '"soon"'])
def test_a_settle_time_that_is_not_a_positive_number_is_refused_naming_the_file(
    tmp_path: Path, settle: str
):
    with pytest.raises(ConfigError, match=r"plan\.toml"):
        _plan(tmp_path, f"cycle_s = 600\nincident_settle_s = {settle}\n")
