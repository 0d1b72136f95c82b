"""What the SQLite store adds to the contract: the processes of one host (here, several stores
on one file, and real processes) share one breaker, a lock held by another process is waited
for without holding up the event loop, a file of another boot is forgotten, and an unusable
file costs no request.

Time is a `VirtualClock` moved by hand; nothing sleeps to wait for a breaker.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import queue
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from engine.config import parse_config
from engine.core.clock import VirtualClock
from engine.core.paths import DataPaths
from engine.gateway.app import create_app
from engine.runtime.switchover import Switchover
from engine.state.breaker import (
    Admission,
    BreakerPolicy,
    MemoryBreakerStore,
    ProviderFailure,
    RateLimit,
)
from engine.state.breaker_sqlite import BUSY_DELAYS_S, SQLiteBreakerStore, read_states
from simulations.fakes import FakeTransport

KEY = "gpt/primary"
POLICY = BreakerPolicy(failures=3, cooldown_s=2.0, probe_lease_s=5.0)
ENV = {"K": "test-key"}
Stores = Callable[..., list[SQLiteBreakerStore]]


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    """`stores(n, path=...)`: n stores on one file, each with its own connection, as n
    gateway workers of one host have."""
    made: list[SQLiteBreakerStore] = []

    def build(n: int = 4, path: Path | None = None, **options: object) -> list[SQLiteBreakerStore]:
        where = path or tmp_path / "state" / "breakers.sqlite"
        new = [SQLiteBreakerStore(where, POLICY, **options) for _ in range(n)]  # type: ignore[arg-type]
        made.extend(new)
        return new

    yield build
    for store in made:
        await store.aclose()


async def trip(store: SQLiteBreakerStore, clock: VirtualClock) -> None:
    for _ in range(POLICY.failures):
        await store.record(KEY, ProviderFailure(), clock.now())


async def test_failures_from_every_process_count_towards_one_breaker(stores):
    clock = VirtualClock()
    workers = stores()
    for worker in workers[: POLICY.failures]:  # one failure each, in different processes
        assert (await worker.admit(KEY, clock.now()))[0] is Admission.ALLOW
        await worker.record(KEY, ProviderFailure(), clock.now())
    for worker in workers:
        assert (await worker.admit(KEY, clock.now())) == (Admission.REJECT_OPEN, "open")


async def test_a_rate_limit_cools_the_target_for_every_process(stores):
    clock = VirtualClock()
    first, second = stores(2)
    await first.record(KEY, RateLimit(4.0), clock.now())
    assert (await second.admit(KEY, clock.now()))[0] is Admission.REJECT_COOLING
    clock.advance(4.0)
    assert (await second.admit(KEY, clock.now()))[0] is Admission.ALLOW


def _admit_many(path: str, now: float, times: int, start: object, out: object) -> None:
    """In a process of its own: wait for the others, then admit `times` times."""

    async def run() -> list[str]:
        store = SQLiteBreakerStore(Path(path), POLICY)
        await store.admit("warm-up", now)  # the file is open before the race starts
        start.wait()  # type: ignore[attr-defined]
        admissions = [(await store.admit(KEY, now))[0].value for _ in range(times)]
        assert store.fallbacks == 0
        await store.aclose()
        return admissions

    out.put(asyncio.run(run()))  # type: ignore[attr-defined]


def _result(out, racers) -> list[str]:
    """The next racer's admissions; a racer that died says so instead of the wait timing out."""
    while True:
        try:
            return out.get(timeout=0.5)
        except queue.Empty:
            dead = [r.exitcode for r in racers if r.exitcode not in (None, 0)]
            assert not dead, f"a racing process died before answering: exit codes {dead}"


async def test_exactly_one_of_several_real_processes_gets_the_probe(stores, tmp_path):
    """Processes racing on a half-open breaker, truly in parallel: one PROBE among them."""
    clock = VirtualClock()
    path = tmp_path / "state" / "breakers.sqlite"
    (parent,) = stores(1, path)
    await trip(parent, clock)
    clock.advance(POLICY.cooldown_s)
    spawn = multiprocessing.get_context("spawn")
    processes, times = 3, 200
    start, out = spawn.Barrier(processes), spawn.Queue()
    racers = [
        spawn.Process(
            target=_admit_many, args=(str(path), clock.now(), times, start, out), daemon=True
        )
        for _ in range(processes)
    ]
    for racer in racers:
        racer.start()
    admissions = [a for _ in racers for a in await asyncio.to_thread(_result, out, racers)]
    for racer in racers:
        racer.join(timeout=30)
        assert racer.exitcode == 0
    assert admissions.count(Admission.PROBE.value) == 1
    assert admissions.count(Admission.REJECT_PROBING.value) == processes * times - 1


