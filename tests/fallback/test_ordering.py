"""Target order: health scores in memory, operator switches in a file, and the pure ordering.

Time is a `VirtualClock` moved by hand; nothing sleeps. The Redis-backed scores and switches
are tested in tests/state/test_ordering_redis.py, against a real redis-server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
from pathlib import Path

import pytest

from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.errors import RequestFailed
from engine.core.messages import Message, Request
from engine.fallback.chain import Chain
from engine.fallback.order import TargetOrder, order_targets
from engine.fallback.target import Target
from engine.providers.openai import OpenAIProvider
from engine.state.health_scores import MemoryHealthScores
from engine.state.switches_file import TargetSwitches
from simulations.fakes import FakeTransport

A, B, C = "gpt/a", "gpt/b", "gpt/c"
WINDOW = 300.0


def attempt(
    target: str,
    outcome: str = "success",
    decision: str = "served",
    fault_kind: str | None = None,
) -> Attempt:
    return Attempt(
        request_id="r1", attempt_number=1, route="chat", target=target, provider="gpt",
        provider_kind="openai", model=target.partition("/")[2], key_kind="managed",
        process_id=1, started_at=VirtualClock().wall(), latency_ms=10.0, ttft_ms=None,
        streamed=False, outcome=outcome, decision=decision,  # type: ignore[arg-type]
        error_class=None if fault_kind is None else f"{fault_kind}_error",
        fault_kind=fault_kind, http_status=None, error_type=None, error_code=None,
        error_message=None, retry_after_s=None, breaker_state="closed",
        served=outcome == "success", fallback_depth=0,
    )  # fmt: skip


def ok(target: str) -> Attempt:
    return attempt(target)


def failed(target: str, fault_kind: str = "provider") -> Attempt:
    return attempt(target, "error", "fall_back", fault_kind)


def in_order(scores: dict[str, float] | None = None, *, disabled=frozenset(), own=(),
             own_keys_first=False, seed=0, targets=(A, B, C)) -> list[str]:  # fmt: skip
    return order_targets(
        targets,
        name=lambda t: t,
        own_key=lambda t: t in own,
        scores=scores,
        disabled=frozenset(disabled),
        own_keys_first=own_keys_first,
        rng=random.Random(seed),
    )


def targets(*names: str, own: tuple[str, ...] = ()) -> list[Target]:
    provider = OpenAIProvider("gpt", api_key="k", transport=FakeTransport(clock=VirtualClock()))
    return [Target(provider, n.partition("/")[2], "own" if n in own else "managed") for n in names]


def names(arranged: list[Target]) -> list[str]:
    return [t.name for t in arranged]


# --- health scores -------------------------------------------------------------------------


async def test_a_target_without_attempts_scores_one():
    """No data fails open: a target nobody tried lately is as good as a healthy one."""
    scores = MemoryHealthScores(VirtualClock())
    assert await scores.scores([A, B]) == {A: 1.0, B: 1.0}


async def test_the_score_is_the_share_of_successes():
    scores = MemoryHealthScores(VirtualClock())
    for a in [ok(A), ok(A), ok(A), failed(A), ok(B), failed(B, "account"), failed(B, "ambiguous"),
              failed(B, "rate_limit")]:  # fmt: skip
        scores.observe(a)
    assert await scores.scores([A, B]) == {A: 0.75, B: 0.25}


async def test_request_and_quality_faults_cancels_and_skips_say_nothing_about_the_target():
    scores = MemoryHealthScores(VirtualClock())
    scores.observe(ok(A))
    scores.observe(attempt(A, "error", "fail_fast", "request"))
    scores.observe(attempt(A, "cancelled", "cancelled"))
    scores.observe(attempt(A, "skipped", "give_up"))
    scores.observe(attempt(A, "error", "fall_back", "quality"))  # one route's contract
    assert await scores.scores([A]) == {A: 1.0}


async def test_outcomes_leave_the_window():
    clock = VirtualClock()
    scores = MemoryHealthScores(clock, window_s=WINDOW)
    scores.observe(failed(A))
    clock.advance(WINDOW * 0.85)
    scores.observe(ok(A))
    assert await scores.scores([A]) == {A: 0.5}
    clock.advance(WINDOW * 0.2)  # the failure is now older than the window; the success is not
    assert await scores.scores([A]) == {A: 1.0}
    scores.observe(failed(A))
    clock.advance(WINDOW)
    assert await scores.scores([A]) == {A: 1.0}, "nothing left: no data again"


async def test_memory_per_target_stays_bounded_however_long_it_runs():
    clock = VirtualClock()
    scores = MemoryHealthScores(clock, window_s=WINDOW)
    for _ in range(10_000):
        scores.observe(failed(A))
        clock.advance(7.0)
    assert len(scores._buckets[A]) <= 10
    assert await scores.scores([A]) == {A: 0.0}


def test_observing_never_raises(caplog):
    scores = MemoryHealthScores(VirtualClock())
    with caplog.at_level(logging.ERROR, logger="switchover.ordering"):
        scores.observe(None)  # type: ignore[arg-type]
        scores.observe(None)  # type: ignore[arg-type]
    assert len(caplog.records) == 1


def test_the_chains_attempts_feed_the_scores():
    """Wired as an attempt hook, a retried then abandoned primary scores 0 and its backup 1;
    a request the provider rejects as malformed leaves them as they were."""
    clock = VirtualClock()
    fake = FakeTransport(clock=clock)
    provider = OpenAIProvider("gpt", base_url="http://openai.fake/v1", api_key="k",
                              transport=fake, clock=clock)  # fmt: skip
    scores = MemoryHealthScores(clock)
    chain = Chain("chat", [Target(provider, "a"), Target(provider, "b")], clock=clock,
                  hooks=[scores.observe], rng=random.Random(1))  # fmt: skip
    ask = Request(messages=(Message.user("hi"),))
    fake.script("a", ["500", "503", "400"])
    clock.run(chain.complete(ask))
    with pytest.raises(RequestFailed):
        clock.run(chain.complete(ask))
    assert clock.run(scores.scores([A, B])) == {A: 0.0, B: 1.0}


# --- the order -----------------------------------------------------------------------------


def test_without_scores_the_configured_order_is_kept():
    assert in_order(None) == [A, B, C]


def test_the_healthiest_target_goes_first():
    assert in_order({A: 0.2, B: 0.9, C: 0.5}) == [B, C, A]


def test_a_target_without_a_score_counts_as_healthy():
    assert in_order({A: 0.5, B: 0.9}) == [C, B, A]


def test_ties_are_broken_at_random_and_the_same_seed_gives_the_same_order():
    orders = {tuple(in_order({A: 1.0, B: 1.0, C: 0.1}, seed=seed)) for seed in range(50)}
    assert orders == {(A, B, C), (B, A, C)}
    assert all(in_order({A: 1.0, B: 1.0}, seed=s) == in_order({A: 1.0, B: 1.0}, seed=s)
               for s in range(20))  # fmt: skip


def test_disabled_targets_are_skipped():
    assert in_order(None, disabled={B}) == [A, C]
    assert in_order({A: 0.1, B: 1.0, C: 0.5}, disabled={B, "gpt/unknown"}) == [C, A]


def test_when_every_target_is_disabled_all_are_tried():
    """Trying a disabled target may fail; trying none certainly does."""
    assert in_order(None, disabled={A, B, C}) == [A, B, C]


def test_own_keys_go_first_keeping_the_configured_order():
    assert in_order(None, own={C, B}, own_keys_first=True) == [B, C, A]
    assert in_order(None, own={C, B}, own_keys_first=False) == [A, B, C]


def test_own_keys_go_first_then_the_healthiest():
    scores = {A: 1.0, B: 0.3, C: 0.6}
    assert in_order(scores, own={B, C}, own_keys_first=True) == [C, B, A]


async def test_an_adaptive_route_orders_by_what_it_observed():
    clock = VirtualClock()
    scores = MemoryHealthScores(clock)
    for a in [failed(A), ok(B), failed(B), ok(C)]:
        scores.observe(a)
    order = TargetOrder(scores=scores, switches=None, own_keys_first=False, rng=random.Random(3))
    assert names(await order.arrange("chat", targets(A, B, C))) == [C, B, A]


async def test_a_route_that_is_not_adaptive_ignores_the_scores_but_not_the_switches(tmp_path):
    switches = TargetSwitches(tmp_path / "targets.json")
    await switches.disable(A)
    order = TargetOrder(scores=None, switches=switches, own_keys_first=True)
    assert names(await order.arrange("chat", targets(A, B, C, own=(C,)))) == [C, B]


async def test_a_route_specific_disable_affects_only_that_route(tmp_path):
    switches = TargetSwitches(tmp_path / "targets.json")
    await switches.disable(A, route="chat", reason="bad answers in German")
    order = TargetOrder(scores=None, switches=switches, own_keys_first=False)
    assert names(await order.arrange("chat", targets(A, B))) == [B]
    assert names(await order.arrange("batch", targets(A, B))) == [A, B]
    assert await switches.disabled("chat") == {A}
    assert await switches.disabled("batch") == frozenset()


async def test_a_route_whose_every_target_is_disabled_warns_once(tmp_path, caplog):
    switches = TargetSwitches(tmp_path / "targets.json")
    await switches.disable(A)
    await switches.disable(B)
    order = TargetOrder(scores=None, switches=switches, own_keys_first=False)
    with caplog.at_level(logging.WARNING, logger="switchover.ordering"):
        for _ in range(3):
            assert names(await order.arrange("chat", targets(A, B))) == [A, B]
    assert [r.getMessage() for r in caplog.records] == [
        "every target of route chat is disabled; all are tried regardless"
    ]


# --- operator switches in a file -------------------------------------------------------------


async def test_switches_are_shared_by_every_instance_on_the_same_file(tmp_path):
    """The CLI's instance and each gateway worker's see one another's changes."""
    path = tmp_path / "control" / "targets.json"
    cli, worker = TargetSwitches(path), TargetSwitches(path)
    assert await worker.disabled("chat") == frozenset()
    await cli.disable(A)
    await cli.disable(B, route="chat")
    assert await worker.disabled("chat") == {A, B}
    await worker.enable(A)
    assert await cli.disabled("chat") == {B}
    await worker.enable(B)  # route-wide only: the route's own switch stays
    assert await cli.disabled("chat") == {B}


