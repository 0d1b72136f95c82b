"""The telemetry part of `make bench`: what recording, ingest, the scheduler's cycle as the day's
traffic grows (1 to 20 M attempts a day over a 100 M-attempt store) and the Live page's reads
cost, each figure against its target.

Runs bench.recorder, bench.store and bench.scheduler one after the other (side by side they
would share the two cores) and picks from their results the figures of the table, the way
`cases` makes up the chain's; `report` renders them. Never asserts a time: a missed target is
reported as missed.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import browser, recorder, scheduler, store
from bench.stats import Figure, percentile
from bench.timing import describe
from engine.published.partitions import FANOUT
from engine.scheduler import pipeline as scheduler_module

HOOK_TARGET_US = 20.0
CYCLE_TARGET_MS = 1000.0
RENDER_FIRST_S, RENDER_REFRESH_S = 1.5, 0.5  # the dashboard issue's targets
REPORT_TARGET_S = 10.0  # the weekly report's, over 10 M attempts
READ_TARGET_MS = 100.0
GROWTH_TARGET = 2.0  # the cycle at the largest daily volume against the smallest, at most
MEMORY_TARGET_GB = 2.0  # building and backfilling the store


@dataclass(frozen=True)
class Sizes:
    recorder: recorder.Sizes = field(default_factory=recorder.Sizes)
    store: store.Sizes = field(default_factory=store.Sizes)
    scheduler: scheduler.Sizes = field(default_factory=scheduler.Sizes)


QUICK = Sizes(recorder.QUICK, store.QUICK, scheduler.QUICK)


@dataclass
class Telemetry:
    sizes: Sizes
    figures: list[Figure]
    cycle: scheduler.Result  # the cycles at each daily volume
    seconds: dict[str, float]  # how long each bench ran
    others: dict[str, float | None]  # the share of the CPUs other processes used meanwhile


def run(sizes: Sizes = Sizes(), progress: Callable[[str], None] | None = None) -> Telemetry:
    began = time.monotonic()
    say = progress or _progress(began)
    seconds: dict[str, float] = {}
    others: dict[str, float | None] = {}

    def timed(name: str, measure: Callable[[], Any]) -> Any:
        say(f"telemetry: {name}")
        started, before = time.monotonic(), _cpu_use()
        result = measure()
        seconds[name] = time.monotonic() - started
        others[name] = _others_share(before, _cpu_use(), seconds[name])
        return result

    rows = timed("recorder", lambda: recorder.run(sizes.recorder))
    store_figures = timed("store", lambda: store.run(sizes.store))
    cycle = timed(
        f"scheduler cycles over {_millions(sizes.scheduler.stored)} stored",
        lambda: scheduler.run(sizes.scheduler, say),
    )
    figures = [*recorder_figures(rows), *store_figures, *cycle_figures(cycle)]
    return Telemetry(sizes, figures, cycle, seconds, others)


def _millions(n: int) -> str:
    return f"{n / 1e6:g} M" if n >= 1e6 else f"{n:,}"


def _cpu_use() -> tuple[float, float] | None:
    """(CPU seconds the whole machine has been busy, CPU seconds of this process), or None
    without Linux's /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return busy, own.user + own.system + own.children_user + own.children_system


def _others_share(
    before: tuple[float, float] | None, after: tuple[float, float] | None, seconds: float
) -> float | None:
    """The share of all CPUs that other processes kept busy: a noisy neighbour shows here."""
    if before is None or after is None or seconds <= 0:
        return None
    others = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, others / (seconds * (os.cpu_count() or 1)))  # of the machine's CPUs