async def test_a_lock_held_by_another_process_is_waited_for_without_holding_the_loop(
    stores, tmp_path
):
    clock = VirtualClock()
    (store,) = stores(1)
    await store.admit(KEY, clock.now())  # the file exists and is prepared
    other = sqlite3.connect(tmp_path / "state" / "breakers.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing
    recording = asyncio.create_task(store.record(KEY, ProviderFailure(), clock.now()))
    for _ in range(3):
        await asyncio.sleep(0)  # this coroutine runs while the store waits: the loop is free
    assert not recording.done()
    other.execute("COMMIT")
    other.close()
    await asyncio.wait_for(recording, 10)
    assert (await store.snapshot(KEY)).consecutive_failures == 1
    assert store.fallbacks == 0 and store.shared


async def test_a_lock_held_past_the_busy_delays_answers_that_call_from_memory(
    stores, tmp_path, caplog
):
    clock = VirtualClock()
    (store,) = stores(1)
    await store.admit(KEY, clock.now())
    other = sqlite3.connect(tmp_path / "state" / "breakers.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with caplog.at_level(logging.WARNING, logger="switchover.breaker"):
            await asyncio.wait_for(store.record(KEY, ProviderFailure(), clock.now()), 30)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.fallbacks == 1
    assert store.shared, "a busy file is not an unusable one"
    assert f"locked by another process for {sum(BUSY_DELAYS_S):.1f} s" in caplog.text
    assert (await store.snapshot(KEY)).consecutive_failures == 0, "the file did not see it"


async def test_a_bystander_reads_the_states_without_moving_a_breaker(stores, tmp_path):
    """`read_states` (the dashboard's look beside the gateway) never admits, prepares or
    empties: a lapsed open breaker stays open for the workers, and a file of another boot or
    no file at all reads as nothing, leaving the file as it was."""
    clock = VirtualClock()
    path = tmp_path / "state" / "breakers.sqlite"
    assert read_states(path) is None, "no file: nothing, and none created"
    assert not path.exists()
    (worker,) = stores(1, path, boot=lambda: 1_000_000.0)
    await trip(worker, clock)
    clock.advance(POLICY.cooldown_s + 1)  # its time is up: the next admit would half-open it
    read = read_states(path, boot=lambda: 1_000_000.2)
    assert read is not None and read[KEY].status == "open"
    assert read[KEY].open_until is not None and read[KEY].open_until < clock.now()
    assert read_states(path, boot=lambda: 1_003_600.0) is None, "another boot's times"
    assert (await worker.snapshot(KEY)) == read[KEY], "the file holds what it held"


async def test_a_file_of_another_boot_is_forgotten(stores, tmp_path):
    clock = VirtualClock()
    path = tmp_path / "state" / "breakers.sqlite"
    (before,) = stores(1, path, boot=lambda: 1_000_000.0)
    await trip(before, clock)
    await before.aclose()
    (same_boot,) = stores(1, path, boot=lambda: 1_000_000.4)  # the clocks drifted a little
    assert (await same_boot.snapshot(KEY)).status == "open"
    await same_boot.aclose()
    (rebooted,) = stores(1, path, boot=lambda: 1_003_600.0)
    assert await rebooted.snapshot_all() == {}
    assert (await rebooted.admit(KEY, clock.now()))[0] is Admission.ALLOW


async def test_an_unusable_file_falls_back_to_memory_and_says_so(stores, tmp_path, caplog):
    clock = VirtualClock()
    (tmp_path / "state").write_text("a file where the folder should be")
    (store,) = stores(1)
    with caplog.at_level(logging.WARNING, logger="switchover.breaker"):
        assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
        await trip(store, clock)
        assert (await store.admit(KEY, clock.now()))[0] is Admission.REJECT_OPEN  # in memory
        assert (await store.snapshot(KEY)).status == "open"
    assert not store.shared
    assert store.fallbacks == 6
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, "one line per outage, not one per call"
    assert "unusable" in warnings[0] and "memory" in warnings[0]


async def test_a_usable_file_again_is_shared_after_the_retry_interval(stores, tmp_path, caplog):
    clock = VirtualClock()
    (tmp_path / "state").write_text("in the way")
    (store,) = stores(1, retry_s=5.0)
    await trip(store, clock)
    assert not store.shared
    (tmp_path / "state").unlink()
    clock.advance(4.9)
    await store.admit(KEY, clock.now())
    assert not store.shared, "the file is not retried on every call"
    clock.advance(0.1)
    with caplog.at_level(logging.WARNING, logger="switchover.breaker"):
        assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
    assert store.shared
    assert "usable again" in caplog.text
    # What this process learnt alone is dropped: the file's (empty) state is the truth.
    assert (await store.snapshot(KEY)).status == "closed"


async def test_an_unreadable_stored_state_counts_as_closed_and_is_rewritten(stores, tmp_path):
    clock = VirtualClock()
    (store,) = stores(1)
    await store.admit(KEY, clock.now())
    other = sqlite3.connect(tmp_path / "state" / "breakers.sqlite", isolation_level=None)
    other.execute("INSERT OR REPLACE INTO breakers (key, recent) VALUES (?, 'not json')", (KEY,))
    other.close()
    assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
    await store.record(KEY, ProviderFailure(), clock.now())
    assert (await store.snapshot(KEY)).consecutive_failures == 1


# --- chosen by the composition root ----------------------------------------------------------


def _config() -> dict[str, object]:
    return {
        "providers": {"gpt": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": "K"}},
        "routes": {"support": {"targets": ["gpt/primary", "gpt/backup"]}},
    }


async def _status(sw: Switchover) -> tuple[dict, str, httpx.Response]:
    app = create_app(sw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as gw:
        body = {"model": "support", "messages": [{"role": "user", "content": "hi"}]}
        answer = await gw.post("/v1/chat/completions", json=body)
        status = (await gw.get("/v1/status")).json()
        metrics = (await gw.get("/metrics")).text
    await sw.aclose()
    return status, metrics, answer


async def test_a_gateway_with_a_data_folder_shares_its_breakers_through_its_file(tmp_path):
    paths = DataPaths(tmp_path / "data")
    sw = Switchover(parse_config(_config()), transport=FakeTransport(), environ=ENV,
                    record_to=paths)  # fmt: skip
    assert isinstance(sw.breakers, SQLiteBreakerStore)
    assert sw.breakers.path == paths.breaker_states
    status, metrics, answer = await _status(sw)
    assert answer.status_code == 200
    assert (status["breakers_shared"], status["breaker_store"]) == (True, "sqlite")
    assert "switchover_breaker_store_shared 1.0" in metrics


async def test_without_a_data_folder_or_on_a_virtual_clock_breakers_stay_in_memory(tmp_path):
    """A virtual clock's time is its own process's: no other process could share it."""
    config = parse_config(_config())
    alone = Switchover(config, transport=FakeTransport(), environ=ENV)
    virtual = Switchover(config, transport=FakeTransport(), environ=ENV, clock=VirtualClock(),
                         record_to=DataPaths(tmp_path / "data"))  # fmt: skip
    for sw in (alone, virtual):
        assert isinstance(sw.breakers, MemoryBreakerStore)
    status, _, _ = await _status(alone)
    await virtual.aclose()
    assert (status["breakers_shared"], status["breaker_store"]) == (False, "memory")


async def test_a_gateway_whose_breaker_file_is_unusable_answers_and_reports_the_fallback(
    tmp_path,
):
    paths = DataPaths(tmp_path / "data")
    paths.breaker_states.parent.parent.mkdir(parents=True)
    paths.breaker_states.parent.write_text("in the way")
    sw = Switchover(parse_config(_config()), transport=FakeTransport(), environ=ENV,
                    record_to=paths)  # fmt: skip
    status, metrics, answer = await _status(sw)
    assert answer.status_code == 200
    assert (status["breakers_shared"], status["breaker_store"]) == (False, "sqlite")
    assert "switchover_breaker_store_shared 0.0" in metrics
    fallbacks = [ln for ln in metrics.splitlines() if ln.startswith("switchover_breaker_store_fa")]
    assert fallbacks and float(fallbacks[0].split()[-1]) >= 1
