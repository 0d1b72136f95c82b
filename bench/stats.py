"""Percentiles, one comparison row of the chain table, and one telemetry figure against its
target. Pure: numbers in, numbers out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.runner import Samples


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolating between the two nearest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Summary:
    n: int
    p50_ms: float
    p99_ms: float
    throughput: float  # requests per second
    cpu_us: float  # client CPU per request
    connections_per_100: float  # TCP connections opened per 100 requests

    @classmethod
    def of(cls, samples: Samples, values_s: Sequence[float]) -> Summary:
        return cls(
            n=len(values_s),
            p50_ms=percentile(values_s, 50) * 1000,
            p99_ms=percentile(values_s, 99) * 1000,
            throughput=samples.throughput,
            cpu_us=samples.cpu_per_request_s * 1e6,
            connections_per_100=samples.connections_per_100,
        )


@dataclass(frozen=True)
class Row:
    """One line of the table: the baseline and the subject on the same measure."""

    case: str
    concurrency: int
    base: Summary
    subject: Summary
    note: str = ""

    @property
    def added_p50_ms(self) -> float:
        return self.subject.p50_ms - self.base.p50_ms

    @property
    def added_p99_ms(self) -> float:
        return self.subject.p99_ms - self.base.p99_ms

    @property
    def ratio_p50(self) -> float:
        return self.subject.p50_ms / self.base.p50_ms

    @property
    def ratio_p99(self) -> float:
        return self.subject.p99_ms / self.base.p99_ms

    @property
    def ratio_throughput(self) -> float:
        return self.subject.throughput / self.base.throughput

    @property
    def ratio_cpu(self) -> float:
        return self.subject.cpu_us / self.base.cpu_us


def row(
    case: str,
    base: Samples,
    subject: Samples,
    *,
    concurrency: int,
    ttft: bool = False,
    note: str = "",
) -> Row:
    """A row on latency, or on time to first text when `ttft`."""

    def values(s: Samples) -> list[float]:
        return s.ttft_s if ttft else s.latency_s

    return Row(
        case,
        concurrency,
        Summary.of(base, values(base)),
        Summary.of(subject, values(subject)),
        note,
    )


@dataclass(frozen=True)
class Figure:
    """One line of the telemetry table: a measured value and, when it has one, its target
    (`at_most` or `at_least`, in the value's unit). `level` 1 and 2 are the parts of the
    figure above them; `shown` is the value as the table prints it (default: value and unit)."""

    label: str
    value: float
    unit: str
    at_most: float | None = None
    at_least: float | None = None
    shown: str = ""
    level: int = 0
    note: str = ""  # beside the verdict

    @property
    def met(self) -> bool | None:
        if self.at_most is not None:
            return self.value <= self.at_most
        if self.at_least is not None:
            return self.value >= self.at_least
        return None
