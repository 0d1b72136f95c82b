"""The weekly report's headline, sent to the alert receivers that opted in ([reports] send_to):
for the people who read a chat channel, not the dashboard. A Slack receiver gets a message with
the headline figures and where the files are; a JSON receiver the same as fields.

Sent from the scheduler's report job, once the files are written: the files are the report,
so a receiver that is down costs a line in the log, never the report. Each receiver is tried a
few times with the alert outbox's backoff, on the job's own thread (never a cycle's).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from engine.alerts.delivery import BACKOFF_S, Result, post
from engine.config.alerting import Receiver

log = logging.getLogger("switchover.reports")

TRIES = 3  # per receiver: the report job runs once a week, a short outage should not lose it
EVENT = "weekly_report"


def message(kind: str, title: str, lines: Sequence[str], files: Mapping[str, Path]) -> str:
    """The body for a receiver of `kind` ("slack" or "json")."""
    where = {name: str(path) for name, path in files.items()}
    if kind == "slack":
        text = "\n".join(
            [f":bar_chart: *{title}*", *(f"• {line}" for line in lines),
             "Files: " + ", ".join(f"{name} `{path}`" for name, path in where.items())]
        )  # fmt: skip
        block = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
        return json.dumps({"text": text, "blocks": [block]})
    return json.dumps({"event": EVENT, "title": title, "headline": list(lines), "files": where})


def send(
    receivers: Sequence[Receiver],
    title: str,
    lines: Sequence[str],
    files: Mapping[str, Path],
    *,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Result]:
    """Post the headline to each receiver (TRIES at most); the last result of each, by name."""
    results: dict[str, Result] = {}
    for receiver in receivers:
        body = message(receiver.kind, title, lines, files)
        for attempt in range(1, TRIES + 1):
            result = post(receiver, body, environ)
            if result.ok:
                break
            if attempt < TRIES:
                sleep(BACKOFF_S[attempt - 1])
        results[receiver.name] = result
        if result.ok:
            log.info("weekly report headline sent to %s", receiver.name)
        else:  # the error never holds the URL (a secret): delivery.post keeps it out
            log.warning("weekly report headline not sent to %s: %s", receiver.name, result.error)
    return results
