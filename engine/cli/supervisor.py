"""`switchover up`: the product's processes on one machine, started together, stopped together.

The scheduler (the only owner of the database), the gateway and the dashboard run as child
processes, as in production. Each child gets a process group of its own, so that Ctrl-C in a
terminal reaches `up` alone and `up` decides the order, and writes its output to
`data/logs/<name>.log`, so that the console says only what `up` itself has to say.

The supervisor watches its children. When one it depends on exits, it says so (with the end of
that child's log), stops the others, and `up` exits with the child's status. Stopping is, in
reverse order of start, SIGTERM to the child (the gateway before the scheduler: its workers
flush their spool, the scheduler's last cycle then ingests it), a grace period for it to exit,
then SIGKILL to whatever is left of the child's group: no orphans.

The first SIGINT or SIGTERM starts the stop: the work running beside the children (the demo's
traffic) is cancelled first, so nothing new is sent, then the children are stopped. A second
signal kills what is left at once; it is never needed. If `up` itself is killed (SIGKILL, the
OOM killer), the kernel sends each child SIGTERM (Linux's parent-death signal), and they stop
as they do at a Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.paths import DataPaths

Say = Callable[[str], None]
GRACE_S = 30.0  # a stopping child gets this long before it is killed (the gateway needs 30 s)
LOG_TAIL_LINES = 12  # of a child's log, said when it exits unexpectedly


def switchover(*args: str) -> list[str]:
    """The command line of `switchover <args>` in this interpreter."""
    return [sys.executable, "-m", "engine.cli", *args]


def exit_status(returncode: int) -> int:
    """What `up` exits with when a child ended: its status, 128 + N for a child killed by
    signal N (the shell's convention), and 1 for one that exited 0 although it should have
    run on (that is still a failure to report)."""
    if returncode < 0:
        return 128 - returncode
    return returncode or 1


class Stop:
    """A request to stop: the first call (a signal, or a caller) starts the stop, a second
    asks to hurry (children killed without their grace period)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.hurry = asyncio.Event()

    def __call__(self) -> None:
        (self.hurry if self.requested.is_set() else self.requested).set()

    @contextlib.contextmanager
    def on_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM call this stop while the block runs (on the running loop)."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for signum in signals:
            loop.add_signal_handler(signum, self)
        try:
            yield
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)


@dataclass
class Child:
    name: str
    process: asyncio.subprocess.Process
    log: Path
    essential: bool  # its exit stops everything; else (a one-off job) it is only reported
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(parent: int) -> Callable[[], None]:
    """Run in the child between fork and exec: the kernel sends it SIGTERM when `up` dies,
    even by SIGKILL (which no handler of ours sees), so that no orphan keeps its port or the
    database. A parent already gone before the call: exit at once."""

    def arrange() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return arrange


