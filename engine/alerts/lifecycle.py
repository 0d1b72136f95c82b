"""An alert's life: it fires once, stays firing while its condition holds, resolves once.

    condition starts ──► alert firing (one row; one "firing" notification per receiver)
    condition holds  ──► the same row updated (value, summary, cost): nothing sent
    condition ends   ──► resolved (one "resolved" notification, only if "firing" was sent)

An alert is keyed by (rule, subject): the rule's route, target or provider. While a silence
covers it, an alert still fires and resolves in the store (the dashboard shows it, marked
silenced) but nothing is sent; if it is still firing when the silence ends, its "firing"
notification goes out then. A fault drill holds nothing back: what it makes fail is real, and
engine.alerts.drill_marks says so in the summary. Alerts of one rule that fire in one pass with
the same group (the targets refused with one key) go out as one notification that lists them
all (one each to a receiver that takes alerts one by one: engine.alerts.payloads).
Notifications are rows in an outbox (`alert_notifications`) that `delivery.Outbox` sends, so a
slow or dead receiver never holds up this pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from engine.alerts.conditions import Observation
from engine.alerts.payloads import notifications
from engine.config.alerting import AlertingConfig

log = logging.getLogger("switchover.alerts")


@dataclass(frozen=True, slots=True)
class Change:
    alert_id: str
    event: str  # "firing" or "resolved"
    rule: str
    subject: str
    notified: bool  # whether receivers are told (not silenced, and for a resolve: told it fired)


_ACTIVE = "SELECT alert_id, rule, subject, notified FROM alerts WHERE state = 'firing'"
_SILENCED = "SELECT rule, subject FROM alert_silences WHERE starts_at <= $now AND ends_at > $now"
_INSERT = """
    INSERT INTO alerts VALUES ($alert_id, $rule, $kind, $severity, $subject, 'firing', $now,
        NULL, $now, $value, $threshold, $summary, $cost, $notified, $silenced)
"""
_UPDATE = """
    UPDATE alerts SET evaluated_at = $now, value = $value, summary = $summary, cost_usd = $cost,
        silenced = $silenced, notified = notified OR $notify
    WHERE alert_id = $alert_id
"""
_RESOLVE = """
    UPDATE alerts SET state = 'resolved', resolved_at = $now, evaluated_at = $now
    WHERE alert_id = $alert_id
"""


def apply(
    con: duckdb.DuckDBPyConnection,
    config: AlertingConfig,
    evaluated: Mapping[str, Sequence[Observation]],
    now: datetime,
) -> list[Change]:
    """Move the alerts to what `evaluated` says, in one transaction, queueing notifications.
    Rules absent from `evaluated` (they failed to evaluate) keep their alerts as they are;
    alerts of rules no longer configured resolve."""
    active = {
        (rule, subject): (aid, told) for aid, rule, subject, told in con.execute(_ACTIVE).fetchall()
    }
    silences = con.execute(_SILENCED, {"now": now}).fetchall()
    changes: list[Change] = []
    observed: dict[str, Observation] = {}  # alert id → what made it fire, for its notification
    con.execute("BEGIN TRANSACTION")
    try:
        for rule_name, observations in evaluated.items():
            for obs in observations:
                quiet = _silenced(silences, rule_name, obs)
                change = _fire_or_update(con, rule_name, obs, active, quiet, now)
                if change is not None:
                    changes.append(change)
                    observed[change.alert_id] = obs
        for (rule_name, subject), (alert_id, told) in active.items():
            if rule_name in evaluated or config.rule(rule_name) is None:
                con.execute(_RESOLVE, {"alert_id": alert_id, "now": now})
                changes.append(Change(alert_id, "resolved", rule_name, subject, told))
        for batch in _batches(changes, observed):
            _queue(con, config, batch, now)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    for change in changes:
        log.warning(
            "alert %s %s%s", change.event, change.alert_id, "" if change.notified else " (silenced)"
        )
    return changes


def _silenced(
    silences: Sequence[tuple[str | None, str | None]], rule: str, obs: Observation
) -> bool:
    """A silence for the rule, for its subject or for a route or target it is about."""
    subjects = {obs.subject, *obs.names}
    return any((r is None or r == rule) and (s is None or s in subjects) for r, s in silences)


def _fire_or_update(
    con: duckdb.DuckDBPyConnection,
    rule_name: str,
    obs: Observation,
    active: dict[tuple[str, str], tuple[str, bool]],
    quiet: bool,
    now: datetime,
) -> Change | None:
    """The alert `obs` is about, firing: a new row, or its row in `active` updated (and taken
    out of it, so that what is left there resolves). The change to tell: a new alert's, or an
    alert's whose silence ended while it still fires; None for one still firing as it was."""
    values = {
        "now": now,
        "value": obs.value,
        "summary": obs.summary,
        "cost": obs.cost_usd,
        "silenced": quiet,
    }
    known = active.pop((rule_name, obs.subject), None)
    if known is None:
        alert_id = f"{rule_name}:{obs.subject}:{now:%Y%m%dT%H%M%S}"
        rule = obs.rule
        new = {"alert_id": alert_id, "rule": rule_name, "kind": rule.kind, "subject": obs.subject}
        new |= {"severity": rule.severity, "threshold": rule.threshold, "notified": not quiet}
        con.execute(_INSERT, {**values, **new})
        return Change(alert_id, "firing", rule_name, obs.subject, not quiet)
    alert_id, told = known
    notify = not told and not quiet  # a silence ended while it still fires
    con.execute(_UPDATE, {**values, "alert_id": alert_id, "notify": notify})
    return Change(alert_id, "firing", rule_name, obs.subject, True) if notify else None


