"""The Explorer shows a stream another target finished as one request in parts (issue 20, item
5): real streamed requests through the chain on the in-process fake, recorded, ingested and
published by a real scheduler cycle, then the page through AppTest."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from helpers.dashboard_pages import open_page, texts

from engine.config import parse_config
from engine.core.messages import Message, Request, StreamError, TextDelta
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeTransport

PRIMARY, BACKUP, REFUSES = "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"
QUESTION = "Where is my order, and when will it reach the depot near me?"


def streamed(sw: Switchover, route: str, request_id: str) -> tuple[str, bool]:
    """(the text the caller read, whether the stream ended in an in-band error)."""

    async def read() -> tuple[str, bool]:
        ask = Request(messages=(Message.user(QUESTION),), max_tokens=300)
        events = [e async for e in sw.chain(route).stream(ask, request_id=request_id)]
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        return text, isinstance(events[-1], StreamError)

    return sw.run_sync(read())


@pytest.fixture(scope="module")
def continued_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two requests on routes that continue failed streams: `req-continued`, cut on Sonnet and
    finished by Haiku; `req-broken`, cut on Sonnet, whose one backup refuses the prefill."""
    paths = DataPaths(tmp_path_factory.mktemp("continued") / "data")
    fake = FakeTransport(valid_keys=["k"])
    config = parse_config({
        "providers": {"claude": {"kind": "anthropic", "base_url": "http://anthropic.fake",
                                 "api_key_env": "KEY"}},
        "routes": {
            "support": {"targets": [f"claude/{PRIMARY}", f"claude/{BACKUP}"],
                        "on_stream_failure": "continue"},
            "drafts": {"targets": [f"claude/{PRIMARY}", f"claude/{REFUSES}"],
                       "on_stream_failure": "continue"},
        },
    })  # fmt: skip
    with Switchover(config, transport=fake, environ={"KEY": "k"}, record_to=paths) as sw:
        fake.script(PRIMARY, ["stream_cut:after_events=6", "stream_cut:after_events=6"])
        fake.script(REFUSES, ["prefill_rejected"])
        assert streamed(sw, "support", "req-continued") == ("echo: " + QUESTION, False)
        assert streamed(sw, "drafts", "req-broken")[1]
    pipeline = Pipeline(paths)
    try:
        pipeline.cycle()
    finally:
        pipeline.close()
    return paths.root


@pytest.fixture
def explorer(continued_data: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(continued_data))
    return open_page("explorer")


def test_a_continued_stream_is_one_request_with_its_two_parts(explorer):
    explorer.text_input(key="rid").set_value("req-continued").run()
    assert not explorer.exception
    said = texts(explorer)
    found = re.search(
        rf"Route \*\*support\*\*: 2 attempts, one answer in 2 parts: begun by "
        rf"\*\*claude/{PRIMARY}\*\*, continued on \*\*claude/{BACKUP}\*\* after a cut at "
        rf"(\d+) characters\.",
        said,
    )
    assert found, said
    parts = explorer.dataframe[0].value
    assert list(parts["part"]) == [1, 2]
    assert list(parts["target"]) == [f"claude/{PRIMARY}", f"claude/{BACKUP}"]
    assert list(parts["from_character"]) == [0, int(found.group(1))]
    assert 0 < int(found.group(1)) < len("echo: " + QUESTION)
    attempts = explorer.dataframe[1].value
    assert list(attempts["decision"]) == ["continue_elsewhere", "served"]
    assert list(attempts["continues_attempt"]) == ["—", "1"], "the first part continues none"


def test_the_parts_costs_add_up_to_the_answers_cost(explorer):
    explorer.text_input(key="rid").set_value("req-continued").run()
    [caption] = [c.value for c in explorer.caption if c.value.startswith("The answer cost")]
    total, *addends = (Decimal(x) for x in re.findall(r"\$(\d+\.\d+)", caption))
    assert len(addends) == 2 and all(a > 0 for a in addends)
    assert total == sum(addends)
    shown = explorer.dataframe[0].value["cost"]
    assert [Decimal(c.lstrip("$")) for c in shown] == addends
    assert "nan" not in caption and "None" not in caption


def test_a_stream_no_backup_could_continue_says_where_it_broke_off(explorer):
    explorer.text_input(key="rid").set_value("req-broken").run()
    said = texts(explorer)
    assert re.search(
        r"Route \*\*drafts\*\*: 2 attempts, \*\*not answered\*\*: the stream broke off after a "
        r"cut at \d+ characters, and no backup could continue it\.",
        said,
    ), said
    assert len(explorer.dataframe) == 2  # the attempts, then the filter's table: no parts
    assert list(explorer.dataframe[0].value["decision"]) == ["continue_elsewhere", "give_up"]
