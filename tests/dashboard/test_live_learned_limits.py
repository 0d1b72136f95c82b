"""Live shows, for a route that learns its first-token limit, each target's limit and the
evidence behind it: the figures the gateway reads from the published target latency."""

from __future__ import annotations

import shutil
from datetime import timedelta

import duckdb
import numpy as np
from helpers.dashboard_pages import open_page

from dashboard import data
from dashboard.auth import CONFIG_ENV
from engine.core.paths import DataPaths
from engine.published.catalogue import LEVELS
from engine.published.publish import publish

from .conftest import CLAUDE, GPT, MINUTES

CONFIG = f"""
[providers.claude]
kind = "anthropic"
api_key_env = "NO_KEY"
[providers.gpt]
kind = "openai"
api_key_env = "NO_KEY"
[policy]
first_token_timeout_s = 15
[routes.support]
targets = ["{CLAUDE}", "{GPT}"]
first_token_timeout_s = "learned"
"""


def test_live_names_each_targets_learned_limit_and_its_evidence(dataset, tmp_path, monkeypatch):
    shared, _, start = dataset
    paths = DataPaths(tmp_path / "data")
    shutil.copytree(shared.published, paths.published)  # the shared dataset stays as it is
    (tmp_path / "switchover.toml").write_text(CONFIG)
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "switchover.toml"))
    published_at = start + timedelta(minutes=MINUTES)
    monkeypatch.setattr(data, "now", lambda: published_at)
    hour = published_at.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    ttft = [float(v) for v in np.quantile(np.linspace(200, 1000, 1000), LEVELS)]
    con = duckdb.connect()
    publish(con, paths.published, "target_latency", """
        SELECT $hour::TIMESTAMPTZ AS hour, $claude AS target,
            1234::BIGINT AS answers, $ttft::DOUBLE[] AS latency_ms, 1234::BIGINT AS streams,
            $ttft::DOUBLE[] AS ttft_ms
        UNION ALL
        SELECT $hour::TIMESTAMPTZ, $gpt, 40, $ttft::DOUBLE[], 40, $ttft::DOUBLE[]
    """, {"hour": hour, "ttft": ttft, "claude": CLAUDE, "gpt": GPT})  # fmt: skip
    at = open_page("live")
    assert not at.exception
    shown = "\n".join(m.value for m in at.markdown)
    assert "**First-token limits learned** · from the last 24 h of streamed answers" in shown
    p99 = np.quantile(np.linspace(200, 1000, 1000), 0.99) / 1000
    assert f"{CLAUDE}: **{3 * p99:.1f} s** (p99 {p99:.2f} s over 1,234 streams)" in shown
    assert f"{GPT}: 15 s, the route's (fewer than 100 streams to learn from)" in shown