class Supervisor:
    """Children started in order and stopped in reverse when the block ends; `run` returns
    when `stop` is requested or an essential child exits."""

    def __init__(
        self, say: Say, logs: Path, stop: Stop | None = None, *, grace_s: float = GRACE_S
    ) -> None:
        self.say = say
        self.logs = logs
        self.stop_request = stop or Stop()
        self.grace_s = grace_s
        self.children: list[Child] = []
        self.ended: Child | None = None  # the essential child whose exit ended the run
        self._ended = asyncio.Event()
        self._stopping = False

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(
        self,
        name: str,
        command: list[str],
        *,
        essential: bool = True,
        env: dict[str, str] | None = None,
    ) -> Child:
        """`env`: variables the child gets beside this process's own."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name.replace(' ', '-')}.log"
        with log.open("ab") as output:  # the child keeps a descriptor of its own
            process = await asyncio.create_subprocess_exec(
                *command,
                env={**os.environ, **env} if env else None,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                process_group=0,
                preexec_fn=_die_with(os.getpid()) if sys.platform == "linux" else None,
            )
        child = Child(name, process, log, essential)
        child.watcher = asyncio.create_task(self._watch(child))
        if not self.children:
            self.say(f"the processes' output goes to {self.logs}/")
        self.children.append(child)
        self.say(f"{name} started (pid {process.pid})")
        return child

    async def run(self, *work: Awaitable[None]) -> int:
        """Run `work` beside the children until a stop is requested or an essential child
        exits; cancel the work (an error in it is raised here) and return what `up` exits
        with: 0 after a stop, else the child's status (`exit_status`)."""
        tasks = [asyncio.ensure_future(w) for w in work]
        ending = [
            asyncio.ensure_future(self.stop_request.requested.wait()),
            asyncio.ensure_future(self._ended.wait()),
        ]
        try:
            pending = {*tasks, *ending}
            while not any(e.done() for e in ending):
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done.intersection(tasks):
                    task.result()  # a failed work ends the run with its error
        finally:
            for task in (*tasks, *ending):
                task.cancel()
            await asyncio.gather(*tasks, *ending, return_exceptions=True)
        if self.ended is None:
            self.say("stopping (a second Ctrl-C kills what is left at once)")
            return 0
        return exit_status(self.ended.process.returncode or 0)

    async def stop(self) -> None:
        """Every child still running, in reverse order of start; each gets `grace_s` (none
        once a second stop was requested), then its group is killed."""
        self._stopping = True
        for child in reversed(self.children):
            await self._stop_child(child, self.stop_request.hurry)
        for child in self.children:
            if child.watcher is not None:
                child.watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await child.watcher

    async def _stop_child(self, child: Child, hurry: asyncio.Event) -> None:
        process = child.process
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            exited = asyncio.ensure_future(process.wait())
            hurried = asyncio.ensure_future(hurry.wait())
            await asyncio.wait(
                {exited, hurried}, timeout=self.grace_s, return_when=asyncio.FIRST_COMPLETED
            )
            hurried.cancel()
            if not exited.done():
                exited.cancel()
        # Whatever the child left in its group (uvicorn's workers, Streamlit's helpers).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()

    async def _watch(self, child: Child) -> None:
        returncode = await child.process.wait()
        if self._stopping:
            return
        if not child.essential:
            if returncode == 0:
                self.say(f"{child.name} finished")
            else:
                self.say(f"{child.name} failed with status {returncode}: see {child.log}")
            return
        if self.ended is not None:
            return  # the first exit is the one reported
        self.ended = child
        self.say(f"{child.name} exited with status {returncode}; stopping the others")
        for line in _tail(child.log, LOG_TAIL_LINES):
            self.say(f"  {child.name}: {line}")
        self._ended.set()


def _tail(path: Path, lines: int) -> list[str]:
    try:
        text = path.read_bytes()[-16_384:].decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


GATEWAY_URL_ENV = "SWITCHOVER_GATEWAY_URL"  # where the dashboard finds the gateway


async def start_stack(
    sup: Supervisor,
    config: Path,
    paths: DataPaths,
    *,
    gateway_port: int,
    dashboard_port: int | None = None,
    dashboard_host: str = "127.0.0.1",
) -> None:
    """The scheduler, the gateway and (given a port) the dashboard on `config` (its routes and
    [state] are where the dashboard's operator switches go)."""
    data = ["--data-dir", str(paths.root)]
    await sup.start("scheduler", switchover("scheduler", *data, "--config", str(config)))
    await sup.start(
        "gateway", switchover("serve", "-c", str(config), "--port", str(gateway_port), *data)
    )
    sup.say(f"gateway on http://127.0.0.1:{gateway_port}/v1 (OpenAI and Anthropic SDKs)")
    if dashboard_port is not None:
        board = ("--host", dashboard_host, "--port", str(dashboard_port), "--config", str(config))
        # The Live page reads the breakers from this gateway (dashboard.live_breakers).
        gateway = {GATEWAY_URL_ENV: f"http://127.0.0.1:{gateway_port}"}
        await sup.start("dashboard", switchover("dashboard", *board, *data), env=gateway)
        sup.say(f"dashboard on http://{dashboard_host}:{dashboard_port}")


async def run_stack(
    config: Path,
    paths: DataPaths,
    *,
    gateway_port: int,
    say: Say,
    dashboard_port: int | None,
    stop: Stop,
    dashboard_host: str = "127.0.0.1",
) -> int:
    """`switchover up` on a real configuration, until `stop` or a child's exit; its status."""
    async with Supervisor(say, paths.logs, stop) as sup:
        await start_stack(
            sup,
            config,
            paths,
            gateway_port=gateway_port,
            dashboard_port=dashboard_port,
            dashboard_host=dashboard_host,
        )
        return await sup.run()
