"""The telemetry part of `make bench`: what recording, ingest, one scheduler cycle over a
1 M- and a 10 M-attempt store and the Live page's reads cost, each figure against its target.

Runs bench.recorder, bench.store and bench.scheduler one after the other (side by side they
would share the two cores) and picks from their results the figures of the table, the way
`cases` makes up the chain's; `report` renders them. Never asserts a time: a missed target is
reported as missed.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import recorder, scheduler, store
from bench.stats import Figure, percentile
from bench.timing import describe

HOOK_TARGET_US = 20.0
CYCLE_TARGET_MS = 1000.0
RENDER_FIRST_S, RENDER_REFRESH_S = 1.5, 0.5  # the dashboard issue's targets
REPORT_TARGET_S = 10.0  # the weekly report's, over 10 M attempts
READ_TARGET_MS = 100.0


@dataclass(frozen=True)
class Sizes:
    recorder: recorder.Sizes = field(default_factory=recorder.Sizes)
    store: store.Sizes = field(default_factory=store.Sizes)
    scheduler: scheduler.Sizes = field(default_factory=scheduler.Sizes)
    # The cycle over a smaller store first (the same history, a tenth of the attempts): how the
    # cycle grows with the store. Its store is built on its own, so both are in time order.
    smaller_store: int = 1_000_000


QUICK = Sizes(recorder.QUICK, store.QUICK, scheduler.QUICK, smaller_store=20_000)


@dataclass
class Telemetry:
    sizes: Sizes
    figures: list[Figure]
    cycle: scheduler.Result
    smaller: scheduler.Result  # the cycle over `sizes.smaller_store` attempts
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
    smaller_sizes = dataclasses.replace(
        sizes.scheduler,
        stored=sizes.smaller_store,
        file_rows=min(sizes.smaller_store, sizes.scheduler.file_rows),
    )
    smaller = timed(
        f"scheduler cycle, {_millions(sizes.smaller_store)}",
        lambda: scheduler.run(smaller_sizes, say),
    )
    cycle = timed(
        f"scheduler cycle, {_millions(sizes.scheduler.stored)}",
        lambda: scheduler.run(sizes.scheduler, say),
    )
    figures = [
        *recorder_figures(rows),
        *store_figures,
        *cycle_figures(smaller, detail=False),
        *cycle_figures(cycle),
    ]
    return Telemetry(sizes, figures, cycle, smaller, seconds, others)


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


def cycle_figures(result: scheduler.Result, *, detail: bool = True) -> list[Figure]:
    """The cycle's figures; without `detail`, only the cycle, its parts and the store's build,
    not the snapshot taken apart nor the build's steps nor the Live page's reads."""
    sizes, cycles = result.sizes, result.cycles
    totals = [c.seconds * 1000 for c in cycles]
    median, worst = statistics.median(totals), max(totals)
    over = sum(t > CYCLE_TARGET_MS for t in totals)
    note = f"{over} of {len(cycles)} cycles over" if over else ""
    if len(cycles) < sizes.cycles:
        note += f"{'; ' if note else ''}{sizes.cycles_budget_s:g} s of cycles ran out"

    def med(values: list[float]) -> float:
        return statistics.median(values) * 1000

    figures = [
        Figure(
            f"scheduler cycle: {sizes.stored:,} attempts stored, {sizes.new_rows:,} new",
            median,
            "ms",
            at_most=CYCLE_TARGET_MS,
            shown=f"{median:,.0f} ms median, {worst:,.0f} max ({len(cycles)} cycles)",
            note=note,
        )
    ]
    for part in cycles[0].parts:
        figures.append(Figure(part, med([c.parts.get(part, 0.0) for c in cycles]), "ms", level=1))
        if part != "publish":
            continue
        for name in cycles[0].snapshots:
            values = [c.snapshots.get(name, 0.0) for c in cycles]
            if name != "recent_attempts":
                figures.append(Figure(name, med(values), "ms", level=2))
                continue
            label = f"recent_attempts ({result.recent_rows:,} rows, 24 h)"
            figures.append(Figure(label, med(values), "ms", level=2))
            if not detail:
                continue
            for what, seconds in result.recent_anatomy.items():
                figures.append(Figure(f"{what}, best of 3", seconds * 1000, "ms", level=3))

    build = result.build
    rate = sizes.stored / build["ingest"]
    figures.append(Figure("store build for the cycle (once)", sum(build.values()), "s"))
    if not detail:
        return figures
    for name, seconds in build.items():
        shown = f"{seconds:,.1f} s" + (f", {rate:,.0f} rows/s" if name == "ingest" else "")
        shown += f" (peak RSS so far {result.peak_rss_mb[name] / 1e3:,.1f} GB)"
        figures.append(Figure(name, seconds, "s", shown=shown, level=1))

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
    files = -(-s.scheduler.stored // s.scheduler.file_rows)
    ran = ", ".join(
        f"{name} {seconds:.0f} s"
        + (f" ({share:.0%})" if (share := t.others.get(name)) is not None else "")
        for name, seconds in t.seconds.items()
    )
    lines = [
        f"Sizes: {s.recorder.calls:,} hook calls per enqueue row, {s.recorder.repeats} flushes "
        f"per flush row; ingest shapes repeated "
        + ", ".join(f"{n}×" for _, _, n in s.store.shapes)
        + f"; the cycle's store {r.sizes.stored:,} attempts over the "
        f"{r.sizes.history.days} days before the cycle's clock, in {files} files, three routes "
        f"with a priced primary and backup each, {scheduler.FAILED_PRIMARY:.0%} of attempts "
        "failing with a 529 and the next attempt serving that request from its route's backup "
        f"(DuckDB file {r.database_mb:,.0f} MB, in a temporary directory deleted at the end; "
        f"the smaller store, built the same way on its own: {t.smaller.sizes.stored:,} attempts, "
        f"{t.smaller.database_mb:,.0f} MB); "
        f"{r.sizes.new_rows:,} new attempts before each of {len(r.cycles)} cycles; "
        f"{r.sizes.reads} runs per Live-page read",
        f"Ran on {_cpus()} CPUs (in brackets: the share of them other processes used "
        f"meanwhile): {ran}",
        scaling(r),
    ]
    for result in (t.smaller, r):
        lines.append(
            f"The SQL statements of the {result.sizes.stored:,}-attempt cycle that took longest "
            "(median / max over the cycles, each statement's runs in a cycle added up):"
        )
        for sql, median, worst in slowest_statements(result):
            lines.append(f"  - {median:,.0f} / {worst:,.0f} ms: `{describe(sql)}`")
    return lines


def scaling(r: scheduler.Result) -> str:
    """What the recent_attempts snapshot costs per row, and so the traffic at which the cycle
    reaches its target, all else equal."""
    recent = statistics.median(c.snapshots["recent_attempts"] for c in r.cycles) * 1000
    cycle = statistics.median(c.seconds for c in r.cycles) * 1000
    per_row_us = recent * 1000 / max(r.recent_rows, 1)
    rest = cycle - recent
    limit = (CYCLE_TARGET_MS - rest) * 1000 / per_row_us if per_row_us else float("inf")
    return (
        f"Scaling: the cycle rewrites the whole 24 h `recent_attempts` snapshot every time, at "
        f"{per_row_us:.2f} µs per row; with the rest of the cycle at {rest:,.0f} ms it reaches "
        f"{CYCLE_TARGET_MS / 1000:g} s at about {limit / 1e6:,.2f} M attempts in the last 24 h "
        f"(here {r.recent_rows / 1e6:,.2f} M)"
    )
