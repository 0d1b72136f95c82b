"""The demo's console: each change of the system's state said once, and every few seconds what
the traffic of those seconds did.

The state is read where the system keeps it, never inferred from the demo's own requests:
breakers from the gateway's `/v1/status` (every second), alerts and incidents from the
scheduler's published snapshots (every few seconds, with `PublishedData`). A request is never a
line of its own, not even one that needed a fallback or failed: the summary counts them.

    12:00:31 breaker claude/claude-sonnet-4-5 opened (failures), next probe in 20 s
    12:00:40 last 10 s: 31 requests, 12 by a fallback (39 %), 0 failed
    12:01:05 alert fired: fallback-rate-5m on support: ...
    12:03:22 breaker claude/claude-sonnet-4-5 closed

`Changes` and `Window` are pure (their inputs are given, times too); `Console` polls and says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from engine.core.files import atomic_write
from engine.core.formats import format_duration
from engine.published.read import PublishedData
from simulations.demo.client import Outcome

Say = Callable[[str], None]
STATUS_EVERY_S = 1.0  # the gateway's breakers
PUBLISHED_EVERY_S = 5.0  # alerts and incidents: the scheduler publishes every cycle (5 s)


class Window:
    """The requests whose answers arrived in the last `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._seen: deque[tuple[float, Outcome]] = deque()

    def add(self, at: float, outcome: Outcome) -> None:
        self._seen.append((at, outcome))

    def summary(self, now: float) -> str:
        """ "last 10 s: 31 requests, 12 by a fallback (39 %), 0 failed" for the window that
        ends at `now` (answers at or before `now - seconds` are dropped)."""
        while self._seen and self._seen[0][0] <= now - self.seconds:
            self._seen.popleft()
        outcomes = [o for at, o in self._seen if at <= now]
        by_fallback = sum(o.fallback and not o.failed for o in outcomes)
        failed = sum(o.failed for o in outcomes)
        share = f"{100 * by_fallback / len(outcomes):.0f} %" if outcomes else "0 %"
        return (
            f"last {self.seconds:g} s: {len(outcomes)} requests, {by_fallback} by a fallback "
            f"({share}), {failed} failed"
        )


class Changes:
    """What changed since the last look, each change said once: a breaker opened or closed
    (half-open is still open: it is not closed until its probe succeeds), an alert fired or
    resolved, an incident started or ended."""

    def __init__(self, state: Path | None = None) -> None:
        """`state`: a file that keeps what was said, so that a restarted console says only
        what changed since (a firing alert or an ongoing incident is not news twice)."""
        self.state = state
        self._open: set[str] = set()  # targets whose breaker is open or half-open
        self._alerts: dict[tuple[Any, ...], bool] = {}  # → resolved
        self._incidents: dict[tuple[Any, ...], bool] = {}  # → ended
        self._load()

    def _load(self) -> None:
        if self.state is None:
            return
        try:
            saved = json.loads(self.state.read_text())
            self._open = set(saved["open"])
            self._alerts = {tuple(key): bool(done) for *key, done in saved["alerts"]}
            self._incidents = {tuple(key): bool(done) for *key, done in saved["incidents"]}
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: start over
            return

    def save(self) -> None:
        """Keep what was said (the console calls it after each change it says)."""
        if self.state is None:
            return
        body = {
            "open": sorted(self._open),
            "alerts": [[*key, done] for key, done in self._alerts.items()],
            "incidents": [[*key, done] for key, done in self._incidents.items()],
        }
        with contextlib.suppress(OSError):  # a console that cannot keep notes still speaks
            self.state.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.state, json.dumps(body), durable=False)

    def breakers(self, status: Mapping[str, Any]) -> list[str]:
        """From a `/v1/status` document."""
        lines = []
        now_open = set()
        for target, breaker in sorted(status.get("breakers", {}).items()):
            if breaker.get("status") == "closed":
                continue
            now_open.add(target)
            if target not in self._open:
                line = f"breaker {target} opened ({breaker.get('open_reason') or 'failures'})"
                remaining = breaker.get("open_remaining_s")
                if remaining:
                    line += f", next probe in {math.ceil(remaining):.0f} s"
                lines.append(line)
        lines += [f"breaker {target} closed" for target in sorted(self._open - now_open)]
        self._open = now_open
        return lines

    def alerts(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """From rows of the published `alerts` (rule, subject, state, fired_at, summary)."""
        lines = []
        seen: dict[tuple[Any, ...], bool] = {}
        for row in sorted(rows, key=lambda r: str(r.get("fired_at"))):
            key = (row.get("rule"), row.get("subject"), str(row.get("fired_at")))
            resolved = row.get("state") != "firing"
            said = self._alerts.get(key)
            what = f"{row.get('rule')} on {row.get('subject')}"
            if said is None:
                summary = row.get("summary")
                lines.append(f"alert fired: {what}" + (f": {summary}" if summary else ""))
            if resolved and not said:
                lines.append(f"alert resolved: {what}")
            seen[key] = resolved
        self._alerts = seen  # what the snapshots no longer hold is never said again
        return lines

    def incidents(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """From rows of the published `incidents` (subject, family, started_at, ended_at, and
        requests_affected, answered_by_fallback, failed where present)."""
        lines = []
        seen: dict[tuple[Any, ...], bool] = {}
        for row in sorted(rows, key=lambda r: str(r.get("started_at"))):
            family = row.get("family")
            key = (row.get("subject"), family, str(row.get("started_at")))
            ended = row.get("ended_at") is not None
            said = self._incidents.get(key)
            what = f"{row.get('subject')}" + (f" ({family})" if family else "")
            if said is None:
                lines.append(f"incident started: {what} at {_clock(row.get('started_at'))}")
            if ended and not said:
                lines.append(f"incident ended: {what}{_impact(row)}")
            seen[key] = ended
        self._incidents = seen
        return lines


def _impact(row: Mapping[str, Any]) -> str:
    parts = []
    started, ended = row.get("started_at"), row.get("ended_at")
    if isinstance(started, datetime) and isinstance(ended, datetime):
        parts.append(f"after {format_duration((ended - started).total_seconds())}")
    for column, words in (
        ("requests_affected", "requests affected"),
        ("answered_by_fallback", "by a fallback"),
        ("failed", "failed"),
    ):
        if row.get(column) is not None:
            parts.append(f"{int(row[column])} {words}")
    return ", " + ", ".join(parts) if parts else ""


def _clock(value: object) -> str:
    """A published time as the console's clock shows it (local time)."""
    if isinstance(value, datetime):
        return datetime.fromtimestamp(value.timestamp()).strftime("%H:%M:%S")
    return str(value)


def records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as dicts, its missing values (NaT, NaN, <NA>) as None."""
    return [
        {k: (None if _missing(v) else v) for k, v in row.items()}
        for row in frame.to_dict("records")
    ]


def _missing(value: object) -> bool:
    if isinstance(value, list | tuple | dict):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


class Console:
    """Polls the gateway and the published snapshots, says each change once, and the window's
    summary every `window_s`. `count` is given every request's outcome."""

    def __init__(
        self,
        say: Say,
        *,
        window_s: float,
        published: Path,
        since: datetime,
        clock: Callable[[], float] = time.monotonic,
        state: Path | None = None,
    ) -> None:
        """`state`: where what was said is kept across restarts (`Changes`)."""
        self.say = say
        self.window = Window(window_s)
        self.changes = Changes(state)
        self.published = PublishedData(published)
        self.since = since  # alerts and incidents that ended before the demo began are history
        self.clock = clock
        self._unreadable = False  # said once until they are readable again

    def count(self, outcome: Outcome) -> None:
        self.window.add(self.clock(), outcome)

    async def run(self, gateway: httpx.AsyncClient) -> None:
        """Until cancelled."""
        next_summary = self.clock() + self.window.seconds
        next_published = self.clock()
        try:
            while True:
                status = await _status(gateway)
                if status:  # not answering says nothing about the breakers
                    self._said(self.changes.breakers(status))
                if self.clock() >= next_published:
                    next_published += PUBLISHED_EVERY_S
                    self._said(await asyncio.to_thread(self._published_changes))
                if self.clock() >= next_summary:
                    next_summary += self.window.seconds
                    self._said([self.window.summary(self.clock())])
                await asyncio.sleep(min(STATUS_EVERY_S, max(0.0, next_summary - self.clock())))
        finally:
            self.published.close()

    def _published_changes(self) -> list[str]:
        try:
            alerts = records(self.published.query("alerts", since=self.since))
            incidents = records(self.published.query("incidents", since=self.since))
        except Exception as exc:  # a snapshot being rewritten by a newer scheduler: next time
            if self._unreadable:
                return []
            self._unreadable = True
            return [f"published snapshots unreadable for now ({type(exc).__name__}: {exc})"]
        self._unreadable = False
        return self.changes.alerts(alerts) + self.changes.incidents(incidents)

    def _said(self, lines: list[str]) -> None:
        for line in lines:
            self.say(f"{time.strftime('%H:%M:%S')} {line}")
        if lines:
            self.changes.save()


async def _status(gateway: httpx.AsyncClient) -> dict[str, Any]:
    """The gateway's `/v1/status`; an empty one while it does not answer (its supervisor
    says when it is gone)."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        answer = await gateway.get("/v1/status")
        if answer.status_code == 200:
            return answer.json()
    return {}
