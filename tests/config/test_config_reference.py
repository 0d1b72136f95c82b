"""docs/configuration.md lists every key the configuration accepts, so it cannot fall behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import config
from engine.config import alerting as rules
from engine.config import budgets as config_budgets
from engine.config import gateway, prices, prompts, providers, reports, state, store
from engine.config import routes as config_routes
from engine.config import slo as config_slo
from engine.config import telemetry as config_telemetry
from engine.fallback.policy import POLICY_KEYS

REFERENCE = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
KEYS = sorted(
    {
        *providers._PROVIDER_KEYS,
        *config_routes._ROUTE_OPTION_KEYS,
        *prompts._PROMPT_KEYS,
        *config_routes._TARGET_KEYS,
        *POLICY_KEYS,
        *prices._PRICE_KEYS,
        *state._STATE_KEYS,
        *gateway._GATEWAY_KEYS,
        *reports._REPORTS_KEYS,
        *store._STORE_KEYS,
        *config_telemetry._TELEMETRY_KEYS,
        *rules._RULE_KEYS,
        *rules._RECEIVER_KEYS,
        *rules._ALERTING_KEYS,
        *rules.KINDS,
        *config_slo._SLO_KEYS,
        *config_budgets._BUDGET_KEYS,
    }
)


@pytest.mark.parametrize("key", KEYS)
def test_every_configuration_key_is_in_the_reference(key: str):
    assert f"`{key}`" in REFERENCE, f"docs/configuration.md does not describe `{key}`"


def test_every_top_level_section_is_in_the_reference():
    for section in config._TOP_LEVEL:
        assert f"[{section}" in REFERENCE or f"[[{section}" in REFERENCE, section
