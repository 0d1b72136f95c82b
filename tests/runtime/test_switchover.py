"""The library facade: hooks reach every chain."""

from __future__ import annotations

import tomllib

from engine.config import parse_config
from engine.runtime.switchover import Switchover

CONFIG = """
[providers.gpt]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
[routes.support]
targets = ["gpt/gpt-4.1-mini"]
"""


def test_a_hook_added_later_reaches_the_routes_and_single_target_chains():
    sw = Switchover(parse_config(tomllib.loads(CONFIG)))
    seen = []
    sw.add_hook(seen.append)
    assert seen.append in sw.chain("support").hooks
    assert seen.append in sw.chain("gpt/gpt-4.1-mini").hooks
