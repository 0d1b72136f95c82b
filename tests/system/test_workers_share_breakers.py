"""`switchover serve --workers 4`: four gateway processes, one breaker, whether the workers
share it through Redis (`[state] redis_url`) or, by default, through the data folder's SQLite
file.

The primary fails: it is called `breaker_failures` times in all (not per worker) before every
worker skips it; once the cooldown is over exactly one probe reaches it across the four; its
success closes the breaker for every worker. The fake providers' call log counts the calls.
The cooldown's end is read from `/v1/status` (`probe_due`), never slept through.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from helpers.redis_server import free_port

from simulations.fakes import FakeProviders

WORKERS = 4
FAILURES = 3
COOLDOWN_S = 2.0
PRIMARY, BACKUP = "gpt/primary", "gpt/backup"
# Each request a question of its own, as users send: one content is one piece of evidence
# against a breaker however often it is sent (engine.fallback.poison).
QUESTIONS = (f"hi, question {n}" for n in itertools.count())
# A new connection per request, so that the kernel hands requests to different workers.
CLOSE = {"connection": "close"}

CONFIG = """
[providers.gpt]
kind = "openai"
base_url = "{openai_url}"
api_key_env = "WORKERS_TEST_KEY"

[policy]
primary_retries = 0
breaker_failures = {failures}
breaker_cooldown_s = {cooldown}
budget_s = 10
attempt_timeout_s = 5
backoff_base_s = 0.01
backoff_max_s = 0.02

[routes.support]
targets = ["{primary}", "{backup}"]
"""
REDIS = """
[state]
redis_url = "{redis_url}"
"""


@pytest.fixture
async def fake() -> AsyncIterator[FakeProviders]:
    async with FakeProviders(port=0) as fake:
        yield fake


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def gateway(
    tmp_path: Path, fake: FakeProviders, backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    config = tmp_path / "switchover.toml"
    text = CONFIG.format(
        openai_url=fake.openai_url,
        failures=FAILURES,
        cooldown=COOLDOWN_S,
        primary=PRIMARY,
        backup=BACKUP,
    )
    if backend == "redis":
        text += REDIS.format(redis_url=request.getfixturevalue("redis_url"))
    config.write_text(text)
    port = free_port()
    log = (tmp_path / "gateway.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "-c", str(config), "--port", str(port),
         "--workers", str(WORKERS), "--data-dir", str(tmp_path / "data")],
        env={**os.environ, "WORKERS_TEST_KEY": "k"},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + 20
            while not await _ready(client):
                if serve.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the gateway did not start:\n{_tail(tmp_path / 'gateway.log')}")
                await asyncio.sleep(0.1)
            yield client
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGINT)  # uvicorn stops its workers, which flush
        try:
            serve.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        log.close()


async def test_four_workers_open_probe_and_close_one_shared_breaker(
    gateway: httpx.AsyncClient, fake: FakeProviders, tmp_path: Path, backend: str
):
    assert {doc["breaker_store"] for doc in (await _statuses(gateway)).values()} == {backend}
    if backend == "sqlite":
        said = (tmp_path / "gateway.log").read_text()
        assert "breakers shared by this host's gateway processes through" in said
        assert str(tmp_path / "data" / "state" / "breakers.sqlite") in said

    # The primary is down. One request at a time, so that each sees the failures before it.
    fake.script("primary", ["500"], cycle=True)
    for _ in range(3 * FAILURES):
        assert (await _ask(gateway)) == BACKUP
    assert len(fake.calls("primary")) == FAILURES, "opened after that many failures in total"
    assert set((await _primary_states(gateway)).values()) == {"open"}

    # The cooldown is over and the primary is back, slowly: of a burst over every worker
    # exactly one request probes it; the rest go to the backup meanwhile.
    await _probe_due(gateway)
    fake.script("primary", [])
    fake.latency("primary", fixed_ms=2000)
    served = await asyncio.gather(*(_ask(gateway) for _ in range(12)))
    assert sorted(served) == sorted([PRIMARY] + [BACKUP] * 11)
    assert len(fake.calls("primary")) == FAILURES + 1, "one probe across all workers"

    # The probe's success closed the breaker for every worker: all send to the primary again.
    fake.latency("primary", fixed_ms=0)
    assert set((await _primary_states(gateway)).values()) == {"closed"}
    served = await asyncio.gather(*(_ask(gateway) for _ in range(12)))
    assert served == [PRIMARY] * 12
    assert len(fake.calls("primary")) == FAILURES + 1 + 12


async def _ask(client: httpx.AsyncClient) -> str:
    """Which target answered one request (the fake names the model it played)."""
    ask = {"model": "support", "max_tokens": 16,
           "messages": [{"role": "user", "content": next(QUESTIONS)}]}  # fmt: skip
    answer = await client.post("/v1/chat/completions", json=ask, headers=CLOSE)
    assert answer.status_code == 200, answer.text
    return f"gpt/{answer.json()['model']}"


async def _statuses(client: httpx.AsyncClient) -> dict[int, dict]:
    """`/v1/status` of each of the workers (by pid), every one saying its breakers are shared."""
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + 30
    while len(seen) < WORKERS:
        assert time.monotonic() < deadline, f"only workers {sorted(seen)} answered"
        docs = await asyncio.gather(*(client.get("/v1/status", headers=CLOSE) for _ in range(16)))
        for doc in (d.json() for d in docs):
            assert doc["breakers_shared"] is True
            seen[doc["pid"]] = doc
    return seen


async def _primary_states(client: httpx.AsyncClient) -> dict[int, str]:
    """The primary's breaker status as each of the workers reports it (by pid)."""
    docs = await _statuses(client)
    return {
        pid: doc["breakers"].get(PRIMARY, {"status": "closed"})["status"]
        for pid, doc in docs.items()
    }


async def _probe_due(client: httpx.AsyncClient) -> None:
    """Until the primary's open time is up (its next request is the probe)."""
    deadline = time.monotonic() + COOLDOWN_S + 30
    while not (await client.get("/v1/status")).json()["breakers"][PRIMARY]["probe_due"]:
        assert time.monotonic() < deadline, "the breaker's cooldown never ended"
        await asyncio.sleep(0.05)


async def _ready(client: httpx.AsyncClient) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return (await client.get("/readyz")).status_code == 200
    return False


def _tail(path: Path) -> str:
    return "\n".join(path.read_text().splitlines()[-30:])


async def test_every_scrape_of_four_workers_says_the_breakers_are_shared(
    gateway: httpx.AsyncClient, tmp_path: Path
):
    """Issue 35: the gauge is the least over the live workers, and a worker that had served
    nothing yet still held the gauge's initial 0, so most scrapes read 0 with the store up."""
    await _statuses(gateway)  # the four workers have started: a scrape reads all four
    for _ in range(12):  # a new connection each: the scrapes land on different workers
        scrape = await gateway.get("/metrics", headers=CLOSE)
        assert scrape.status_code == 200, _tail(tmp_path / "gateway.log")
        said = [line for line in scrape.text.splitlines() if "store_shared" in line]
        assert "switchover_breaker_store_shared 1.0" in said, said