async def test_entries_say_what_where_why_who_and_since_when(tmp_path):
    clock = VirtualClock()
    switches = TargetSwitches(tmp_path / "targets.json", now=clock.wall)
    await switches.disable(B, route="chat", reason="timeouts", by="ana")
    first = clock.wall().isoformat()
    clock.advance(60)
    await switches.disable(A, reason="outage", by="bo")
    await switches.disable(B, route="chat", reason="timeouts, still", by="cy")
    plain = {"kind": "disabled", "until": None, "drill_id": None}
    assert await TargetSwitches(tmp_path / "targets.json").entries() == [
        {"target": A, "route": None, "reason": "outage", "by": "bo",
         "since": clock.wall().isoformat(), **plain},
        {"target": B, "route": "chat", "reason": "timeouts, still", "by": "cy", "since": first,
         **plain},
    ]  # fmt: skip


async def test_a_missing_file_disables_nothing(tmp_path):
    switches = TargetSwitches(tmp_path / "nowhere" / "targets.json")
    assert await switches.disabled("chat") == frozenset()
    assert await switches.entries() == []


async def test_a_corrupt_file_disables_nothing_and_is_reported_once(tmp_path, caplog):
    path = tmp_path / "targets.json"
    path.write_text('{"switches": [{"target": "gpt/a"')
    switches = TargetSwitches(path)
    with caplog.at_level(logging.ERROR, logger="switchover.ordering"):
        for _ in range(3):
            assert await switches.disabled("chat") == frozenset()
    assert len(caplog.records) == 1
    assert "unreadable" in caplog.records[0].getMessage()


