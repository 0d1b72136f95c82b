"""`switchover up` and its supervisor: the gateway and the scheduler as processes, answering,
recording; a child that dies ends everything with its status; one signal stops everything, in
order, and nothing is left running.

The supervisor's own tests run real child processes (small Python scripts); the `up` tests run
the real command. Waits are on observable events (a file, a port, an exit) with deadlines.
"""

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

from engine.cli.supervisor import Stop, Supervisor, exit_status, start_stack
from engine.core.paths import DataPaths
from simulations.fakes import FakeProviders

DEADLINE_S = 60  # for anything a loaded 2-core machine does in a few seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _gone(pid: int) -> bool:
    """No process left in the child's process group (the child and whatever it started)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen in {DEADLINE_S} s"
        await asyncio.sleep(0.05)


def _ready_then(tmp_path: Path, name: str, then: str) -> list[str]:
    """A child that, once its SIGTERM handling is set up, leaves a file `<name>.ready`, then
    sleeps; `then` is its SIGTERM handling (Python statements)."""
    ready = tmp_path / f"{name}.ready"
    return _python(
        "import pathlib, signal, sys, time\n"
        f"{then}\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(600)\n"
    )


# --- the supervisor --------------------------------------------------------------------------


async def test_a_child_that_exits_ends_the_run_with_its_status_and_stops_the_others(tmp_path):
    lines: list[str] = []
    async with Supervisor(lines.append, tmp_path / "logs") as sup:
        sleeper = await sup.start("sleeper", _python("import time; time.sleep(600)"))
        await sup.start(
            "broken",
            _python("import sys; print('no such route: nope', file=sys.stderr); sys.exit(3)"),
        )
        assert await asyncio.wait_for(sup.run(), DEADLINE_S) == 3
    assert sleeper.process.returncode is not None and _gone(sleeper.process.pid)
    assert "broken exited with status 3; stopping the others" in lines
    assert "  broken: no such route: nope" in lines, "the end of its log is said"


async def test_a_child_that_is_not_essential_is_only_reported(tmp_path):
    lines: list[str] = []
    stop = Stop()
    async with Supervisor(lines.append, tmp_path / "logs", stop) as sup:
        await sup.start("history", _python("pass"), essential=False)
        running = asyncio.create_task(sup.run())
        await _until(lambda: "history finished" in lines, "the one-off child's end")
        assert not running.done()
        stop()
        assert await asyncio.wait_for(running, DEADLINE_S) == 0


async def test_work_beside_the_children_is_cancelled_before_they_stop(tmp_path):
    """At a stop nothing new is sent: the work (the demo's traffic) ends first."""
    stop = Stop()
    seen: list[str] = []

    async def traffic() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            alive = sup.children[0].process.returncode is None
            seen.append("traffic cancelled while the child ran" if alive else "too late")

    async with Supervisor(lambda _: None, tmp_path / "logs", stop) as sup:
        await sup.start("child", _python("import time; time.sleep(600)"))
        asyncio.get_running_loop().call_soon(stop)
        assert await asyncio.wait_for(sup.run(traffic()), DEADLINE_S) == 0
    assert seen == ["traffic cancelled while the child ran"]


async def test_children_stop_in_reverse_order_of_start(tmp_path):
    order = tmp_path / "order"
    stop = Stop()
    async with Supervisor(lambda _: None, tmp_path / "logs", stop) as sup:
        for name in ("scheduler", "gateway", "dashboard"):
            on_term = (
                "def bye(*_):\n"
                f"    open({str(order)!r}, 'a').write({name!r} + '\\n'); sys.exit(0)\n"
                "signal.signal(signal.SIGTERM, bye)"
            )
            await sup.start(name, _ready_then(tmp_path, name, on_term))
        await _until(lambda: len(list(tmp_path.glob("*.ready"))) == 3, "three ready children")
        stop()
        assert await asyncio.wait_for(sup.run(), DEADLINE_S) == 0
    assert order.read_text().split() == ["dashboard", "gateway", "scheduler"]


async def test_a_second_stop_kills_a_child_that_ignores_the_first(tmp_path):
    stop = Stop()
    sup = Supervisor(lambda _: None, tmp_path / "logs", stop, grace_s=600)
    stubborn = await sup.start(
        "stubborn",
        _ready_then(tmp_path, "stubborn", "signal.signal(signal.SIGTERM, signal.SIG_IGN)"),
    )
    await _until((tmp_path / "stubborn.ready").exists, "the child's readiness")
    stop()
    stopping = asyncio.create_task(sup.stop())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not stopping.done(), "the first stop waits for the grace period"
    stop()
    await asyncio.wait_for(stopping, DEADLINE_S)
    assert stubborn.process.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("returncode", "status"), [(3, 3), (-9, 137), (-15, 143), (0, 1)])
