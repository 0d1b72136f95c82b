"""Local stand-ins for PagerDuty's Events API v2 and an Alertmanager, on loopback.

Each checks the exact shape its real peer requires and answers as it does: PagerDuty 202 with
`{"status": "success", "dedup_key": ...}` or 400 `{"status": "invalid event"}`; Alertmanager's
`/api/v2/alerts` 200 or 400. Whatever arrived is kept (`got`), with the status answered, so a
test sees both what was sent and whether the peer would have taken it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema

_ISO = {
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}

# developer.pagerduty.com, Events API v2 "Send an alert event": the fields and their limits.
PAGERDUTY_TRIGGER = {
    "type": "object",
    "required": ["routing_key", "event_action", "payload"],
    "additionalProperties": False,
    "properties": {
        "routing_key": {"type": "string", "minLength": 32, "maxLength": 32},
        "event_action": {"const": "trigger"},
        "dedup_key": {"type": "string", "minLength": 1, "maxLength": 255},
        "client": {"type": "string"},
        "client_url": {"type": "string"},
        "payload": {
            "type": "object",
            "required": ["summary", "source", "severity"],
            "additionalProperties": False,
            "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": 1024},
                "source": {"type": "string", "minLength": 1},
                "severity": {"enum": ["critical", "error", "warning", "info"]},
                "timestamp": _ISO,
                "component": {"type": "string"},
                "group": {"type": "string"},
                "class": {"type": "string"},
                "custom_details": {"type": "object"},
            },
        },
    },
}
PAGERDUTY_RESOLVE = {
    "type": "object",
    "required": ["routing_key", "event_action", "dedup_key"],
    "additionalProperties": False,
    "properties": {
        "routing_key": {"type": "string", "minLength": 32, "maxLength": 32},
        "event_action": {"enum": ["acknowledge", "resolve"]},
        "dedup_key": {"type": "string", "minLength": 1, "maxLength": 255},
    },
}
# prometheus.io, Alertmanager configuration: the webhook_config body (version 4).
_WEBHOOK_ALERT = {
    "type": "object",
    "required": ["status", "labels", "annotations", "startsAt", "endsAt", "generatorURL",
                 "fingerprint"],
    "properties": {
        "status": {"enum": ["firing", "resolved"]},
        "labels": _STRINGS | {"required": ["alertname"]},
        "annotations": _STRINGS,
        "startsAt": _ISO,
        "endsAt": _ISO,
        "generatorURL": {"type": "string"},
        "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
    },
}  # fmt: skip
ALERTMANAGER_WEBHOOK = {
    "type": "object",
    "required": ["version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels",
                 "commonLabels", "commonAnnotations", "externalURL", "alerts"],
    "properties": {
        "version": {"const": "4"},
        "groupKey": {"type": "string", "minLength": 1},
        "truncatedAlerts": {"type": "integer", "minimum": 0},
        "status": {"enum": ["firing", "resolved"]},
        "receiver": {"type": "string"},
        "groupLabels": _STRINGS, "commonLabels": _STRINGS, "commonAnnotations": _STRINGS,
        "externalURL": {"type": "string"},
        "alerts": {"type": "array", "minItems": 1, "items": _WEBHOOK_ALERT},
    },
}  # fmt: skip
# Alertmanager's OpenAPI spec, postableAlerts: labels required, the rest optional.
ALERTMANAGER_API = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["labels"],
        "additionalProperties": False,
        "properties": {
            "labels": _STRINGS | {"minProperties": 1},
            "annotations": _STRINGS,
            "startsAt": _ISO,
            "endsAt": _ISO,
            "generatorURL": {"type": "string"},
        },
    },
}


@dataclass
class Received:
    path: str
    body: Any
    status: int


@dataclass
class PagerStandIn:
    """`kind`: "pagerduty", "webhook" or "api". `statuses`: answered first (then the peer's own
    verdict), to stand for an outage of the receiver."""

    kind: str
    statuses: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)

    def start(self) -> str:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                status, reply = stand_in._answer(self.path, raw)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        path = {"pagerduty": "/v2/enqueue", "api": "/api/v2/alerts"}.get(self.kind, "/hook")
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def accepted(self) -> list[Any]:
        return [r.body for r in self.got if r.status < 300]

    def _answer(self, path: str, raw: bytes) -> tuple[int, Any]:
        body = json.loads(raw)
        if self.statuses:
            status = self.statuses.pop(0)
            self.got.append(Received(path, body, status))
            return status, {"status": "unavailable"}
        problem = self._problem(body)
        status = 400 if problem else (202 if self.kind == "pagerduty" else 200)
        self.got.append(Received(path, body, status))
        if self.kind != "pagerduty":
            return status, {"error": problem} if problem else {}
        if problem:
            return status, {"status": "invalid event", "message": "Event object is invalid",
                            "errors": [problem]}  # fmt: skip
        return status, {"status": "success", "message": "Event processed",
                        "dedup_key": body.get("dedup_key")}  # fmt: skip

    def _problem(self, body: Any) -> str | None:
        schema = {"webhook": ALERTMANAGER_WEBHOOK, "api": ALERTMANAGER_API}.get(self.kind)
        if schema is None:
            action = body.get("event_action") if isinstance(body, dict) else None
            schema = PAGERDUTY_TRIGGER if action == "trigger" else PAGERDUTY_RESOLVE
        try:
            jsonschema.validate(body, schema)
        except jsonschema.ValidationError as error:
            return error.message
        return None
