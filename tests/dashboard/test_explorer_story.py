"""The Explorer tells the whole story of a request (issue 33, item 5): every target of its route
the chain came to, in order, with what happened there (answered; failed with its class and
HTTP status; skipped with why) and the decision after each attempt, with why. Real requests
through the chain on the in-process fake, recorded, ingested and published by a real scheduler
cycle, then the page through AppTest."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd
import pytest
from helpers.dashboard_pages import open_page, texts

from engine.config import parse_config
from engine.core.errors import ChainError
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeTransport

SONNET, HAIKU = "claude/claude-sonnet-4-5", "claude/claude-haiku-4-5"
OPUS, GPT = "claude/claude-opus-4-1", "gpt/gpt-4o"
SMALL_A, SMALL_B, BIG = "gpt/small-a", "gpt/small-b", "gpt/big"
SLOW, LATE = "claude/slow-primary", "claude/late-backup"
OFF, ON = "claude/switched-off", "claude/switched-on"
ASK = Request(messages=(Message.user("Where is my order?"),), max_tokens=100)


def ask(sw: Switchover, route: str, request_id: str) -> None:
    with contextlib.suppress(ChainError):  # a request nothing answered is recorded all the same
        sw.run_sync(sw.chain(route).complete(ASK, request_id=request_id))


@pytest.fixture(scope="module")
def story_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`req-breaker`: Sonnet's breaker open (req-trip opened it), Haiku answers; `req-failed`:
    Opus 529 twice, then GPT 500, nothing answers; `req-context`: small-a overflows, small-b's
    window is no larger, big answers; `req-budget`: the slow primary uses the budget, the
    backup is left too little; `req-switched`: a target an operator disabled."""
    paths = DataPaths(tmp_path_factory.mktemp("story") / "data")
    fake = FakeTransport(valid_keys=["k"])
    config = parse_config({
        "providers": {
            "claude": {"kind": "anthropic", "base_url": "http://anthropic.fake",
                       "api_key_env": "KEY"},
            "gpt": {"kind": "openai", "base_url": "http://openai.fake/v1", "api_key_env": "KEY"},
        },
        "policy": {"breaker_failures": 2},
        "routes": {
            "support": {"targets": [SONNET, HAIKU]},
            "failing": {"targets": [OPUS, GPT]},
            "long": {"targets": [{"target": SMALL_A, "context_window": 128_000},
                                 {"target": SMALL_B, "context_window": 128_000},
                                 {"target": BIG, "context_window": 1_000_000}]},
            "slow": {"targets": [SLOW, LATE], "budget_s": 1.0, "min_attempt_budget_s": 0.5,
                     "primary_retries": 0, "backup_reserve_share": 0.0},
            "switched": {"targets": [OFF, ON]},
        },
    })  # fmt: skip
    with Switchover(config, transport=fake, environ={"KEY": "k"}, record_to=paths) as sw:
        fake.script("claude-sonnet-4-5", ["529", "529"])
        ask(sw, "support", "req-trip")
        ask(sw, "support", "req-breaker")
        fake.script("claude-opus-4-1", ["529", "529"])
        fake.script("gpt-4o", ["500"])
        ask(sw, "failing", "req-failed")
        fake.script("small-a", ["context_overflow:window=128000,tokens=150000"])
        ask(sw, "long", "req-context")
        fake.script("slow-primary", ["500:delay=0.7"])
        ask(sw, "slow", "req-budget")
        assert sw.switches is not None
        sw.run_sync(sw.switches.disable(OFF, route="switched", reason="test", by="ops"))
        ask(sw, "switched", "req-switched")
    pipeline = Pipeline(paths)
    try:
        pipeline.cycle()
    finally:
        pipeline.close()
    return paths.root


@pytest.fixture
def explorer(story_data: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(story_data))
    return open_page("explorer")


def story_of(explorer, request_id: str) -> pd.DataFrame:
    explorer.text_input(key="rid").set_value(request_id).run()
    assert not explorer.exception, [e.value for e in explorer.exception]
    story = explorer.table[0].value
    shown = story.astype(str).to_numpy().ravel()
    assert not {"None", "nan", "<NA>", "NaN"} & set(shown)
    return story


def rows(story: pd.DataFrame) -> list[tuple[str, ...]]:
    return [tuple(r) for r in story[["#", "target", "attempt", "what happened", "then"]].to_numpy()]


def test_a_primary_whose_breaker_is_open_shows_the_skip_then_the_backups_answer(explorer):
    story = story_of(explorer, "req-breaker")
    assert rows(story) == [
        ("1", SONNET, "—", "skipped: breaker open", "—"),
        ("2", HAIKU, "1", "answered (HTTP 200)", "served"),
    ]
    assert "its breaker opened after provider faults" in story["why"].iloc[0]
    said = texts(explorer)
    assert f"Route **support**: 1 attempt (1 target skipped), answered by **{HAIKU}**." in said


def test_a_failed_request_shows_each_attempts_class_and_status_and_why_each_decision(explorer):
    story = story_of(explorer, "req-failed")
    assert rows(story) == [
        ("1", OPUS, "1", "failed: overloaded (HTTP 529)", "retried"),
        ("1", OPUS, "2", "failed: overloaded (HTTP 529)", "fell back"),
        ("2", GPT, "3", "failed: server_error (HTTP 500)", "gave up"),
    ]
    assert list(story["why"]) == [
        "529 overloaded: the provider's fault → retried the same target once, after a short "
        "backoff",
        "529 overloaded: the provider's fault → retried once, then fell back to the next target",
        "500 server_error: the provider's fault → gave up: no target left to try",
    ]
    assert "Route **failing**: 3 attempts, **not answered**." in texts(explorer)


def test_a_target_whose_context_window_is_too_small_is_shown_skipped_with_why(explorer):
    story = story_of(explorer, "req-context")
    assert rows(story) == [
        ("1", SMALL_A, "1", "failed: context_overflow (HTTP 400)", "fell back to a larger window"),
        ("2", SMALL_B, "—", "skipped: context window too small", "—"),
        ("3", BIG, "2", "answered (HTTP 200)", "served"),
    ]
    assert "context window 128,000 tokens, the request overflowed 128,000" in story["why"].iloc[1]
    assert story["why"].iloc[0].startswith("400 context_overflow: the request's fault → ")


def test_a_backup_left_too_little_time_is_shown_skipped_for_the_budget(explorer):
    story = story_of(explorer, "req-budget")
    assert rows(story) == [
        ("1", SLOW, "1", "failed: server_error (HTTP 500)", "fell back"),
        ("2", LATE, "—", "skipped: time budget too small", "—"),
    ]
    assert "less than the minimum time of an attempt was left" in story["why"].iloc[1]
    assert "Route **slow**: 1 attempt (1 target skipped), **not answered**." in texts(explorer)


def test_a_target_an_operator_disabled_is_shown_left_out_of_the_order(explorer):
    story = story_of(explorer, "req-switched")
    assert rows(story) == [
        ("1", ON, "1", "answered (HTTP 200)", "served"),
        ("—", OFF, "—", "skipped: disabled by an operator", "—"),
    ]


def test_the_attempt_records_stay_one_row_a_call(explorer):
    explorer.text_input(key="rid").set_value("req-breaker").run()
    records = explorer.dataframe[0].value
    assert list(records["target"]) == [HAIKU] and list(records["attempt_number"]) == [1]