def test_up_exits_with_the_childs_status_as_a_shell_reports_it(returncode, status):
    """128 + N for a child killed by signal N; a child that exited 0 by itself still failed."""
    assert exit_status(returncode) == status


async def test_the_stack_serves_records_and_stops_cleanly(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SUPERVISOR_TEST_KEY", "k")
    paths = DataPaths(tmp_path / "data")
    async with FakeProviders(port=0) as fake:
        config = tmp_path / "switchover.toml"
        config.write_text(
            f'[providers.gpt]\nkind = "openai"\nbase_url = "{fake.openai_url}"\n'
            'api_key_env = "SUPERVISOR_TEST_KEY"\n'
            '[routes.support]\ntargets = ["gpt/gpt-4.1-mini"]\n'
        )
        port = _free_port()
        async with Supervisor(lambda _: None, paths.logs) as sup:
            await start_stack(sup, config, paths, gateway_port=port)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                await _until_ready(client)
                body = {"model": "support", "messages": [{"role": "user", "content": "hi"}]}
                answer = await client.post("/v1/chat/completions", json=body)
        pids = [child.process.pid for child in sup.children]
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "echo: hi"
    assert len(pids) == 2 and all(_gone(pid) for pid in pids), "no orphan"
    con = duckdb.connect(str(paths.database), read_only=True)
    (rows,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    assert rows == 1, "the gateway's attempt was spooled and ingested by the last cycle"
    assert (paths.logs / "gateway.log").read_text(), "the children's output is in their logs"


async def _until_ready(client: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/readyz")).status_code == 200:
                return
        assert time.monotonic() < deadline, "the gateway did not start"
        await asyncio.sleep(0.1)


# --- `switchover up` -------------------------------------------------------------------------


def _up(tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, int], int, list[str]]:
    """`switchover up --no-demo` with a gateway and a dashboard, once every child started
    and the gateway answers: the process, the children's pids by name, the gateway's port and
    the lines said so far."""
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
    pids = {
        line.split(" started")[0]: int(line.split("pid ")[1].split(")")[0])
        for line in lines
        if "(pid " in line
    }
    deadline = time.monotonic() + DEADLINE_S
    while True:  # the gateway answers: everything is up
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                break
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.2)
    return up, pids, port, lines


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_one_signal_stops_switchover_up_and_every_process(tmp_path: Path, signum):
    """Ctrl-C (SIGINT) or a service manager (SIGTERM), once: nothing may be left running."""
    up, pids, port, _ = _up(tmp_path)
    up.send_signal(signum)
    rest, _ = up.communicate(timeout=DEADLINE_S + 30)
    assert up.returncode == 0 and "stopped" in rest
    assert set(pids) == {"scheduler", "gateway", "dashboard"}
    assert all(_gone(pid) for pid in pids.values()), "no child, nor anything it started, is left"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)


def test_switchover_up_exits_with_the_status_of_a_child_that_died(tmp_path: Path):
    up, pids, _, _ = _up(tmp_path)
    os.kill(pids["gateway"], signal.SIGKILL)
    rest, _ = up.communicate(timeout=DEADLINE_S + 30)
    assert up.returncode == 128 + signal.SIGKILL
    assert "gateway exited with status -9; stopping the others" in rest
    assert all(_gone(pid) for pid in pids.values())


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_children_stop_when_the_supervisor_itself_is_killed(tmp_path: Path):
    """SIGKILL reaches no handler of `up`'s: the kernel's parent-death signal stops its
    children anyway, so none is left holding a port or the database."""
    child_pid = tmp_path / "child.pid"
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from engine.cli.supervisor import Supervisor\n"
        "async def main():\n"
        f"    sup = Supervisor(print, Path({str(tmp_path / 'logs')!r}))\n"
        "    child = await sup.start('sleeper', [sys.executable, '-c', 'import time; "
        "time.sleep(600)'])\n"
        f"    Path({str(child_pid)!r}).write_text(str(child.process.pid))\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    up = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not child_pid.exists() or not child_pid.read_text():
            assert time.monotonic() < deadline and up.poll() is None, "the child never started"
            time.sleep(0.05)
        pid = int(child_pid.read_text())
        assert not _gone(pid)
        up.kill()
        up.wait(timeout=DEADLINE_S)
        while not _gone(pid):
            assert time.monotonic() < deadline, f"child {pid} outlived its killed supervisor"
            time.sleep(0.05)
    finally:
        up.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child_pid.read_text()), signal.SIGKILL)
