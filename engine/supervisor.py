"""`switchover up`: the product's processes on one machine, started together, stopped together.

The scheduler (the only owner of the database) and the gateway run as child processes, as in
production. Stopping is SIGTERM to each (the gateway first, so its workers flush their spool
before the scheduler's last cycle ingests it), then SIGKILL for anything still there after a
grace period: no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from engine.paths import DataPaths

Say = Callable[[str], None]
GRACE_S = 30.0


@contextlib.asynccontextmanager
async def child(name: str, args: list[str], say: Say) -> AsyncIterator[asyncio.subprocess.Process]:
    """`switchover <args>` as a child process for the duration of the block."""
    command = [sys.executable, "-m", "engine.cli", *args]
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.DEVNULL)
    say(f"{name} started (pid {process.pid})")
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), GRACE_S)
        if process.returncode is None:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def stack(
    config: Path,
    paths: DataPaths,
    *,
    gateway_port: int,
    say: Say,
    dashboard_port: int | None = None,
) -> AsyncIterator[None]:
    """The scheduler, the gateway and (given a port) the dashboard on `config`; leaving the
    block stops them in reverse (the gateway before the scheduler: its workers flush their
    spool, the scheduler's last cycle then ingests it)."""
    data = ["--data-dir", str(paths.root)]
    async with contextlib.AsyncExitStack() as processes:
        await processes.enter_async_context(
            child("scheduler", ["scheduler", *data, "--config", str(config)], say)
        )
        await processes.enter_async_context(
            child("gateway", ["serve", "-c", str(config), "--port", str(gateway_port), *data], say)
        )
        say(f"gateway on http://127.0.0.1:{gateway_port}/v1 (OpenAI and Anthropic SDKs)")
        if dashboard_port is not None:
            await processes.enter_async_context(
                child("dashboard", ["dashboard", "--port", str(dashboard_port), *data], say)
            )
            say(f"dashboard on http://127.0.0.1:{dashboard_port}")
        yield


async def run_stack(
    config: Path, paths: DataPaths, *, gateway_port: int, say: Say, dashboard_port: int | None
) -> None:
    """Run until cancelled (Ctrl-C)."""
    async with stack(
        config, paths, gateway_port=gateway_port, say=say, dashboard_port=dashboard_port
    ):
        await asyncio.Event().wait()
