"""The 24 h of attempts as append-only parts: a cycle writes what it ingested and nothing else,
compaction merges and drops parts without losing or repeating a row, and a reader always reads
one whole set."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import duckdb
import pytest
from helpers.spool import T0, fill_spool

from engine.published import partitions
from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.partitions import append as publish_recent_attempts
from engine.published.partitions import compact as compact_recent_attempts
from engine.published.publish import read_manifest
from engine.published.read import PublishedData
from engine.store import ingest_spool, open_store

HOUR = timedelta(hours=1)


def _published_ids(published) -> list[str]:
    """Every request id the published set holds, as a reader of the manifest's parts sees it."""
    parts = read_manifest(published)[RECENT_ATTEMPTS].parts
    files = [str(published / p.file) for p in parts]
    if not files:
        return []
    return [r[0] for r in duckdb.sql(f"SELECT request_id FROM read_parquet({files})").fetchall()]


def _cycle(store, spool, published, n: int, *, rows: int = 10, at=None):
    """One scheduler cycle's worth: a spool file of `rows` new attempts, ingested, appended."""
    start = T0 + timedelta(seconds=n * rows)
    fill_spool(spool, files=1, rows=rows, prefix=f"c{n:04d}-", start=start,
               step=timedelta(seconds=1))  # fmt: skip
    ingest_spool(store, spool)
    return publish_recent_attempts(store, published, at or start + timedelta(seconds=rows))


def test_the_first_publish_holds_exactly_the_window(store, spool, published):
    fill_spool(spool, files=20, rows=1000, step=timedelta(seconds=1))  # 20,000 s from T0
    ingest_spool(store, spool)
    now = T0 + timedelta(seconds=20_000)
    snapshot = publish_recent_attempts(store, published, now, hours=1)
    assert snapshot.rows == 3600 and len(snapshot.parts) == 1
    file = published / snapshot.parts[0].file
    times = sorted(r[0] for r in duckdb.sql(f"SELECT started_at FROM '{file}'").fetchall())
    # In ingest order, not sorted (a whole window is too large to sort in a cycle).
    assert times == [now - HOUR + timedelta(seconds=s) for s in range(3600)]


def test_a_cycles_part_is_oldest_first(store, spool, published):
    _cycle(store, spool, published, 0)
    snapshot = _cycle(store, spool, published, 1, rows=50)
    file = published / snapshot.parts[-1].file
    times = [r[0] for r in duckdb.sql(f"SELECT started_at FROM '{file}'").fetchall()]
    assert len(times) == 50 and times == sorted(times)


def test_a_cycle_writes_only_what_it_ingested_and_leaves_the_parts_before_alone(
    store, spool, published
):
    first = _cycle(store, spool, published, 0)
    before = {p.file: (published / p.file).stat().st_mtime_ns for p in first.parts}
    second = _cycle(store, spool, published, 1)
    new = [p for p in second.parts if p.file not in before]
    assert [p.rows for p in new] == [10] and new[0].tier == 0
    assert {p.file: (published / p.file).stat().st_mtime_ns for p in first.parts} == before
    assert sorted(_published_ids(published)) == sorted(
        f"c{n:04d}-00000-{j:05d}" for n in (0, 1) for j in range(10)
    )
    assert second.rows == 20 and second.through_batch == 2


def test_a_cycle_with_nothing_new_writes_no_part_but_says_it_is_current(store, spool, published):
    first = _cycle(store, spool, published, 0)
    later = first.written_at + timedelta(minutes=1)
    again = publish_recent_attempts(store, published, later)
    assert again.parts == first.parts and again.written_at == later


def test_late_attempts_from_before_the_window_are_not_published(store, spool, published):
    _cycle(store, spool, published, 0)
    fill_spool(spool, files=1, rows=5, prefix="late-", start=T0 - timedelta(days=3))
    ingest_spool(store, spool)
    snapshot = publish_recent_attempts(store, published, T0 + timedelta(minutes=1))
    assert not any(i.startswith("late-") for i in _published_ids(published))
    assert snapshot.through_batch == 2, "their batch is behind the snapshot all the same"


