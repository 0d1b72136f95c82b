"""`/metrics` of several uvicorn workers: prometheus-client's multiprocess files, one set per
worker in PROMETHEUS_MULTIPROC_DIR, summed (or maxed) at each scrape by whichever worker
answers it."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

_HEADER_BYTES = 8  # a multiprocess file's used-bytes count and its padding


def render_workers(folder: str) -> bytes:
    """Every worker's metrics in the text format."""
    registry = CollectorRegistry()
    registry.register(_WrittenFiles(folder))
    return generate_latest(registry)


class _WrittenFiles(MultiProcessCollector):
    """The workers' files that have their header. A worker creates its file empty and sizes
    it an instant later; prometheus-client fails the whole scrape on such a file, so one
    worker starting (or making its first metric of a kind) turned `/metrics` into a 500 for
    every other worker's scrape. Until the header is there the file holds no values."""

    def __init__(self, path: str) -> None:
        super().__init__(None, path=path)  # registered by the caller

    def collect(self) -> Iterable[Metric]:
        files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if _has_header(f)]
        return self.merge(files, accumulate=True)


def _has_header(path: str) -> bool:
    try:
        return os.stat(path).st_size >= _HEADER_BYTES
    except FileNotFoundError:  # a live gauge's file, removed as its worker exited
        return False
