"""The bodies the pager tools read: PagerDuty Events v2 and Alertmanager's own formats.

    pagerduty      POST https://events.pagerduty.com/v2/enqueue (or `url`): one event per
                   notification, `trigger` when an alert fires, `resolve` when it resolves,
                   both with the alert's id as `dedup_key`, so PagerDuty opens one incident per
                   alert and closes that one. The routing key is a secret: the stored body has
                   none, `with_routing_key` adds it when sending (engine.alerts.delivery).
    alertmanager   format "webhook": the webhook body Alertmanager itself posts to its receivers
                   (version 4), for anything that reads those; format "api": the array of alerts
                   Alertmanager ingests at `POST /api/v2/alerts`, for the team's own Alertmanager
                   to route, group and de-duplicate with the rest of its alerts.

An alert here is the `alerts` row as engine.alerts.lifecycle reads it (rule, kind, severity,
subject, fired_at, resolved_at, value, threshold, summary, cost_usd, alert_id); PagerDuty is
sent each alert of a group on its own, with `fired_with` (the others' subjects), and a webhook
lists every member (engine.alerts.payloads says why). `custom_details` are read by people in
PagerDuty's incident view: figures rounded, money in the one money format, never a None.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engine.config.alerting import UNITS
from engine.core.money import format_usd, said_as_change

SOURCE = "switchover"
SUMMARY_LIMIT = 1024  # PagerDuty truncates a longer summary; cut it here, on a word
# Alertmanager's "not resolved yet" end time (its Go zero time).
ZERO_TIME = "0001-01-01T00:00:00Z"
_PD_SEVERITY = {"critical": "critical", "warning": "warning"}


def pagerduty(event: str, alert: Mapping[str, Any]) -> dict[str, Any]:
    """An Events v2 event without its routing key. `event` "firing" or "test" → trigger
    (a test at severity info), "resolved" → resolve."""
    dedup_key = str(alert.get("alert_id") or "switchover-test")
    if event == "resolved":
        return {"event_action": "resolve", "dedup_key": dedup_key}
    severity = "info" if event == "test" else _PD_SEVERITY.get(str(alert.get("severity")), "error")
    cost = alert.get("cost_usd")
    details = {
        "rule": alert.get("rule"),
        "value": _figure(alert.get("value")),
        "threshold": _figure(alert.get("threshold")),
        "unit": UNITS.get(str(alert.get("kind", "")), ""),
        "cost_so_far": _cost(cost) if cost is not None else None,
        "alert_id": alert.get("alert_id"),
        "fired_at": _iso(alert["fired_at"]) if alert.get("fired_at") else None,
        "fired_with": alert.get("fired_with") or None,  # the alerts of its group, by subject
    }
    return {
        "event_action": "trigger",
        "dedup_key": dedup_key,
        "payload": {
            "summary": _cut(
                f"[{alert.get('rule')}] {alert.get('subject')}: {alert.get('summary')}"
            ),
            "source": SOURCE,
            "severity": severity,
            "timestamp": _iso(alert.get("fired_at")),
            "component": str(alert.get("subject", "")),
            "group": str(alert.get("rule", "")),
            "class": str(alert.get("kind", "")),
            "custom_details": {k: v for k, v in details.items() if v is not None},
        },
        "client": "Switchover",
    }


def with_routing_key(body: str, routing_key: str) -> str:
    """The stored event with the receiver's routing key: added only on its way out."""
    event = json.loads(body)
    return json.dumps({"routing_key": routing_key, **event})


def alertmanager_alert(event: str, alert: Mapping[str, Any]) -> dict[str, Any]:
    """One alert in Alertmanager's shape: labels identify it (Alertmanager groups and
    de-duplicates by them), annotations say what it is."""
    labels = {
        "alertname": str(alert.get("rule", "switchover-test")),
        "severity": str(alert.get("severity", "warning")),
        "subject": str(alert.get("subject", "")),
        "kind": str(alert.get("kind", "")),
        "source": SOURCE,
    }
    annotations = {
        "summary": str(alert.get("summary", "")),
        "description": f"{labels['alertname']} on {labels['subject']} ({alert.get('alert_id')})",
    }
    resolved = event == "resolved"
    return {
        "status": "resolved" if resolved else "firing",
        "labels": labels,
        "annotations": annotations,
        "startsAt": _iso(alert.get("fired_at")),
        "endsAt": _iso(alert.get("resolved_at")) if resolved else ZERO_TIME,
        "generatorURL": "",
        "fingerprint": _fingerprint(labels),
    }


def alertmanager(
    event: str,
    alert: Mapping[str, Any],
    fmt: str,
    receiver: str,
    members: Sequence[Mapping[str, Any]] = (),
) -> Any:
    """Format "api": the list `POST /api/v2/alerts` takes; "webhook": the webhook v4 body.
    `members`: the alerts `alert` stands for when several fired together (else itself)."""
    alerts = [alertmanager_alert(event, member) for member in (members or [alert])]
    if fmt == "api":  # a firing alert has no end: Alertmanager keeps it until told, or times out
        keys = ("labels", "annotations", "startsAt", "generatorURL")
        ends = event == "resolved"
        return [{k: a[k] for k in keys} | ({"endsAt": a["endsAt"]} if ends else {}) for a in alerts]
    common = _common([a["labels"] for a in alerts])
    group = {"alertname": common.get("alertname", alerts[0]["labels"]["alertname"])}
    return {
        "version": "4",
        "groupKey": "{}:" + "{" + ",".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": "resolved" if event == "resolved" else "firing",
        "receiver": receiver,
        "groupLabels": group,
        "commonLabels": common,
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": "",
        "alerts": alerts,
    }


def _common(maps: list[dict[str, str]]) -> dict[str, str]:
    first = maps[0]
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in maps[1:])}


def _fingerprint(labels: Mapping[str, str]) -> str:
    """Stable for an alert's labels, like Alertmanager's own (16 hex digits)."""
    text = "\xff".join(f"{k}\xff{labels[k]}" for k in sorted(labels))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cost(value: Any) -> str:
    """The alert's cost in the one money format; below zero (fallbacks to a cheaper backup)
    said as a saving."""
    shown = format_usd(value)
    return said_as_change(shown) if shown.startswith("-") else shown


def _figure(value: Any) -> float | None:
    """A measured figure to four significant digits, whole numbers kept whole (33.33,
    0.001235, 31234.0); None when unknown."""
    if value is None or not math.isfinite(float(value)):
        return None
    number = float(value)
    if number == 0:
        return 0.0
    return round(number, max(0, 3 - math.floor(math.log10(abs(number)))))


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return when.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return datetime.now(UTC).isoformat().replace("+00:00", "Z") if value is None else str(value)


def _cut(text: str) -> str:
    if len(text) <= SUMMARY_LIMIT:
        return text
    return text[: SUMMARY_LIMIT - 1].rsplit(" ", 1)[0] + "…"