def test_compaction_merges_full_tiers_losing_and_repeating_nothing(store, spool, published):
    for n in range(130):  # ten and a bit minutes of 5 s cycles
        _cycle(store, spool, published, n, rows=3)
    ids = sorted(_published_ids(published))
    at = T0 + timedelta(seconds=130 * 3)
    result = compact_recent_attempts(published, at)
    parts = read_manifest(published)[RECENT_ATTEMPTS].parts
    # The first cycle's part is the whole window (the top tier); 120 of the other 129 went
    # into ten of tier 1, and those into one of tier 2.
    assert result.merged == 130 and len(parts) == 11
    assert sorted(p.tier for p in parts) == [0] * 9 + [2, 4]
    assert sorted(_published_ids(published)) == ids
    batches = sorted((p.first_batch, p.last_batch) for p in parts)
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(batches)), batches
    on_disk = {f"{RECENT_ATTEMPTS}/{f.name}" for f in (published / RECENT_ATTEMPTS).iterdir()}
    assert on_disk > {p.file for p in parts}, "the merged parts wait out their grace"
    compact_recent_attempts(published, at + partitions.RETIRED_GRACE)
    on_disk = {f"{RECENT_ATTEMPTS}/{f.name}" for f in (published / RECENT_ATTEMPTS).iterdir()}
    assert on_disk == {p.file for p in parts}


def test_parts_that_left_the_window_are_dropped(store, spool, published):
    for n in range(3):
        _cycle(store, spool, published, n)
    day_later = T0 + timedelta(seconds=20) + timedelta(hours=24, seconds=1)
    compact_recent_attempts(published, day_later)
    assert [i[:5] for i in sorted(_published_ids(published))] == ["c0002"] * 10


def test_another_store_behind_the_same_folder_starts_the_parts_again(
    store, spool, published, tmp_path
):
    for n in range(3):
        _cycle(store, spool, published, n)
    other = open_store(tmp_path / "other" / "switchover.duckdb")
    try:
        snapshot = _cycle(other, spool, published, 7)
    finally:
        other.close()
    assert sorted(_published_ids(published))[0].startswith("c0007")
    assert snapshot.rows == 10 and snapshot.through_batch == 1


@pytest.mark.parametrize("grace", [timedelta(0), partitions.RETIRED_GRACE])
def test_a_reader_never_sees_a_partial_set_while_cycles_append_and_compaction_merges(
    store, spool, published, monkeypatch, grace
):
    """Every request id is n-j, numbered without gaps: a reader's count always equals the
    number of distinct ids (nothing twice) and grows one whole cycle at a time (nothing
    missing), whatever the compaction does meanwhile, deleting merged parts at once or not."""
    monkeypatch.setattr(partitions, "RETIRED_GRACE", grace)
    monkeypatch.setattr(partitions, "FANOUT", (3, 3, 3, 3))
    rows = 7
    _cycle(store, spool, published, 0, rows=rows)
    data = PublishedData(published)
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                found = data.query("recent_attempts", since=T0 - HOUR, limit=1_000_000)
                seen.append((len(found), found["request_id"].nunique()))
            except BaseException as error:
                errors.append(error)

    def merge() -> None:
        while not stop.is_set():
            try:
                compact_recent_attempts(published, T0 + timedelta(hours=1))
            except BaseException as error:
                errors.append(error)

    threads = [threading.Thread(target=read), threading.Thread(target=merge)]
    for thread in threads:
        thread.start()
    cycles = 1
    try:
        # Counted, not timed: enough cycles and reads to overlap many merges.
        while cycles < 60 or len(seen) < 60:
            _cycle(store, spool, published, cycles, rows=rows)
            cycles += 1
            if cycles > 2_000:
                break
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert all(count == distinct and count % rows == 0 for count, distinct in seen), seen
    counts = [count for count, _ in seen]
    assert counts == sorted(counts), "a reader never saw fewer attempts than before"
    assert len(seen) >= 60 and cycles >= 60
    assert len(read_manifest(published)[RECENT_ATTEMPTS].parts) < cycles / 2, "it merged"
