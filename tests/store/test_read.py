"""The read side: named queries with bound parameters over the published snapshots."""

from __future__ import annotations

import os
import shutil
import threading
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from helpers.spool import T0, make_attempt, write_spool

from engine.published.catalogue import SNAPSHOT_COLUMNS
from engine.published.partitions import append as publish_recent_attempts
from engine.published.queries import QUERIES
from engine.published.query import REQUIRED
from engine.published.read import ONE_SCAN, PublishedData
from engine.store import ingest_spool
from engine.telemetry.columns import COLUMN_NAMES

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SAMPLE = {"since": EPOCH, "request_id": "a"}  # a value for each required parameter


def attempts():
    s = timedelta(seconds=1)
    return [
        make_attempt(request_id="a", started_at=T0, route="support"),
        make_attempt(request_id="b", started_at=T0 + 30 * s, route="it's", provider="gpt"),
        make_attempt(request_id="c", started_at=T0 + 61 * s, outcome="error", served=False),
        make_attempt(request_id="c", attempt_number=2, started_at=T0 + 62 * s, provider="gpt"),
    ]


@pytest.fixture
def data(store, spool, published):
    write_spool(spool, "one", attempts())
    ingest_spool(store, spool)
    publish_recent_attempts(store, published, T0 + timedelta(hours=1))
    reader = PublishedData(published)
    yield reader
    reader.close()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_snapshot_a_query_reads_has_columns_for_before_it_is_published(name):
    assert set(QUERIES[name].reads) <= set(SNAPSHOT_COLUMNS)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_query_reads_an_empty_frame_on_a_fresh_install(tmp_path, data, name):
    """Nothing published yet (a fresh install, or the scheduler not started): no error, and
    the columns the query has once there is data."""
    required = {k: SAMPLE[k] for k, v in QUERIES[name].params.items() if v is REQUIRED}
    empty = PublishedData(tmp_path / "nothing").query(name, **required)
    assert empty.empty
    assert list(empty.columns) == list(data.query(name, **required).columns)


def test_an_unpublished_snapshot_has_the_types_of_a_published_one(tmp_path, data):
    def types(reader: PublishedData) -> list[tuple[str, str]]:
        return reader._con.execute(
            "SELECT column_name, column_type FROM (DESCRIBE recent_attempts)"
        ).fetchall()

    assert types(PublishedData(tmp_path / "nothing")) == types(data)
    assert [name for name, _ in types(data)] == list(COLUMN_NAMES)


def test_a_route_name_with_a_quote_is_bound_as_a_value(data):
    frame = data.query("recent_attempts", since=EPOCH, route="it's")
    assert frame["request_id"].tolist() == ["b"]


def ids(frame) -> list[tuple[str, int]]:
    return list(zip(frame["request_id"], frame["attempt_number"], strict=True))


def test_recent_attempts_filter_newest_first_and_limit(data):
    assert ids(data.query("recent_attempts", since=EPOCH)) == [("c", 2), ("c", 1), ("b", 1),
                                                              ("a", 1)]  # fmt: skip
    assert ids(data.query("recent_attempts", since=EPOCH, limit=1)) == [("c", 2)]
    assert ids(data.query("recent_attempts", since=EPOCH, provider="gpt")) == [("c", 2), ("b", 1)]
    assert ids(data.query("recent_attempts", since=EPOCH, outcome="error")) == [("c", 1)]
    window = data.query(
        "recent_attempts", since=T0 + timedelta(seconds=1), until=T0 + timedelta(seconds=62)
    )
    assert ids(window) == [("c", 1), ("b", 1)]


def test_attempt_counts_by_minute(data):
    frame = data.query("attempt_counts_by_minute", since=EPOCH)
    rows = [(m.to_pydatetime(), p, o, n) for m, p, o, n in frame.itertuples(index=False)]
    minute = timedelta(minutes=1)
    assert rows == [
        (T0, "claude", "success", 1),
        (T0, "gpt", "success", 1),
        (T0 + minute, "claude", "error", 1),
        (T0 + minute, "gpt", "success", 1),
    ]


