"""`/metrics` with several workers: prometheus-client's multiprocess files, read at a scrape
while other workers are still creating theirs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.gateway.observability import MULTIPROC_ENV, Metrics

# A worker that has started: its metrics set, as the gateway does on start.
WORKER = """
from engine.gateway.observability import Metrics
metrics = Metrics()
metrics.store_shared.set(1)
metrics.request_done(route="support", dialect="openai", outcome="ok", seconds=0.2, stream=False)
"""


@pytest.fixture
def workers_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {MULTIPROC_ENV: str(folder)}
    subprocess.run([sys.executable, "-c", WORKER], env=env, check=True, cwd=Path.cwd())
    monkeypatch.setenv(MULTIPROC_ENV, str(folder))
    return folder


def test_a_scrape_while_another_worker_creates_its_files_reads_the_others(workers_dir: Path):
    """A worker's file exists empty between its creation and its first write (CI saw a 500 from
    `/metrics` on the first scrapes of four workers). The scrape reads every other worker."""
    for kind in ("counter", "histogram", "gauge_livemin"):
        (workers_dir / f"{kind}_424242.db").touch()

    metrics = Metrics().render().decode()

    assert "switchover_breaker_store_shared 1.0" in metrics
    served = 'switchover_gateway_requests_total{dialect="openai",outcome="ok",route="support"}'
    assert f"{served} 1.0" in metrics
