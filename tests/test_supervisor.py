"""`switchover up` with a real configuration: the gateway and the scheduler as processes,
answering, recording, and stopped without orphans."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from engine.paths import DataPaths
from engine.supervisor import stack
from simulations.fakes import FakeProviders


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_the_stack_serves_records_and_stops_cleanly(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SUPERVISOR_TEST_KEY", "k")
    paths = DataPaths(tmp_path / "data")
    lines: list[str] = []
    async with FakeProviders(port=0) as fake:
        config = tmp_path / "switchover.toml"
        config.write_text(
            f'[providers.gpt]\nkind = "openai"\nbase_url = "{fake.openai_url}"\n'
            'api_key_env = "SUPERVISOR_TEST_KEY"\n'
            '[routes.support]\ntargets = ["gpt/gpt-4.1-mini"]\n'
        )
        port = _free_port()
        async with stack(config, paths, gateway_port=port, say=lines.append):
            url = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=url) as client:
                for _ in range(100):  # the gateway process takes a moment to start
                    with contextlib.suppress(httpx.HTTPError):
                        if (await client.get("/readyz")).status_code == 200:
                            break
                    await asyncio.sleep(0.1)
                body = {"model": "support", "messages": [{"role": "user", "content": "hi"}]}
                answer = await client.post("/v1/chat/completions", json=body)
        pids = [int(line.split("pid ")[1].rstrip(")")) for line in lines if "pid " in line]
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "echo: hi"
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone: no orphan
    con = duckdb.connect(str(paths.database), read_only=True)
    (rows,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    assert rows == 1, "the gateway's attempt was spooled and ingested by the last cycle"


def test_switchover_up_stopped_by_sigterm_stops_every_process(tmp_path: Path):
    """A service manager stops with SIGTERM, not Ctrl-C: nothing may be left running."""
    config = tmp_path / "switchover.toml"
    config.write_text(
        '[providers.gpt]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[routes.support]\ntargets = ["gpt/gpt-4.1-mini"]\n'
    )
    port, board = _free_port(), _free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "up", "--no-demo", "-c", str(config),
         "--gateway-port", str(port), "--dashboard-port", str(board),
         "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    while len([line for line in lines if "(pid " in line]) < 3:
        line = up.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the gateway answers: everything is up
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                break
        time.sleep(0.2)
    up.send_signal(signal.SIGTERM)
    rest, _ = up.communicate(timeout=90)
    assert up.returncode == 0 and "stopped" in rest
    pids = [int(line.split("pid ")[1].split(")")[0]) for line in lines if "(pid " in line]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
