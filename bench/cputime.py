"""CPU time of live process trees and of the whole machine, from Linux's /proc (None elsewhere).

A process's children count in `os.times()` only once they have been waited for; a gateway's
workers are grandchildren that live through a phase, so each phase reads them from /proc.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_s(pid: int, *, reaped: bool = False) -> float | None:
    """User + system CPU seconds of `pid` and every live descendant, and with `reaped` those of
    the children `pid` has waited for (a server's workers of closed connections); None without
    /proc."""
    try:
        own = sum(_own_cpu_s(p) for p in _tree(pid))
        return own + (_reaped_cpu_s(pid) if reaped else 0.0)
    except OSError:
        return None


def machine_busy_s() -> float | None:
    """CPU seconds every CPU of the machine has spent busy since boot; None without /proc."""
    try:
        ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / _TICK


def _tree(pid: int) -> list[int]:
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                found += _tree(int(child))
            except FileNotFoundError:
                continue  # ended while we looked
    return found


def _own_cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK if fields else 0.0  # utime + stime


def _reaped_cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[13]) + int(fields[14])) / _TICK if fields else 0.0  # cutime + cstime


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat from its third field on; empty when the process ended while we looked
    (its time went to its parent's children count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return []
    return stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
