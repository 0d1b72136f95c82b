"""What each kind of receiver is sent, and what one notification is for it.

    slack          Slack's incoming-webhook body: `text` (the notification line) and a section
    json           a generic body with every field of the alert (version 1)
    pagerduty      an Events API v2 event, without its routing key   (engine.alerts.oncall_payloads)
    alertmanager   Alertmanager's webhook v4 body, or the array its /api/v2/alerts takes (ditto)

Alerts of one rule that fire together (the targets refused with one key) are one notification
to a chat or a webhook, which lists them all. PagerDuty and an Alertmanager's API address alerts
one by one, and each member alert resolves with its own change: so each member gets its own
notification there (an event deduplicated by its own id, an alert known by its own labels),
and every trigger has the resolve that closes it. A body is what the outbox stores: it never
holds a secret (a PagerDuty routing key is added on the way out, engine.alerts.delivery).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from engine.alerts import oncall_payloads
from engine.config.alerting import UNITS, Receiver
from engine.core.money import format_usd

Alert = Mapping[str, Any]


def payload(kind: str, event: str, alert: Alert) -> str:
    """The body sent to a receiver of `kind` ("slack" or "json") for `event`."""
    body = _slack(event, alert) if kind == "slack" else _generic(event, alert)
    return json.dumps(body, default=_jsonable)


def body_for(receiver: Receiver, event: str, alert: Alert, members: Sequence[Alert] = ()) -> str:
    """What `receiver` is sent for `event` about `alert` (`members`: the alerts it stands for
    when several fired together), as the outbox stores it."""
    if receiver.kind == "pagerduty":
        return json.dumps(oncall_payloads.pagerduty(event, alert), default=_jsonable)
    if receiver.kind == "alertmanager":
        body = oncall_payloads.alertmanager(event, alert, receiver.format, receiver.name, members)
        return json.dumps(body, default=_jsonable)
    return payload(receiver.kind, event, alert)


def notifications(
    receiver: Receiver, event: str, alert: Alert, members: Sequence[Alert] = ()
) -> list[tuple[str, str]]:
    """(alert id, body) of each notification `receiver` is sent: one for `alert`, or one per
    member for a receiver that takes alerts one by one."""
    if len(members) < 2 or not one_by_one(receiver):
        return [(str(alert["alert_id"]), body_for(receiver, event, alert, members))]
    subjects = [str(m["subject"]) for m in members]
    return [
        (str(m["alert_id"]), body_for(receiver, event, {**m, "fired_with": _others(subjects, i)}))
        for i, m in enumerate(members)
    ]


def one_by_one(receiver: Receiver) -> bool:
    """Whether `receiver` is told of each alert on its own (see the module's docstring)."""
    return receiver.kind == "pagerduty" or resends(receiver)


def resends(receiver: Receiver) -> bool:
    """Whether a firing alert must be posted to `receiver` again while it fires: an
    Alertmanager resolves an alert it has not heard of for its `resolve_timeout` (5 min by
    default), so its clients re-send what still fires (engine.alerts.delivery.RESEND_S)."""
    return receiver.kind == "alertmanager" and receiver.format == "api"


def _others(subjects: list[str], i: int) -> list[str]:
    return subjects[:i] + subjects[i + 1 :]


def _generic(event: str, alert: Alert) -> dict[str, Any]:
    return {
        "version": 1,
        "source": "switchover",
        "event": event,  # firing, resolved or test
        "alert": {**alert, "unit": UNITS.get(alert.get("kind", ""), "")},
    }


_ICONS = {("firing", "critical"): ":red_circle:", ("firing", "warning"): ":large_orange_circle:"}


def _slack(event: str, alert: Alert) -> dict[str, Any]:
    """Slack's incoming-webhook body: `text` (the notification line and the fallback) and a
    section block in mrkdwn."""
    icon = _ICONS.get((event, alert.get("severity", "")), ":large_green_circle:")
    state = {"firing": "FIRING", "resolved": "RESOLVED"}.get(event, event.upper())
    head = f"{icon} *{state}* [{alert.get('severity')}] {alert.get('rule')}: {alert.get('subject')}"
    lines = [head, str(alert.get("summary", ""))]
    if alert.get("cost_usd") is not None:
        lines.append(f"Cost so far: {format_usd(alert['cost_usd'])}")
    if event == "resolved" and alert.get("fired_at") and alert.get("resolved_at"):
        lines.append(f"Lasted {_duration(alert['resolved_at'] - alert['fired_at'])}")
    text = "\n".join(lines)
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"not JSON: {type(value).__name__}")