def test_wrong_names_and_parameters_are_refused(data):
    with pytest.raises(KeyError, match="no query named"):
        data.query("drop_everything")
    with pytest.raises(TypeError, match="unknown parameters"):
        data.query("recent_attempts", since=EPOCH, sql="1=1")
    with pytest.raises(TypeError, match="missing parameters"):
        data.query("recent_attempts")
    assert data.names() == sorted(QUERIES)


def test_a_new_snapshot_is_seen_by_an_existing_reader(store, spool, published, tmp_path):
    reader = PublishedData(published)
    assert reader.query("recent_attempts", since=EPOCH).empty
    assert reader.snapshots() == {}
    write_spool(spool, "one", attempts())
    ingest_spool(store, spool)
    publish_recent_attempts(store, published, T0 + timedelta(hours=1))
    assert len(reader.query("recent_attempts", since=EPOCH)) == 4
    assert reader.snapshots()["recent_attempts"].rows == 4


def test_a_cleared_published_directory_reads_as_empty_again(data, published):
    shutil.rmtree(published)
    assert data.query("recent_attempts", since=EPOCH).empty


def test_concurrent_queries_from_many_threads(data, store, published):
    """Streamlit runs each session in its own thread; they share one PublishedData."""
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                assert len(data.query("recent_attempts", since=EPOCH)) == 4
                assert data.query("attempt_counts_by_minute", since=EPOCH)["attempts"].sum() == 4
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for _ in range(10):
        publish_recent_attempts(store, published, T0 + timedelta(hours=1))
    for thread in threads:
        thread.join()
    assert errors == []


def test_queries_leave_no_file_open(data):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        data.query("recent_attempts", since=EPOCH)
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_reader_never_touches_the_database_file(data):
    databases = data._con.execute("SELECT database_name, path FROM duckdb_databases()").fetchall()
    assert all(path is None for _, path in databases)


def live_attempts():
    """Streamed answers with their first tokens, failures of three classes on two targets and
    a request nothing could take (a skipped row), over two minutes from T0."""
    s = timedelta(seconds=1)
    gpt = {"target": "gpt/mini", "provider": "gpt", "model": "mini"}
    return [
        *(make_attempt(request_id=f"s{i}", started_at=T0 + i * s, streamed=True,
                       ttft_ms=100.0 * (i + 1), latency_ms=1000.0 + 100 * i) for i in range(5)),
        make_attempt(request_id="c1", route="classify", started_at=T0 + 10 * s, streamed=True,
                     ttft_ms=50.0, **gpt),
        make_attempt(request_id="e1", started_at=T0 + 20 * s, outcome="error", served=False,
                     error_class="overloaded", fault_kind="provider", http_status=529),
        make_attempt(request_id="e1", attempt_number=2, started_at=T0 + 21 * s, outcome="error",
                     served=False, error_class="overloaded", fault_kind="provider",
                     http_status=529),
        make_attempt(request_id="e2", started_at=T0 + 70 * s, outcome="error", served=False,
                     error_class="rate_limit", fault_kind="rate_limit", http_status=429, **gpt),
        make_attempt(request_id="e3", started_at=T0 + 80 * s, outcome="error", served=False,
                     error_class="read_timeout", fault_kind="ambiguous", http_status=None),
        make_attempt(request_id="k1", started_at=T0 + 90 * s, outcome="skipped", served=False,
                     decision="give_up", error_class="all_skipped", latency_ms=0.0),
    ]  # fmt: skip


@pytest.fixture
def live(store, spool, published):
    write_spool(spool, "live", live_attempts())
    ingest_spool(store, spool)
    publish_recent_attempts(store, published, T0 + timedelta(hours=1))
    reader = PublishedData(published)
    yield reader
    reader.close()


def test_latency_leaves_out_the_requests_that_made_no_call(live):
    [row] = live.query("latency_between", since=T0).itertuples()
    assert row.attempts == 10, "eleven rows, one of them skipped"
    minutes = live.query("latency_by_bucket", since=T0)
    assert minutes["attempts"].tolist() == [8, 2]
    assert minutes["bucket"].tolist() == [T0, T0 + timedelta(minutes=1)]
    hours = live.query("latency_by_bucket", since=T0, width=timedelta(hours=1))
    assert hours["attempts"].tolist() == [10]