async def test_a_write_over_a_corrupt_file_keeps_the_old_copy(tmp_path):
    path = tmp_path / "targets.json"
    path.write_text("not json")
    await TargetSwitches(path).disable(A)
    assert await TargetSwitches(path).disabled("chat") == {A}
    assert (tmp_path / "targets.json.bad").read_text() == "not json"


async def test_a_failed_write_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    """Written aside and renamed: a write that fails before the rename changes nothing."""
    path = tmp_path / "targets.json"
    switches = TargetSwitches(path)
    await switches.disable(A)
    before = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        await switches.disable(B)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["targets.json", "targets.json.lock"]
    assert json.loads(before)["switches"][0]["target"] == A


async def test_an_unchanged_file_is_read_once(tmp_path):
    """A reader trusts the file's stat: rewriting it in place with the same inode, size and
    time (which no writer of ours does) goes unnoticed, so no request re-reads the file."""
    path = tmp_path / "targets.json"
    switches = TargetSwitches(path)
    await switches.disable(A)
    assert await switches.disabled("chat") == {A}
    st = path.stat()
    path.write_text(path.read_text().replace(A, B))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert await switches.disabled("chat") == {A}


def test_concurrent_writers_lose_no_change(tmp_path):
    """Writers take a lock around read-change-write: ten operators at once, ten switches."""
    path = tmp_path / "targets.json"

    def disable(i: int) -> None:
        asyncio.run(TargetSwitches(path).disable(f"gpt/m{i}"))

    threads = [threading.Thread(target=disable, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(asyncio.run(TargetSwitches(path).entries())) == 10


def test_the_file_lives_where_the_caller_says(tmp_path):
    path = Path(tmp_path) / "data" / "control" / "targets.json"
    asyncio.run(TargetSwitches(path).disable(A))
    assert json.loads(path.read_text())["switches"][0]["target"] == A