_ALERT_ROW = """
    SELECT alert_id, rule, kind, severity, subject, state, fired_at, resolved_at, value,
        threshold, summary, cost_usd
    FROM alerts WHERE alert_id = $alert_id
"""
_QUEUE = """
    INSERT OR IGNORE INTO alert_notifications VALUES ($id, $alert_id, $event, $receiver,
        $payload, 'pending', 0, $now, $now, NULL, NULL, NULL)
"""


def _batches(
    changes: Sequence[Change], observed: Mapping[str, Observation]
) -> Iterator[tuple[str, list[Change]]]:
    """The notifications to queue: (group, its changes). Firing changes of one rule and group
    make one; every other change told its own (group "")."""
    groups: dict[tuple[str, str], list[Change]] = {}
    for change in changes:
        if not change.notified:
            continue
        obs = observed.get(change.alert_id)
        if change.event == "firing" and obs is not None and obs.group:
            groups.setdefault((change.rule, obs.group), []).append(change)
        else:
            yield "", [change]
    for (_, group), batch in groups.items():
        yield group, batch


def _queue(
    con: duckdb.DuckDBPyConnection,
    config: AlertingConfig,
    batch: tuple[str, list[Change]],
    now: datetime,
) -> None:
    group, changes = batch
    rows = []
    for change in changes:
        cursor = con.execute(_ALERT_ROW, {"alert_id": change.alert_id})
        names = [d[0] for d in cursor.description]
        rows.append(dict(zip(names, cursor.fetchone(), strict=True)))
    alert = rows[0] if len(rows) == 1 else _together(group, rows)
    event = changes[0].event
    for receiver in config.receivers:
        if not receiver.wants(alert["severity"]):
            continue
        for alert_id, body in notifications(receiver, event, alert, rows):
            con.execute(
                _QUEUE,
                {
                    "id": f"{alert_id}:{event}:{receiver.name}",
                    "alert_id": alert_id,
                    "event": event,
                    "receiver": receiver.name,
                    "payload": body,
                    "now": now,
                },
            )


def _together(group: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One alert body for alerts that fired together: the group and every subject, each
    summary on its own line, the ids of all (the outbox row keeps the first's)."""
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {
        **rows[0],
        "subject": f"{group}: {', '.join(r['subject'] for r in rows)}",
        "summary": "\n".join(r["summary"] for r in rows),
        "value": sum(r["value"] or 0 for r in rows),
        "cost_usd": sum(costs) if costs else None,
        "alert_ids": [r["alert_id"] for r in rows],
        "subjects": [r["subject"] for r in rows],
    }
