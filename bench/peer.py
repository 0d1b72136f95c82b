"""LiteLLM's Router as the peer baseline: what it adds on top of a bare httpx call, against what
the chain adds, on the same fake provider in the same run.

`measure` runs `bench.litellm_side` in the bench-only virtual environment (bench/.venv-litellm,
built by `make bench-venv`; LiteLLM is never a dependency of Switchover) as a subprocess, which
inherits the client's CPU, so both sides run where the chain's cases ran. Each side's added time
is measured against its own baseline, the same `bench.wire.Direct`, in its own process: the
comparison is of the two added overheads, as a ratio (Switchover's / LiteLLM's), never of
absolute times across processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass

from bench.fake_process import REPO
from bench.runner import Samples
from bench.stats import Row, row

VENV = REPO / "bench" / ".venv-litellm"
TARGET_RATIO = 0.1  # Switchover's added overhead at most a tenth of LiteLLM Router's
# Nothing may leave the machine: LiteLLM reads the price map it ships and fetches nothing.
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
CASES = {"answer": "answer", "stream": "stream, first text"}
# Both products default to aiohttp under httpx, the baseline is on httpx's own transport: the rows
# with this suffix put the product on httpx's own as well (LiteLLM: DISABLE_AIOHTTP_TRANSPORT).
SAME_TRANSPORT = ", both on httpx's transport"


class PeerMissing(RuntimeError):
    """The bench-only virtual environment with LiteLLM is not there."""


@dataclass(frozen=True)
class Peer:
    version: str
    sizes: Sizes
    rows: list[Row]  # the Router against its baseline, labelled like the chain's openai rows


@dataclass(frozen=True)
class Sizes:
    """Per side, like `bench.cases.Sizes`, smaller: a LiteLLM stream costs ~20 ms of CPU.
    `bench.litellm_side` reads these (this module imports nothing it lacks)."""

    warmup: int = 50
    sequential: int = 400
    concurrency: int = 32
    burst_warmup: int = 100
    burst: int = 200
    rounds: int = 4


QUICK = Sizes(warmup=10, sequential=60, burst_warmup=32, burst=64, rounds=2)


def measure(url: str, sizes: Sizes = Sizes(), timeout_s: float = 600.0) -> Peer:
    """As shipped (both sizes), then on httpx's own transport one at a time."""
    shipped = _run(url, sizes, timeout_s, same_transport=False)
    same = _run(url, sizes, timeout_s, same_transport=True)
    return Peer(shipped.version, sizes, shipped.rows + same.rows)


def _run(url: str, sizes: Sizes, timeout_s: float, *, same_transport: bool) -> Peer:
    python = VENV / "bin" / "python"
    if not python.exists():
        raise PeerMissing(f"{python} is missing: `make bench-venv` installs LiteLLM there")
    command = [str(python), "-m", "bench.litellm_side", url]
    command += ["--sizes", json.dumps(dataclasses.asdict(sizes))]
    env = {**os.environ, **OFFLINE}
    if same_transport:
        command.append("--one-at-a-time")
        env["DISABLE_AIOHTTP_TRANSPORT"] = "True"
    done = subprocess.run(
        command,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the LiteLLM side failed:\n{done.stderr[-3000:]}")
    measured = json.loads(done.stdout)
    rows = []
    for phase in measured["phases"]:
        base, subject = _samples(phase["base"]), _samples(phase["subject"])
        stream = phase["mode"] == "stream"
        label = f"openai {CASES[phase['mode']]}" + (SAME_TRANSPORT if same_transport else "")
        rows.append(row(label, base, subject, concurrency=phase["concurrency"], ttft=stream))
    return Peer(measured["litellm"], sizes, rows)


def _samples(fields: dict) -> Samples:
    known = {f.name for f in dataclasses.fields(Samples)}
    return Samples(**{k: v for k, v in fields.items() if k in known})


@dataclass(frozen=True)
class Comparison:
    """One case: what each side adds on top of its own httpx baseline."""

    case: str
    concurrency: int
    litellm: Row
    switchover: Row

    def ratio(self, p: int) -> float:
        """Switchover's added time over LiteLLM's, at the p50 or p99."""
        ours = self.switchover.added_p50_ms if p == 50 else self.switchover.added_p99_ms
        theirs = self.litellm.added_p50_ms if p == 50 else self.litellm.added_p99_ms
        return ours / theirs if theirs > 0 else float("inf")

    @property
    def met(self) -> bool:
        return all(self.ratio(p) <= TARGET_RATIO for p in (50, 99))

    @property
    def cpu_ratio(self) -> float:
        """Switchover's added client CPU per request over LiteLLM's."""
        ours = self.switchover.subject.cpu_us - self.switchover.base.cpu_us
        theirs = self.litellm.subject.cpu_us - self.litellm.base.cpu_us
        return ours / theirs if theirs > 0 else float("inf")


def compare(peer: Peer, chain_rows: list[Row]) -> list[Comparison]:
    """Each of the peer's rows beside the chain's row of the same case and concurrency."""
    ours = {(r.case, r.concurrency): r for r in chain_rows}
    pairs = []
    for theirs in peer.rows:
        match = ours.get((theirs.case, theirs.concurrency))
        if match is None:
            print(f"no chain row for {theirs.case} at {theirs.concurrency}", file=sys.stderr)
            continue
        case = theirs.case.removeprefix("openai ").replace(SAME_TRANSPORT, ", same transport")
        pairs.append(Comparison(case, theirs.concurrency, theirs, match))
    return pairs
