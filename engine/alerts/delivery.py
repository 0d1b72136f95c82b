"""Webhook delivery: a sender thread, and the outbox that drives it (the bodies:
engine.alerts.payloads).

    lifecycle ──INSERT──► alert_notifications (pending) ──Outbox.dispatch──► Sender thread
         ▲                                                                     │ POST, timeout
         └────────────── delivered / retrying (backoff) / failed ◄── results ──┘

The scheduler's thread only reads and writes the outbox table; the HTTP calls happen on the
sender's own thread, so a receiver that hangs for its whole timeout delays nothing but its own
notifications. Results come back through a queue and are written on the next pass. A failed
delivery (timeout, connection refused, any non-2xx) is retried after BACKOFF_S, up to the
receiver's `max_attempts`, then marked failed with the last error: the dashboard lists it.
A 400 from PagerDuty fails at once: it says the event will never be taken as sent, and
PagerDuty's retry guide says not to repeat it. A firing alert is posted again to an
Alertmanager's API every RESEND_S while it fires (such a re-send is not a delivery: it
changes no row, and one that fails is tried again RESEND_S later). Delivery is at least
once: a receiver may see a retry of something it already got, so every payload carries the
notification's id (PagerDuty's `dedup_key`, Alertmanager's labels). A webhook URL is a
secret: it is read from the environment when sending and never stored, logged or shown
(errors name the receiver); so is a PagerDuty routing key, added to the body in `_post`.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import httpx

from engine.alerts import oncall_payloads
from engine.alerts.payloads import resends
from engine.config.alerting import Receiver

log = logging.getLogger("switchover.alerts")

BACKOFF_S = (10, 30, 60, 120, 300, 600)  # after the 1st, 2nd... failed delivery
# Alertmanager's clients re-send what still fires "every 30 s to 3 min", well inside its
# default resolve_timeout (5 min) after which an alert it has not heard of again resolves.
RESEND_S = 60.0
_RESEND = "resend:"  # the job id of a re-send: the notification's id after it
_EVERY = timedelta(seconds=RESEND_S)


# --- sending -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    notification_id: str
    receiver: Receiver
    body: str


@dataclass(frozen=True, slots=True)
class Result:
    notification_id: str
    ok: bool
    http_status: int | None
    error: str | None
    retry: bool = True  # False: failed for good, whatever attempts are left


def post(receiver: Receiver, body: str, environ: Mapping[str, str] | None = None) -> Result:
    """One delivery attempt, on the calling thread."""
    return _post(receiver, body, "", environ)


def _post(
    receiver: Receiver, body: str, notification_id: str, environ: Mapping[str, str] | None
) -> Result:
    environ = os.environ if environ is None else environ
    url = receiver.url or environ.get(receiver.url_env or "", "")
    if not url:
        return Result(notification_id, False, None, f"{receiver.url_env} is not set")
    if receiver.routing_key_env:  # PagerDuty: the key travels in the body, never stored
        routing_key = environ.get(receiver.routing_key_env, "")
        if not routing_key:
            return Result(notification_id, False, None, f"{receiver.routing_key_env} is not set")
        body = oncall_payloads.with_routing_key(body, routing_key)
    headers = {"content-type": "application/json", "user-agent": "switchover-alerts"}
    try:
        with httpx.Client(timeout=receiver.timeout_s) as client:
            response = client.post(url, content=body, headers=headers)
    except httpx.HTTPError as error:
        # The exception's text may contain the URL (a secret): keep its type only.
        return Result(notification_id, False, None, f"{type(error).__name__} ({receiver.name})")
    status = response.status_code
    if 200 <= status < 300:
        return Result(notification_id, True, status, None)
    if status == 400 and receiver.kind == "pagerduty":
        return Result(notification_id, False, status, _PD_REFUSED, retry=False)
    return Result(notification_id, False, status, f"HTTP {status}")


_PD_REFUSED = "HTTP 400: PagerDuty refused the event as invalid (not retried)"


class Sender:
    """One daemon thread that posts jobs in order; results wait in a queue for `results()`."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._results: queue.Queue[Result] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0
        self._thread = threading.Thread(target=self._run, name="switchover-alerts", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self._idle:
            self._pending += 1
        self._jobs.put(job)

    def results(self) -> list[Result]:
        done = []
        while True:
            try:
                done.append(self._results.get_nowait())
            except queue.Empty:
                return done

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has a result (shutdown, tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        self.wait_idle(timeout)
        self._jobs.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                result = _post(job.receiver, job.body, job.notification_id, self._environ)
            except Exception as error:  # never let the thread die: deliveries would stop
                log.exception("alert delivery to %s failed unexpectedly", job.receiver.name)
                result = Result(job.notification_id, False, None, type(error).__name__)
            self._results.put(result)
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()


# --- the outbox ----------------------------------------------------------------------------

_DUE = """
    SELECT notification_id, receiver, payload FROM alert_notifications
    WHERE status IN ('pending', 'retrying') AND next_attempt_at <= $now
    ORDER BY created_at, notification_id
"""
_DELIVERED = """
    UPDATE alert_notifications SET status = 'delivered', attempts = attempts + 1,
        delivered_at = $now, next_attempt_at = NULL, last_http_status = $status, last_error = NULL
    WHERE notification_id = $id
"""
_FAILED = """
    UPDATE alert_notifications SET attempts = attempts + 1, last_http_status = $status,
        last_error = $error,
        status = CASE WHEN attempts + 1 >= $max THEN 'failed' ELSE 'retrying' END,
        next_attempt_at = CASE WHEN attempts + 1 >= $max THEN NULL ELSE $retry_at END
    WHERE notification_id = $id
"""
_ATTEMPTS = "SELECT attempts, receiver FROM alert_notifications WHERE notification_id = $id"
_STILL_FIRING = """
    SELECT n.notification_id, n.receiver, n.payload, n.delivered_at
    FROM alert_notifications n JOIN alerts a ON a.alert_id = n.alert_id
    WHERE n.event = 'firing' AND n.status = 'delivered' AND a.state = 'firing'
        AND list_contains($receivers, n.receiver)
    ORDER BY n.created_at, n.notification_id
"""


class Outbox:
    """Sends due notifications through a Sender and records what became of them."""

    def __init__(
        self,
        receivers: tuple[Receiver, ...],
        sender: Sender | None = None,
        *,
        sender_factory: Callable[[], Sender] = Sender,
    ) -> None:
        self.receivers = {r.name: r for r in receivers}
        self._sender = sender
        self._sender_factory = sender_factory
        self._in_flight: set[str] = set()
        self._resent: dict[str, datetime] = {}  # notification id → when it was last posted

    @property
    def sender(self) -> Sender:
        if self._sender is None:  # no thread at all for a config without receivers
            self._sender = self._sender_factory()
        return self._sender

    def dispatch(self, con: duckdb.DuckDBPyConnection, now: datetime) -> int:
        """Record the results that came back, then hand every due notification to the
        sender, and what must be posted again (`_resend`); the number of notifications
        handed over."""
        if self._sender is not None:
            for result in self._sender.results():
                if result.notification_id.startswith(_RESEND):
                    self._resent_result(result)
                else:
                    self._record(con, result, now)
        sent = 0
        for notification_id, receiver_name, body in con.execute(_DUE, {"now": now}).fetchall():
            if notification_id in self._in_flight:
                continue
            receiver = self.receivers.get(receiver_name)
            if receiver is None:  # removed from the config since: nobody to send it to
                self._record(con, Result(notification_id, False, None, "receiver removed"), now, 1)
                continue
            self._in_flight.add(notification_id)
            self.sender.submit(Job(notification_id, receiver, body))
            sent += 1
        self._resend(con, now)
        return sent

    def _resend(self, con: duckdb.DuckDBPyConnection, now: datetime) -> None:
        """Post each delivered "firing" of an alert that still fires again, to the receivers
        that need it (engine.alerts.payloads.resends), once every RESEND_S."""
        names = [name for name, receiver in self.receivers.items() if resends(receiver)]
        if not names:
            return
        rows = con.execute(_STILL_FIRING, {"receivers": names}).fetchall()
        self._resent = {nid: self._resent.get(nid, at) for nid, _, _, at in rows}
        for notification_id, receiver_name, body, _ in rows:
            job_id = _RESEND + notification_id
            if job_id in self._in_flight or now - self._resent[notification_id] < _EVERY:
                continue
            self._resent[notification_id] = now
            self._in_flight.add(job_id)
            self.sender.submit(Job(job_id, self.receivers[receiver_name], body))

    def _resent_result(self, result: Result) -> None:
        self._in_flight.discard(result.notification_id)
        if not result.ok:
            log.warning("alert %s not re-sent: %s", result.notification_id, result.error)

    def close(
        self,
        timeout: float = 10.0,
        con: duckdb.DuckDBPyConnection | None = None,
        now: datetime | None = None,
    ) -> None:
        """Wait for the deliveries under way and, given the connection, record what became of
        them: a notification delivered just before a restart is not sent again by the next
        process (only one cut off mid-post, by a crash, can be)."""
        if self._sender is None:
            return
        self._sender.close(timeout)
        if con is None:
            return
        for result in self._sender.results():
            if result.notification_id.startswith(_RESEND):
                self._resent_result(result)
            else:
                self._record(con, result, now or datetime.now(UTC))

    def _record(
        self, con: duckdb.DuckDBPyConnection, result: Result, now: datetime, max_attempts: int = 0
    ) -> None:
        self._in_flight.discard(result.notification_id)
        params = {"id": result.notification_id, "now": now, "status": result.http_status}
        if result.ok:
            con.execute(_DELIVERED, params)
            return
        row = con.execute(_ATTEMPTS, {"id": result.notification_id}).fetchone()
        if row is None:
            return
        failures, receiver = row[0] + 1, self.receivers.get(row[1])
        limit = max_attempts or (receiver.max_attempts if receiver else 1)
        limit = limit if result.retry else failures
        retry_at = now + timedelta(seconds=BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])
        con.execute(
            _FAILED,
            {k: v for k, v in params.items() if k != "now"}
            | {"error": result.error, "max": limit, "retry_at": retry_at},
        )
        log.warning(
            "alert notification %s not delivered (attempt %d of %d): %s",
            result.notification_id,
            failures,
            limit,
            result.error,
        )