def _cpus() -> int:
    """The CPUs this process may run on (fewer than the machine's when pinned)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _progress(began: float) -> Callable[[str], None]:
    def say(what: str) -> None:
        print(f"[{time.monotonic() - began:6.1f} s] {what}", file=sys.stderr, flush=True)

    return say


# --- the figures ---------------------------------------------------------------------------


def recorder_figures(rows: list[dict[str, Any]]) -> list[Figure]:
    by_case = {r["case"]: r for r in rows}

    def hook(case: str, label: str, level: int) -> Figure:
        r = by_case[case]
        shown = f"{r['p99_us']:,.2f} µs (p50 {r['p50_us']:,.2f}, p99.9 {r['p999_us']:,.1f})"
        return Figure(label, r["p99_us"], "µs", at_most=HOOK_TARGET_US, shown=shown, level=level)

    def flush(r: dict[str, Any], label: str, level: int) -> Figure:
        shown = f"{r['p99_us'] / 1000:,.1f} ms (p50 {r['p50_us'] / 1000:,.1f})"
        return Figure(label, r["p99_us"] / 1000, "ms", shown=shown, level=level)

    timer = by_case["perf_counter_ns pair (timer cost)"]
    figures = [
        hook("enqueue, flusher writing", "recorder hook (enqueue) p99, flusher writing", 0),
        hook("enqueue, flusher idle", "flusher idle, back to back", 1),
        Figure(
            "of which the timer itself (a perf_counter_ns pair)",
            timer["p99_us"],
            "µs",
            shown=f"{timer['p99_us']:,.2f} µs",
            level=1,
        ),
    ]
    flushes = [r for r in rows if r["case"].startswith("flush")]
    headline = next((r for r in flushes if r["case"].endswith("fsync on, pricing on")), None)
    headline = headline or flushes[0]
    setting = headline["case"].removeprefix("flush 1,000: ")
    figures.append(flush(headline, f"spool flush of 1,000 attempts p99 ({setting})", 0))
    for r in flushes:
        if r is not headline:
            figures.append(flush(r, r["case"].removeprefix("flush 1,000: "), 1))
    for r in rows:
        if r["case"].startswith("stage: "):
            figures.append(flush(r, f"{r['case']} (in memory)", 1))
    return figures


def cycle_figures(result: scheduler.Result) -> list[Figure]:
    """The cycle at each daily volume, how it grew, the parts of the largest, the store's build
    and its memory."""
    sizes, stages = result.sizes, result.stages
    medians = []
    figures = []
    for stage in stages:
        totals = [c.seconds * 1000 for c in stage.cycles]
        median, worst = statistics.median(totals), max(totals)
        medians.append(median)
        over = sum(t > CYCLE_TARGET_MS for t in totals)
        note = f"{over} of {len(totals)} cycles over" if over else ""
        if len(totals) < sizes.cycles:
            note += f"{'; ' if note else ''}{sizes.cycles_budget_s:g} s of cycles ran out"
        figures.append(Figure(
            f"scheduler cycle: {_millions(stage.daily)} attempts in the last 24 h, "
            f"{_millions(stage.stored)} stored, {stage.new_rows:,} new a cycle",
            median, "ms", at_most=CYCLE_TARGET_MS,
            shown=f"{median:,.0f} ms median, {worst:,.0f} max ({len(totals)} cycles)", note=note,
        ))  # fmt: skip
        figures.append(Figure(
            f"the first cycle on an empty published folder ({stage.recent_rows:,} rows as one "
            "part, once)", stage.first_cycle_s, "s", level=1,
        ))  # fmt: skip
    growth = medians[-1] / medians[0] if medians and medians[0] else float("nan")
    figures.append(Figure(
        f"cycle growth, {_millions(stages[-1].daily)} against {_millions(stages[0].daily)} a day",
        growth, "×", at_most=GROWTH_TARGET, shown=f"{growth:,.2f}×",
    ))  # fmt: skip

    for rows, seconds in stages[-1].bursts.items():
        figures.append(Figure(
            f"a cycle after {rows:,} new attempts at {_millions(stages[-1].daily)} a day",
            seconds, "s", at_most=scheduler_module.CYCLE_S,
            shown=f"{seconds:,.2f} s: {rows / seconds:,.0f} attempts/s ingested and published",
        ))  # fmt: skip

    def med(values: list[float]) -> float:
        return statistics.median(values) * 1000

    cycles = result.cycles
    figures.append(Figure(f"the cycle at {_millions(stages[-1].daily)} a day, by part", medians[-1],
                          "ms", shown=f"{medians[-1]:,.0f} ms"))  # fmt: skip
    for part in cycles[0].parts:
        figures.append(Figure(part, med([c.parts.get(part, 0.0) for c in cycles]), "ms", level=1))
        if part != "publish":
            continue
        for name in cycles[0].snapshots:
            values = [c.snapshots.get(name, 0.0) for c in cycles]
            label = name
            if name == "recent_attempts":
                label = f"recent_attempts (the new part; {stages[-1].parts} parts in all)"
            figures.append(Figure(label, med(values), "ms", level=2))
    daily_merge_s = stages[-1].daily * (len(FANOUT)) / result.merge_rows_s
    figures.append(Figure(
        "compaction: merging the largest tier (off the cycle, its own thread)",
        result.merge_rows_s, "rows/s",
        shown=f"{result.merge_rows_s:,.0f} rows/s: {daily_merge_s / 60:,.1f} min of one core a "
        f"day at {_millions(stages[-1].daily)} (each row merged {len(FANOUT)} times)",
    ))  # fmt: skip

    build = result.build
    rate = sizes.stored / build["generate and ingest"]
    figures.append(Figure("store build for the cycles (once)", sum(build.values()), "s"))
    for name, seconds in build.items():
        shown = f"{seconds:,.1f} s" + (f", {rate:,.0f} rows/s" if "ingest" in name else "")
        figures.append(Figure(name, seconds, "s", shown=shown, level=1))
    backfill = max(mb for step, mb in result.peak_rss_mb.items() if "backfill" in step) / 1e3
    figures.append(Figure(
        f"peak memory backfilling the rollups of {_millions(sizes.stored)} attempts", backfill,
        "GB", at_most=MEMORY_TARGET_GB,
        shown=f"{backfill:,.2f} GB (the process's peak RSS in those steps)",
    ))  # fmt: skip
    for step, mb in result.peak_rss_mb.items():
        if "backfill" not in step:
            figures.append(Figure(f"peak memory: {step} (the bench's generator and DuckDB)",
                                  mb / 1e3, "GB", level=1))  # fmt: skip
    cycles_peak = max(stage.peak_rss_mb for stage in stages) / 1e3
    figures.append(Figure("peak memory filling a day and running its cycles", cycles_peak, "GB",
                          level=1))  # fmt: skip
    own = max(stage.cycles_peak_rss_mb for stage in stages) / 1e3
    figures.append(Figure(
        "peak memory of the scheduler's cycles (from the first cycle of a day on)", own, "GB",
        at_most=MEMORY_TARGET_GB, shown=f"{own:,.2f} GB (peak RSS; the generator's tables freed)",
    ))  # fmt: skip

    for label, values in result.reads.items():
        p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
        figures.append(
            Figure(
                f"Live page read: {label}, p95",
                p95,
                "ms",
                at_most=READ_TARGET_MS,
                shown=f"{p95:,.1f} ms (p50 {p50:,.1f})",
            )
        )
    if result.report_s is not None:
        figures.append(Figure("weekly report of last week, every format", result.report_s, "s",
                              at_most=REPORT_TARGET_S))  # fmt: skip
    if result.render is not None:
        for label, values, target in (
            ("Live page, first render (new session)", result.render.first_s, RENDER_FIRST_S),
            ("Live page, refresh (5 s rerun)", result.render.refresh_s, RENDER_REFRESH_S),
        ):
            worst = max(values)
            figures.append(Figure(label, worst, "s", at_most=target,
                                  shown=f"{worst:,.2f} s (worst of {len(values)})"))  # fmt: skip
    return figures + browser_figures(result.browser or [], _millions(stages[-1].daily))


# In Chromium at the largest daily volume: navigation to the figures visible, Live's refresh,
# Explorer's lookup by id (issue 36's targets).
BROWSER_TARGETS_S = {"live": 1.5, "live refresh": 0.5, "explorer lookup": 0.5}
PAGE_TARGET_S = 1.0


def browser_figures(timings: list[browser.Timing], daily: str) -> list[Figure]:
    figures = []
    for t in timings:
        what = t.what if " " in t.what else f"{t.what}: navigation to its figures visible"
        figures.append(Figure(
            f"in Chromium at {daily} a day, {what}", t.median, "s",
            at_most=BROWSER_TARGETS_S.get(t.what, PAGE_TARGET_S),
            shown=f"{t.median:,.2f} s median, {t.worst:,.2f} worst of {len(t.seconds)}",
        ))  # fmt: skip
    return figures


def slowest_statements(result: scheduler.Result, top: int = 5) -> list[tuple[str, float, float]]:
    """The SQL statements the cycles spent most on: (statement, median ms, max ms)."""
    seen: dict[str, list[float]] = {}
    for cycle in result.cycles:
        for sql, seconds in cycle.statements.items():
            seen.setdefault(sql, []).append(seconds * 1000)
    ranked = sorted(seen.items(), key=lambda kv: -statistics.median(kv[1]))[:top]
    return [(sql, statistics.median(ms), max(ms)) for sql, ms in ranked]


def notes(t: Telemetry) -> list[str]:
    """The bullets above the table: what was measured on, and where the cycle's time goes."""
    s, r = t.sizes, t.cycle
    ran = ", ".join(
        f"{name} {seconds:.0f} s"
        + (f" ({share:.0%})" if (share := t.others.get(name)) is not None else "")
        for name, seconds in t.seconds.items()
    )
    volumes = ", ".join(_millions(d) for d in r.sizes.daily)
    lines = [
        f"Sizes: {s.recorder.calls:,} hook calls per enqueue row, {s.recorder.repeats} flushes "
        f"per flush row; ingest shapes repeated "
        + ", ".join(f"{n}×" for _, _, n in s.store.shapes)
        + f"; the cycles' store {r.sizes.stored:,} attempts over the {r.sizes.history.days} "
        f"days before the last 24 hours, then a day of {volumes} attempts in turn, each in "
        f"time order (the days before it stay stored); three routes with a priced primary and "
        "backup each, "
        f"{scheduler.FAILED_PRIMARY:.0%} of attempts failing with a 529 and the next attempt "
        "serving that request from its route's backup (DuckDB file "
        f"{r.database_mb:,.0f} MB before the last day, in a temporary directory deleted at the "
        f"end); {r.sizes.cycles} cycles a volume, 5 s apart on the scheduler's clock, each after "
        "the attempts the day's rate brings in 5 s (a minute of cycles: the once-a-minute "
        f"incident pass runs in one of them); {r.sizes.reads} runs per Live-page read",
        f"Ran on {_cpus()} CPUs (in brackets: the share of them other processes used "
        f"meanwhile): {ran}",
        growth(r),
        f"The SQL statements of the {_millions(r.stages[-1].daily)}-a-day cycles that took "
        "longest (median / max over the cycles, each statement's runs in a cycle added up):",
    ]
    for sql, median, worst in slowest_statements(r):
        lines.append(f"  - {median:,.0f} / {worst:,.0f} ms: `{describe(sql)}`")
    return lines


def _median_ms(cycles: list[scheduler.Cycle]) -> float:
    return statistics.median(c.seconds for c in cycles) * 1000


def growth(r: scheduler.Result) -> str:
    """The cycle against the day's traffic, in one line."""
    steps = "; ".join(
        f"{_millions(st.daily)} a day: {_median_ms(st.cycles):,.0f} ms" for st in r.stages
    )
    return (
        "Growth: a cycle publishes only the attempts it ingested (one new part), so what it costs "
        f"follows the new attempts and the minutes they touch, not the day: {steps}"
    )
