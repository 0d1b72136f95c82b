"""The breaker-store contract, run once per store: in memory, in a SQLite file and in a real
Redis.

Time is a `VirtualClock` moved by hand; nothing here sleeps. Each store answers for the whole
state machine of engine.state.breaker, so a store that only loads, applies and saves passes as is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from engine.core.clock import VirtualClock
from engine.state.breaker import (
    AccountFailure,
    Admission,
    BreakerPolicy,
    BreakerState,
    BreakerStore,
    Event,
    MemoryBreakerStore,
    OnChange,
    ProviderFailure,
    RateLimit,
    Released,
    Success,
)
from engine.state.breaker_redis import RedisBreakerStore
from engine.state.breaker_sqlite import SQLiteBreakerStore

KEY = "claude/claude-sonnet-4-5"
OTHER = "openai/gpt-4.1"
POLICY = BreakerPolicy()  # failures=5, window 60 s, min_volume=10, rate 0.5, cooldown 30 s

StoreFactory = Callable[..., BreakerStore]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[StoreFactory]:
    """Builds stores of one kind with the given policy, overrides and on_change."""
    if request.param == "sqlite":
        folder = request.getfixturevalue("tmp_path")
        files: list[SQLiteBreakerStore] = []

        def sqlite(
            policy: BreakerPolicy = POLICY,
            policies_by_key: dict[str, BreakerPolicy] | None = None,
            on_change: OnChange | None = None,
        ) -> BreakerStore:
            path = folder / f"breakers-{len(files)}.sqlite"  # a file per store: not shared here
            files.append(SQLiteBreakerStore(path, policy, policies_by_key, on_change))
            return files[-1]

        yield sqlite
        for each in files:
            assert each.shared and each.fallbacks == 0, "every call must have used the file"
            await each.aclose()
        return
    if request.param == "memory":

        def memory(
            policy: BreakerPolicy = POLICY,
            policies_by_key: dict[str, BreakerPolicy] | None = None,
            on_change: OnChange | None = None,
        ) -> BreakerStore:
            return MemoryBreakerStore(policy, policies_by_key, on_change)

        yield memory
        return
    url = request.getfixturevalue("redis_url")
    made: list[RedisBreakerStore] = []

    def redis(
        policy: BreakerPolicy = POLICY,
        policies_by_key: dict[str, BreakerPolicy] | None = None,
        on_change: OnChange | None = None,
    ) -> BreakerStore:
        made.append(RedisBreakerStore(Redis.from_url(url), policy, policies_by_key, on_change))
        return made[-1]

    yield redis
    for store in made:
        assert store.shared and store.fallbacks == 0, "every call must have gone to Redis"
        await store.aclose()


@pytest.fixture
def store(make_store: StoreFactory) -> BreakerStore:
    return make_store()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


async def report(store: BreakerStore, clock: VirtualClock, *events: Event) -> None:
    for event in events:
        await store.record(KEY, event, clock.now())


async def trip(store: BreakerStore, clock: VirtualClock, retry_after_s: float | None = None):
    await report(store, clock, *[ProviderFailure(retry_after_s)] * POLICY.failures)
    assert (await store.snapshot(KEY)).status == "open"


async def admission(store: BreakerStore, clock: VirtualClock, key: str = KEY) -> Admission:
    return (await store.admit(key, clock.now()))[0]


async def half_open(store: BreakerStore, clock: VirtualClock) -> None:
    await trip(store, clock)
    clock.advance(POLICY.cooldown_s)


class TestBreakerStoreContract:
    async def test_opens_after_consecutive_provider_failures(self, store, clock):
        await report(store, clock, *[ProviderFailure()] * (POLICY.failures - 1))
        assert await admission(store, clock) is Admission.ALLOW
        await report(store, clock, ProviderFailure())
        state = await store.snapshot(KEY)
        assert (state.status, state.open_reason) == ("open", "failures")
        assert await admission(store, clock) is Admission.REJECT_OPEN

    async def test_a_success_between_failures_restarts_the_count(self, store, clock):
        run = [ProviderFailure()] * (POLICY.failures - 1)
        await report(store, clock, *run, Success(), *run)
        assert (await store.snapshot(KEY)).status == "closed"

    async def test_opens_on_failure_rate_once_min_volume_is_reached(self, store, clock):
        await report(store, clock, *[Success(), ProviderFailure()] * (POLICY.min_volume // 2))
        state = await store.snapshot(KEY)
        assert (state.status, state.open_reason) == ("open", "failure_rate")

    async def test_failure_rate_below_min_volume_does_not_open(self, store, clock):
        await report(store, clock, *[Success(), ProviderFailure()] * (POLICY.min_volume // 2 - 1))
        assert (await store.snapshot(KEY)).status == "closed"

    async def test_outcomes_older_than_the_window_no_longer_count(self, store, clock):
        await report(store, clock, *[Success(), ProviderFailure()] * (POLICY.min_volume // 2 - 1))
        clock.advance(POLICY.window_s * 1.5)
        await report(store, clock, Success(), ProviderFailure())
        assert (await store.snapshot(KEY)).status == "closed"

    @pytest.mark.parametrize(
        ("retry_after_s", "held_s"), [(None, 30.0), (5.0, 30.0), (120.0, 120.0)]
    )
    async def test_stays_open_for_the_longer_of_cooldown_and_retry_after(
        self, store, clock, retry_after_s, held_s
    ):
        await trip(store, clock, retry_after_s)
        clock.advance(held_s - 0.001)
        assert await admission(store, clock) is Admission.REJECT_OPEN
        clock.advance(0.001)
        assert await admission(store, clock) is Admission.PROBE

    async def test_half_open_lets_exactly_one_probe_through(self, store, clock):
        await half_open(store, clock)
        assert await admission(store, clock) is Admission.PROBE
        assert await admission(store, clock) is Admission.REJECT_PROBING
        assert await admission(store, clock, OTHER) is Admission.ALLOW  # breakers are per key

    async def test_probe_success_closes_and_resets_the_counts(self, store, clock):
        await half_open(store, clock)
        await admission(store, clock)
        await report(store, clock, Success())
        assert await store.snapshot(KEY) == BreakerState()
        await report(store, clock, *[ProviderFailure()] * (POLICY.failures - 1))
        assert await admission(store, clock) is Admission.ALLOW

    @pytest.mark.parametrize(("retry_after_s", "held_s"), [(None, 30.0), (90.0, 90.0)])
    async def test_probe_failure_reopens_for_the_cooldown(
        self, store, clock, retry_after_s, held_s
    ):
        await half_open(store, clock)
        await admission(store, clock)
        await report(store, clock, ProviderFailure(retry_after_s))
        state = await store.snapshot(KEY)
        assert (state.status, state.open_reason) == ("open", "probe")
        clock.advance(held_s - 0.001)
        assert await admission(store, clock) is Admission.REJECT_OPEN
        clock.advance(0.001)
        assert await admission(store, clock) is Admission.PROBE

    async def test_an_unanswered_probe_lease_expires_and_allows_one_new_probe(self, store, clock):
        await half_open(store, clock)
        assert await admission(store, clock) is Admission.PROBE
        clock.advance(POLICY.probe_lease_s - 0.001)
        assert await admission(store, clock) is Admission.REJECT_PROBING
        clock.advance(0.001)
        assert await admission(store, clock) is Admission.PROBE
        assert await admission(store, clock) is Admission.REJECT_PROBING

    async def test_released_gives_back_the_probe_lease_and_nothing_else(self, store, clock):
        await half_open(store, clock)
        await admission(store, clock)
        await report(store, clock, Released())
        assert (await store.snapshot(KEY)).status == "half_open"
        assert await admission(store, clock) is Admission.PROBE

    async def test_account_failure_opens_a_fresh_breaker_for_the_long_cooldown(self, store, clock):
        await report(store, clock, AccountFailure())
        state = await store.snapshot(KEY)
        assert (state.status, state.open_reason) == ("open", "account")
        clock.advance(POLICY.account_cooldown_s - 0.001)
        assert await admission(store, clock) is Admission.REJECT_OPEN
        clock.advance(0.001)
        assert await admission(store, clock) is Admission.PROBE

    async def test_rate_limits_never_open_the_breaker(self, store, clock):
        await report(store, clock, *[RateLimit(1.0)] * (POLICY.min_volume * 3))
        state = await store.snapshot(KEY)
        assert (state.status, state.consecutive_failures, state.recent) == ("closed", 0, ())

    @pytest.mark.parametrize(("reset_after_s", "cooled_s"), [(4.0, 4.0), (None, 10.0)])
    async def test_a_rate_limit_cools_the_target_until_the_reset(
        self, store, clock, reset_after_s, cooled_s
    ):
        await report(store, clock, RateLimit(reset_after_s))
        clock.advance(cooled_s - 0.001)
        assert await admission(store, clock) is Admission.REJECT_COOLING
        clock.advance(0.001)
        assert await admission(store, clock) is Admission.ALLOW

    async def test_a_rate_limited_probe_gives_back_its_lease(self, store, clock):
        await half_open(store, clock)
        await admission(store, clock)
        await report(store, clock, RateLimit(2.0))
        assert await admission(store, clock) is Admission.REJECT_COOLING
        clock.advance(2.0)
        assert await admission(store, clock) is Admission.PROBE

    async def test_a_late_success_does_not_close_an_open_breaker(self, store, clock):
        await trip(store, clock)
        await report(store, clock, Success())
        assert await admission(store, clock) is Admission.REJECT_OPEN

    async def test_admit_reports_the_status_it_decided_in(self, store, clock):
        assert await store.admit(KEY, clock.now()) == (Admission.ALLOW, "closed")
        await trip(store, clock)
        assert await store.admit(KEY, clock.now()) == (Admission.REJECT_OPEN, "open")
        clock.advance(POLICY.cooldown_s)
        assert await store.admit(KEY, clock.now()) == (Admission.PROBE, "half_open")

    async def test_concurrent_admits_on_a_half_open_key_grant_exactly_one_probe(self, store, clock):
        await half_open(store, clock)
        results = await asyncio.gather(*(store.admit(KEY, clock.now()) for _ in range(100)))
        admissions = [a for a, _ in results]
        assert admissions.count(Admission.PROBE) == 1
        assert admissions.count(Admission.REJECT_PROBING) == 99

    async def test_on_change_reports_each_opening_and_closing(self, make_store, clock):
        seen: list[tuple[str, str, str, str | None]] = []
        store = make_store(
            on_change=lambda k, old, new: seen.append((k, old.status, new.status, new.open_reason))
        )
        await trip(store, clock)
        await report(store, clock, AccountFailure(), AccountFailure())  # escalates once
        clock.advance(POLICY.account_cooldown_s)
        await admission(store, clock)
        await report(store, clock, Success())
        assert seen == [
            (KEY, "closed", "open", "failures"),
            (KEY, "open", "open", "account"),
            (KEY, "open", "half_open", "account"),
            (KEY, "half_open", "closed", None),
        ]

    async def test_a_route_can_override_the_policy_for_its_key(self, make_store, clock):
        strict = BreakerPolicy(failures=1)
        store = make_store(policies_by_key={OTHER: strict})
        assert store.policy_for(OTHER) == strict
        assert store.policy_for(KEY) == POLICY
        await store.record(OTHER, ProviderFailure(), clock.now())
        await store.record(KEY, ProviderFailure(), clock.now())
        assert (await store.snapshot(OTHER)).status == "open"
        assert (await store.snapshot(KEY)).status == "closed"

    async def test_snapshot_all_lists_every_key_seen(self, store, clock):
        assert await store.snapshot_all() == {}
        await admission(store, clock, OTHER)
        await trip(store, clock)
        states = await store.snapshot_all()
        assert set(states) == {KEY, OTHER}
        assert (states[KEY].status, states[OTHER].status) == ("open", "closed")
