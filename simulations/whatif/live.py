"""A scenario run for real: the fake providers over HTTP follow its fault schedule, the real
`Switchover` (HTTP adapters, transport, recorder) sends its traffic on the real clock. Run on a
compressed scenario (`scenario.compressed`), it is the check of the simulator's fidelity: both
must agree on requests failed, fallback rate and cost (`python -m bench.fidelity`, a measurement
rather than a test: the live side runs on the wall clock)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import time
from datetime import UTC, datetime, timedelta

from engine.config import Config
from engine.core.errors import ChainError
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.runtime.build import build_pricer
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeProviders
from simulations.whatif.arrivals import arrivals
from simulations.whatif.candidates import with_backup
from simulations.whatif.results import RunResult, results_of
from simulations.whatif.scenario import Scenario

KEY_ENV = "SWITCHOVER_LIVE_SCENARIO_KEY"
# The fake's name for each scenario fault kind ("slow" is a latency, not a fault: not here).
_FAKE_FAULTS = {"overloaded": "overloaded", "server_error": "server_error", "auth": "auth",
                "timeout": "read_timeout", "rate_limit": "rate_limit"}  # fmt: skip


async def run_live(scenario: Scenario, backup: str, paths: DataPaths) -> RunResult:
    """`scenario` (already compressed to seconds) through the real engine over HTTP."""
    shutil.rmtree(paths.root, ignore_errors=True)
    config = with_backup(scenario.config, backup)
    traffic = arrivals(scenario)
    async with FakeProviders("127.0.0.1", 0) as fake:
        fake.latency(median_ms=scenario.median_ms, p99_ms=scenario.p99_ms)
        for model, windows in _schedule(scenario, config).items():
            fake.schedule(model, windows=windows)
        urls = {"anthropic": fake.anthropic_url, "openai": fake.openai_url}
        providers = {
            name: dataclasses.replace(pc, base_url=urls[pc.kind], api_key_env=KEY_ENV)
            for name, pc in config.providers.items()
        }
        live = dataclasses.replace(config, providers=providers)
        started = time.perf_counter()
        async with Switchover(live, record_to=paths, environ={KEY_ENV: "live"}) as sw:
            began = asyncio.get_running_loop().time()
            tasks = []
            for arrival in traffic:
                await asyncio.sleep(
                    max(0.0, began + arrival.at_s - asyncio.get_running_loop().time())
                )
                request = Request(
                    messages=(Message.user("x" * (4 * arrival.input_tokens)),),
                    max_tokens=arrival.output_tokens,
                    feature=arrival.route,
                )
                tasks.append(asyncio.create_task(_send(sw, arrival.route, request)))
            await asyncio.gather(*tasks)
        seconds = time.perf_counter() - started
    end = datetime.now(UTC) + timedelta(minutes=1)  # live attempts carry the real time
    pipeline = Pipeline(paths, build_pricer(config), now=lambda: end)  # priced as recorded
    try:
        pipeline.cycle()
        result = results_of(pipeline.con, "live", backup, scenario)
    finally:
        pipeline.close()
    result.seconds = seconds
    return result


async def _send(sw: Switchover, route: str, request: Request) -> None:
    with contextlib.suppress(ChainError):
        await sw.complete(route, request)


def _schedule(scenario: Scenario, config: Config) -> dict[str, list[dict[str, object]]]:
    models = {t.name: t.model for r in config.routes.values() for t in r.targets}
    windows: dict[str, list[dict[str, object]]] = {}
    for fault in scenario.faults:
        name = _FAKE_FAULTS[fault.kind]
        if fault.kind == "rate_limit" and fault.retry_after_s is not None:
            name += f":retry_after={fault.retry_after_s:g}"
        for target, model in models.items():
            if fault.hits(target):
                windows.setdefault(model, []).append(
                    {
                        "start_s": fault.start_s,
                        "end_s": fault.end_s,
                        "fault": name,
                        "rate": fault.rate,
                    }
                )
    return windows
