"""The weekly report, as the scheduler's cron job makes it: rendered from the published
snapshots (engine.reports), never from the store, and its headline sent to the receivers that
[reports] send_to names."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

from engine.config import ReportsConfig
from engine.config.alerting import Receiver
from engine.core.paths import DataPaths

log = logging.getLogger("switchover.scheduler")


def weekly_report(
    paths: DataPaths,
    reports: ReportsConfig,
    now: datetime | None = None,
    receivers: tuple[Receiver, ...] = (),
    *,
    background: bool = True,
) -> Path:
    """Last week's report under `paths.reports`, from the published snapshots; its headline
    then goes to the `receivers` that [reports] send_to names, on a thread of its own unless
    not `background` (the scheduler's one worker thread runs the cycles too, and a receiver
    that is down is retried for a minute)."""
    now = now or datetime.now(UTC)
    from engine.published.read import PublishedData
    from engine.reports import render
    from engine.reports.week import build_week, last_week

    data = PublishedData(paths.published)
    try:
        report = build_week(data, last_week(now), reports.availability_target)
    finally:
        data.close()
    written = render.write(report, paths.reports)
    log.info("weekly report %s written to %s", report.week, written["html"].parent)
    chosen = [r for r in receivers if r.name in reports.send_to]
    if chosen:
        from engine.reports import send
        from engine.reports.headline import headline_text

        title, *lines = headline_text(report)
        if background:
            threading.Thread(
                target=send.send,
                args=(chosen, title, lines, written),
                name="report-headline",
                daemon=True,
            ).start()
        else:
            send.send(chosen, title, lines, written)
    return written["html"]