def test_time_to_first_token_is_of_streamed_answers_per_route(live):
    frame = live.query("ttft_by_bucket", since=T0)
    by_route = {r.route: (r.streams, r.p50_ms, r.p99_ms) for r in frame.itertuples()}
    # support: 100, 200, 300, 400, 500 ms; p99 interpolated between the top two.
    assert by_route == {"classify": (1, 50.0, 50.0), "support": (5, 300.0, 496.0)}


def test_failures_are_counted_by_bucket_class_and_target(live):
    minutes = live.query("failures_by_bucket", since=T0)
    statuses = [None if pd.isna(s) else int(s) for s in minutes["http_status"]]
    assert list(zip(minutes["error_class"], statuses, minutes["attempts"], strict=True)) == [
        ("overloaded", 529, 2), ("rate_limit", 429, 1), ("read_timeout", None, 1),
    ]  # fmt: skip
    minute = timedelta(minutes=1)
    assert minutes["bucket"].tolist() == [T0, T0 + minute, T0 + minute]
    targets = live.query("failures_by_target", since=T0, until=T0 + timedelta(minutes=1))
    assert list(zip(targets["target"], targets["attempts"], strict=True)) == [("claude/sonnet", 2)]


ONE_SCAN_REQUESTS = [
    ("latency_between", {"since": T0, "until": T0 + timedelta(minutes=1)}),
    ("latency_between", {"since": T0 + timedelta(seconds=30)}),
    ("latency_by_bucket", {"since": T0}),
    ("latency_by_bucket", {"since": T0, "width": timedelta(hours=1)}),
    ("ttft_by_bucket", {"since": T0}),
    ("failures_by_bucket", {"since": T0}),
    ("failures_by_target", {"since": T0 + timedelta(minutes=1)}),
    ("served_between", {"since": T0, "until": T0 + timedelta(seconds=15)}),
    ("failed_attempts", {"since": T0, "limit": 3}),
]


def test_the_aggregates_from_one_read_of_a_window_are_each_querys_own(live):
    assert {name for name, _ in ONE_SCAN_REQUESTS} == set(ONE_SCAN)
    together = live.query_attempts(T0, None, ONE_SCAN_REQUESTS)
    for (name, params), frame in zip(ONE_SCAN_REQUESTS, together, strict=True):
        alone = live.query(name, **params)
        assert not alone.empty, f"{name} {params} reads nothing: the comparison proves nothing"
        pd.testing.assert_frame_equal(frame, alone, obj=f"{name} {params}")


def test_a_window_read_keeps_to_its_window_and_refuses_a_query_outside_it(live):
    minute = timedelta(minutes=1)
    [inside] = live.query_attempts(T0 + minute, T0 + 2 * minute,
                                   [("latency_between", {"since": T0 + minute,
                                                         "until": T0 + 2 * minute})])  # fmt: skip
    assert inside["attempts"].tolist() == [2], "e2 and e3; the skipped k1 made no call"
    for params in ({"since": T0}, {"since": T0 + minute}):  # before it; no end inside it
        with pytest.raises(ValueError, match="outside"):
            live.query_attempts(T0 + minute, T0 + 2 * minute, [("latency_between", params)])
    with pytest.raises(KeyError, match="recent_attempts"):
        live.query_attempts(T0, None, [("recent_attempts", {"since": T0})])


def test_a_window_read_on_a_fresh_install_reads_empty_frames(tmp_path):
    reader = PublishedData(tmp_path)
    try:
        frames = reader.query_attempts(EPOCH, None, ONE_SCAN_REQUESTS)
    finally:
        reader.close()
    assert [len(f) for f in frames] == [0] * len(ONE_SCAN_REQUESTS)


def test_the_failed_attempts_are_the_latest_first_in_the_columns_live_shows(live):
    failed = live.query("failed_attempts", since=T0, limit=3)
    assert failed["request_id"].tolist() == ["e3", "e2", "e1"], "newest first, three of four"
    assert "outcome" not in failed.columns and "error_message" in failed.columns
