"""Gateway keys with labels: `label:secret` in SWITCHOVER_GATEWAY_KEYS names a caller, the label
goes on every attempt of its requests (and so into the store's attempts table), and the secret
goes nowhere."""

from __future__ import annotations

from pathlib import Path

import duckdb
import httpx
import pyarrow.parquet as pq
import pytest

from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.gateway import server

from .conftest import GatewayFactory, user

TEAM_A_KEY = "gw-team-a-SECRET-0001"
BARE_KEY = "gw-bare-SECRET-0002"


def test_a_labelled_key_and_a_bare_key_are_read_from_the_environment():
    environ = {server.KEYS_ENV: f" team-a:{TEAM_A_KEY}, {BARE_KEY} ,team-a:gw-rotated,,"}
    settings = server.settings_from_env(environ)
    assert settings.keys == {TEAM_A_KEY, BARE_KEY, "gw-rotated"}
    assert settings.labels == {TEAM_A_KEY: "team-a", "gw-rotated": "team-a"}


@pytest.mark.parametrize(
    "entries",
    [
        f":{TEAM_A_KEY}",  # no label
        f"team a:{TEAM_A_KEY}",  # not a name
        "team-a:",  # no secret
        f"team-a:{TEAM_A_KEY},team-b:{TEAM_A_KEY}",  # one key, two labels
        f"{TEAM_A_KEY},team-b:{TEAM_A_KEY}",
    ],
)
def test_a_bad_entry_is_refused_by_its_place_never_by_its_secret(entries: str):
    with pytest.raises(ConfigError, match=server.KEYS_ENV) as refused:
        server.settings_from_env({server.KEYS_ENV: entries})
    assert TEAM_A_KEY not in str(refused.value)


def test_the_label_of_the_key_used_reaches_every_attempt_and_the_store(
    gateway: GatewayFactory, tmp_path: Path
):
    paths = DataPaths(tmp_path / "data")
    gw = gateway(
        {"support": ["claude/primary#529", "gpt/backup"]},
        keys=[BARE_KEY],
        key_labels={TEAM_A_KEY: "team-a"},
        record_to=paths,
    )
    body = {"model": "support", "max_tokens": 50, "messages": user()}
    calls = [
        ("/v1/messages", {"x-api-key": TEAM_A_KEY, "anthropic-version": "2023-06-01"}, "a1"),
        ("/v1/chat/completions", {"authorization": f"Bearer {TEAM_A_KEY}"}, "a2"),
        ("/v1/chat/completions", {"authorization": f"Bearer {BARE_KEY}"}, "b1"),
    ]
    for path, headers, feature in calls:
        sent = {**headers, "x-switchover-feature": feature}
        assert httpx.post(gw.url + path, json=body, headers=sent).status_code == 200
    labels = {(a.feature, a.key_label) for a in gw.attempts}
    assert labels == {("a1", "team-a"), ("a2", "team-a"), ("b1", None)}
    assert {a.feature for a in gw.attempts if a.attempt_number > 1} == {"a1", "a2", "b1"}
    counts = {f: sum(a.feature == f for a in gw.attempts) for f in ("a1", "a2", "b1")}
    spooled = [pq.read_table(p).to_pylist() for p in sorted(paths.spool.glob("*.parquet"))]
    gw.stop_and_ingest(paths)

    with duckdb.connect(str(paths.database), read_only=True) as con:
        stored = con.execute(
            "SELECT feature, key_label, count(*) FROM attempts GROUP BY ALL ORDER BY 1"
        ).fetchall()
        everything = str(con.execute("SELECT * FROM attempts").fetchall())
    assert stored == [("a1", "team-a", counts["a1"]), ("a2", "team-a", counts["a2"]),
                      ("b1", None, counts["b1"])]  # fmt: skip
    for secret in (TEAM_A_KEY, BARE_KEY):
        assert secret not in everything and secret not in str(spooled)


def test_a_key_with_a_colon_works_when_given_a_label(gateway: GatewayFactory):
    settings = server.settings_from_env({server.KEYS_ENV: "ops:sk:with:colons"})
    assert settings.labels == {"sk:with:colons": "ops"}
    gw = gateway({"support": ["claude/a"]}, key_labels=dict(settings.labels))
    answer = httpx.post(
        gw.url + "/v1/chat/completions",
        json={"model": "support", "messages": user()},
        headers={"authorization": "Bearer sk:with:colons"},
    )
    assert answer.status_code == 200 and gw.attempts[-1].key_label == "ops"
    refused = httpx.post(
        gw.url + "/v1/chat/completions",
        json={"model": "support", "messages": user()},
        headers={"authorization": "Bearer with:colons"},
    )
    assert refused.status_code == 401
