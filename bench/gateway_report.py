"""The generated "Gateway" section of docs/benchmarks.md, from what bench.gateway measured: the
open-loop table against one worker, the closed-loop table, the load generator's own ceiling and
the targets of issue 23. Pure: blocks in, text out; shown figures are rounded before they are
subtracted, so that they add up as shown."""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING

from bench.stats import percentile

if TYPE_CHECKING:  # bench.gateway imports this module to write its section
    from bench.gateway import Block

TARGET_RATE = 300.0  # issue 23: two workers add at most TARGET_OVER_ONE_MS p50 over one here
TARGET_OVER_ONE_MS = 1.0
QUEUE_S = 0.1  # more than this much of the rate unanswered when sending ended: a queue


def _ms(values: list[float], q: float) -> float:
    return round(percentile(values, q), 2)  # rounded first, so that shown figures add up


def _us(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def open_table(blocks: list[Block]) -> list[str]:
    one = {rate: _added(blocks[0], rate)[0] for rate in blocks[0].open}
    lines = [
        "| workers | load | direct p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms "
        "| added p50 over 1 worker | gateway CPU µs/request | errors |",
        "|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for block in blocks:
        for rate in block.open:
            direct, through = block.open[rate]
            d50, d99 = _ms(direct.phase.latencies_ms, 50), _ms(direct.phase.latencies_ms, 99)
            g50, g99 = _ms(through.phase.latencies_ms, 50), _ms(through.phase.latencies_ms, 99)
            added50, added99 = _added(block, rate)
            over = "" if block.workers == 1 else f"{added50 - one[rate]:+.2f}"
            load = f"{rate:g} req/s" + ("" if kept_up(block, rate) else " [1]")
            errors = direct.phase.errors + through.phase.errors
            lines.append(
                f"| {block.workers} | {load} | {d50:.2f} / {d99:.2f} | "
                f"{g50:.2f} / {g99:.2f} | {added50:+.2f} / {added99:+.2f} | {over} | "
                f"{_us(through.server_us_per_request())} | {errors} |"
            )
    return lines


def _behind_note(blocks: list[Block]) -> list[str]:
    if all(kept_up(block, rate) for block in blocks for rate in block.open):
        return []
    return [
        f"[1] fell behind: when the last request left, more than {QUEUE_S * 1000:.0f} ms of "
        "its rate was still unanswered (a queue), so the latency is the queue's",
        "",
    ]


def _added(block: Block, rate: float) -> tuple[float, float]:
    direct, through = (side.phase.latencies_ms for side in block.open[rate])
    return (
        round(_ms(through, 50) - _ms(direct, 50), 2),
        round(_ms(through, 99) - _ms(direct, 99), 2),
    )


def closed_table(blocks: list[Block]) -> list[str]:
    lines = [
        f"| workers | {blocks[0].callers} callers: fake directly req/s | through the gateway "
        "req/s | ratio | gateway CPUs busy | gateway CPU µs/request | load generator, share "
        "of one CPU | errors |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for block in blocks:
        direct, through = block.closed
        busy = through.server_busy()
        lines.append(
            f"| {block.workers} | {direct.phase.rate:,.0f} | {through.phase.rate:,.0f} | "
            f"{through.phase.rate / direct.phase.rate:.2f}× | "
            f"{'—' if busy is None else f'{busy:.2f}'} | "
            f"{_us(through.server_us_per_request())} | "
            f"{through.phase.cpu_s / through.phase.seconds:.0%} | "
            f"{direct.phase.errors + through.phase.errors} |"
        )
    return lines


def load_generator_note(blocks: list[Block]) -> str:
    """The load generator's own rate against the fake, and what set it."""
    direct = [block.closed[0] for block in blocks]
    rates = sorted(side.phase.rate for side in direct)
    cost = sorted(side.phase.cpu_us_per_request for side in direct)
    ceiling = 1e6 / cost[-1]
    top = max(block.closed[1].phase.rate for block in blocks)
    note = (
        f"- Load generator (bench/loadgen.py, aiohttp, one process): against the fake directly "
        f"with {blocks[0].callers} callers, {_span(rates, '{:,.0f}')} req/s, at "
        f"{_span(cost, '{:,.0f}')} µs of its CPU a request, so it could send about "
        f"{ceiling:,.0f} req/s on one CPU, "
        f"{ceiling / top:.1f}× the most any gateway got"
    )
    fake = sorted(busy for side in direct if (busy := side.server_busy()) is not None)
    if fake:
        note += f"; the fake provider was busy {_span(fake, '{:.0%}')} of one CPU meanwhile"
    return note


def _span(values: list[float], form: str) -> str:
    low, high = form.format(values[0]), form.format(values[-1])
    return low if low == high else f"{low}–{high}"


def kept_up(block: Block, rate: float) -> bool:
    """Whether the gateway kept up with the rate it was sent: past its capacity (or the CPU
    the machine left it) requests queue, and its latency is the queue's, not the gateway's."""
    return block.open[rate][1].phase.backlog <= rate * QUEUE_S


def targets(blocks: list[Block]) -> list[str]:
    by = {block.workers: block for block in blocks}
    over = _added(by[2], TARGET_RATE)[0] - _added(by[1], TARGET_RATE)[0]
    behind = [n for n in (1, 2) if not kept_up(by[n], TARGET_RATE)]
    if behind:
        who = " and ".join(f"{n} worker{'s' * (n > 1)}" for n in behind)
        verdict = f"not measured: {who} fell behind (a queue, on the CPU this run left them)"
    else:
        verdict = "met" if over <= TARGET_OVER_ONE_MS else "**not met**"
    one, two = (by[n].closed[1].phase.rate for n in (1, 2))
    return [
        f"- Target: two workers add at most {TARGET_OVER_ONE_MS:g} ms p50 over one at "
        f"{TARGET_RATE:g} req/s: {over:+.2f} ms, {verdict}",
        f"- Target: two workers serve more than one with {blocks[0].callers} callers: "
        f"{two:,.0f} against {one:,.0f} req/s ({two / one:.2f}×), "
        + ("met" if two > one else "**not met**"),
    ]


def section(blocks: list[Block], *, command: str, runtime_s: float, when: datetime) -> str:
    others = sorted(b.others for b in blocks if b.others is not None)
    load = f"; other processes kept {_span(others, '{:.0%}')} of them busy" if others else ""
    return "\n".join(
        [
            "## Gateway",
            "",
            f"- Command: `{command}` (this part ran {runtime_s / 60:.1f} min)",
            f"- Date: {when:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs shared by the load "
            f"generator, `switchover serve` and the fake provider{load}",
            "- Each number of workers is one `switchover serve` (one route, one target on the "
            "fake, attempts spooled as in production), measured against the fake directly in "
            "the same block: open loop (requests leave on a fixed schedule whatever the "
            "answers do), then closed loop, each side in two alternating halves",
            load_generator_note(blocks),
            *targets(blocks),
            "",
            *open_table(blocks),
            "",
            *_behind_note(blocks),
            *closed_table(blocks),
            "",
            "How to read this: *added* is what a caller waits for on top of the provider at that "
            "load, and *over 1 worker* what more workers add to it. *Gateway CPU* is the CPU "
            "time of serve's processes per request answered, the steadiest measure of its own "
            "work; *CPUs busy* how many CPUs they kept busy. The load generator shares the "
            "machine with the gateway, so what it spends is CPU the workers do not get.",
        ]
    )
