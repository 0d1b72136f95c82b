"""Where the Live page reads the breakers (dashboard.live_breakers): a real gateway on a port,
the data folder's SQLite store, Redis; each says where it was read and why the ones before it
were not. No page here: tests/dashboard/test_live_page.py shows them."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from gateway.conftest import PROVIDER_KEYS, ServerThread, config_for

from dashboard.live_breakers import GATEWAY_URL_ENV, KEYS_ENV, read
from engine.core.clock import SystemClock
from engine.core.paths import DataPaths
from engine.gateway.app import GatewaySettings, create_app
from engine.runtime.switchover import Switchover
from engine.state.breaker import ProviderFailure
from engine.state.breaker_sqlite import SQLiteBreakerStore

TARGET = "claude/model-a"
NOWHERE = SimpleNamespace(anthropic_url="http://127.0.0.1:9", openai_url="http://127.0.0.1:9/v1")


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def start_gateway() -> Iterator:
    """`start_gateway(record_to, keys)`: the real gateway app on a free port, its breaker on
    TARGET opened through its own store (no request leaves it: its providers are nowhere)."""
    running: list[ServerThread] = []

    def start(record_to: DataPaths | None, keys: frozenset[str] = frozenset()) -> ServerThread:
        config = config_for(NOWHERE, {"support": [TARGET]})
        sw = Switchover(config, environ=PROVIDER_KEYS, record_to=record_to)
        for _ in range(config.routes["support"].policy.breaker_failures):
            asyncio.run(sw.breakers.record(TARGET, ProviderFailure(), sw.clock.now()))
        server = ServerThread(create_app(sw, GatewaySettings(keys=keys), owns=True))
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


def test_a_gateway_that_wants_a_key_is_shown_the_first_of_the_gateway_keys(tmp_path, start_gateway):
    paths = DataPaths(tmp_path / "data")
    server = start_gateway(paths, frozenset({"gw-secret-1"}))
    env = {GATEWAY_URL_ENV: server.url, KEYS_ENV: "ops:gw-secret-1, other:gw-secret-2"}
    told = read(paths, None, env)
    assert (told.source, told.where, told.shared) == ("gateway", server.url, True)
    [row] = told.breakers.itertuples()
    assert (row.target, row.status, row.reason) == (TARGET, "open", "failures")
    assert 0 < row.open_remaining_s <= 30 and row.probing is False
    refused = read(paths, None, {GATEWAY_URL_ENV: server.url})
    assert refused.problems[0] == f"the gateway at {server.url} answered 401"


def test_a_gateway_recording_into_another_data_folder_is_someone_elses(tmp_path, start_gateway):
    ours, theirs = DataPaths(tmp_path / "ours"), DataPaths(tmp_path / "theirs")
    server = start_gateway(theirs)
    told = read(ours, None, {GATEWAY_URL_ENV: server.url})
    assert told.source == "" and told.breakers.empty
    assert told.problems == (
        f"the gateway at {server.url} records to {theirs.spool}, not this dashboard's data folder",
        f"no breaker store of this boot at {ours.breaker_states}",
    )


async def test_without_a_gateway_the_data_folders_store_is_read_and_never_moved(tmp_path):
    """A lapsed open breaker is read as open, probe due, and stays open for the workers: the
    next request, not the dashboard, half-opens it."""
    paths = DataPaths(tmp_path / "data")
    store = SQLiteBreakerStore(paths.breaker_states)
    try:
        for _ in range(5):
            await store.record(TARGET, ProviderFailure(), time.monotonic() - 60)
        told = read(paths, None, {GATEWAY_URL_ENV: _closed_port_url()})
        assert (told.source, told.where) == ("sqlite", str(paths.breaker_states))
        assert told.problems[0].endswith("did not answer (ConnectError)")
        [row] = told.breakers.itertuples()
        assert (row.status, row.open_remaining_s, row.probe_due) == ("open", 0.0, True)
        assert 59 < row.opened_s_ago < 70
        assert (await store.snapshot(TARGET)).status == "open", "looking moved nothing"
    finally:
        await store.aclose()


def test_with_redis_configured_its_shared_states_are_read(tmp_path, redis_url):
    """Synchronous, as Streamlit's script thread calls it: no event loop of the caller's."""
    from engine.state.breaker_redis import RedisBreakerStore

    clock = SystemClock()

    async def open_it() -> None:  # as five failing gateway requests would
        store = RedisBreakerStore.from_url(redis_url, clock=clock)
        try:
            for _ in range(5):
                await store.record(TARGET, ProviderFailure(), clock.now())
        finally:
            await store.aclose()

    asyncio.run(open_it())
    told = read(DataPaths(tmp_path / "data"), redis_url, {GATEWAY_URL_ENV: _closed_port_url()})
    assert told.source == "redis" and "password" not in told.where
    [row] = told.breakers.itertuples()
    assert row.status == "open" and 25 < row.open_remaining_s <= 30


def test_with_nothing_to_read_each_source_says_why(tmp_path):
    paths = DataPaths(tmp_path / "data")
    url = _closed_port_url()
    told = read(paths, "redis://127.0.0.1:9/0", {GATEWAY_URL_ENV: url})
    assert told.source == "" and told.breakers.empty
    assert told.problems == (
        f"the gateway at {url} did not answer (ConnectError)",
        "the breaker store in Redis (127.0.0.1:9/0) did not answer",
    )
