"""How every reply leaves the gateway: as JSON in the caller's dialect, with the request id
header, its message scrubbed of provider keys, and the request counted once in the metrics.

`Call` is one request's labels, filled in as it goes; `Replies` answers it, a failure
(`engine.gateway.errors.Failure`) as the error body the caller's SDK parses. Requests to a path
of neither face (an unknown endpoint, a 405, a crash) are answered in the dialect their headers
suggest. No routing and no chain here: the app decides what to answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from engine.core.attempt import Attempt
from engine.core.errors import ChainError
from engine.core.messages import StreamError
from engine.gateway.dialects.anthropic import ANTHROPIC
from engine.gateway.dialects.base import Dialect, dumps
from engine.gateway.dialects.openai import OPENAI
from engine.gateway.errors import Failure, failure_for, local
from engine.gateway.httputil import route_headers
from engine.gateway.observability import Metrics
from engine.runtime.switchover import Switchover

__all__ = ["Call", "Replies", "face_of", "unauthorized"]

log = logging.getLogger("switchover.gateway")


@dataclass
class Call:
    """One request's labels, filled in as it goes."""

    dialect: Dialect
    request_id: str
    started: float
    route: str = "-"
    stream: bool = False

    @classmethod
    def begin(cls, dialect: Dialect) -> Call:
        return cls(dialect, "req_" + uuid.uuid4().hex[:24], time.perf_counter())

    @property
    def id_header(self) -> str:
        return "request-id" if self.dialect.name == "anthropic" else "x-request-id"


class Replies:
    def __init__(self, sw: Switchover, metrics: Metrics) -> None:
        self.sw = sw
        self.metrics = metrics
        self._scrub = sw.scrub

    async def chain_failed(self, call: Call, exc: ChainError) -> Response:
        breakers = await self.sw.breakers.snapshot_all()
        failure = failure_for(exc, call.dialect.name, breakers=breakers, now=self.sw.clock.now())
        log.info(
            "request %s on route %s not answered: %s %s",
            call.request_id,
            call.route,
            failure.status,
            self._scrub(failure.message),
        )
        await self.metrics.refresh_breakers(self.sw.breakers, {a.target for a in exc.attempts})
        headers = route_headers(call.route, None, None, len(exc.attempts), None)
        return self.fail(call, failure, headers=headers)

    def fail(
        self,
        call: Call,
        failure: Failure,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        body = call.dialect.error_body(
            status=failure.status,
            error_type=failure.error_type,
            message=self._scrub(failure.message),
            code=failure.code,
            param=failure.param,
            request_id=call.request_id,
        )
        self.done(call, failure.cause)
        return self.json(call, failure.status, body, {**failure.headers(), **(headers or {})})

    def json(
        self, call: Call, status: int, body: Any, headers: Mapping[str, str] | None = None
    ) -> Response:
        headers = {call.id_header: call.request_id, **(headers or {})}
        return Response(
            dumps(body), status_code=status, headers=headers, media_type="application/json"
        )

    async def after(
        self, call: Call, outcome: str, *, fallback: bool, attempts: tuple[Attempt, ...]
    ) -> None:
        self.done(call, outcome, fallback=fallback)
        touched = {
            a.target for a in attempts if a.outcome != "success" or a.breaker_state != "closed"
        }
        if touched:
            await self.metrics.refresh_breakers(self.sw.breakers, touched)

    def done(self, call: Call, outcome: str, *, fallback: bool = False) -> None:
        self.metrics.request_done(
            route=call.route,
            dialect=call.dialect.name,
            outcome=outcome,
            seconds=time.perf_counter() - call.started,
            stream=call.stream,
            fallback=fallback,
        )

    def scrubbed(self, event: StreamError) -> StreamError:
        """The in-band error, without any provider key its message may quote."""
        return StreamError(
            event.error_class, self._scrub(event.message), event.error_type, event.attempts
        )

    def other_fail(
        self, request: Request, status: int, headers: dict[str, str] | None = None
    ) -> Response:
        """A request to no face, or one the app could not serve, in the dialect it looks like."""
        dialect = face_of(request)
        call = Call.begin(dialect)
        method, path = request.method, request.url.path
        if status == 401:
            failure = unauthorized(dialect.name)
        elif status == 404:
            failure = local(
                dialect.name, 404, f"unknown endpoint {method} {path}", cause="not_found"
            )
        elif status == 405:
            failure = local(dialect.name, 405, f"method {method} not allowed on {path}")
        else:
            failure = local(dialect.name, status, "internal error in the gateway", cause="error")
        return self.fail(call, failure, headers=headers)


def unauthorized(face: str) -> Failure:
    message = "missing or invalid gateway key: send it as x-api-key or Authorization: Bearer"
    code = "invalid_api_key" if face == "openai" else None
    return local(face, 401, message, code=code, cause="unauthorized")


def face_of(request: Request) -> Dialect:
    """The dialect of a request to a path of neither face: Anthropic's SDK sends
    anthropic-version and x-api-key, OpenAI's neither."""
    path = request.url.path.rstrip("/")
    if path == ANTHROPIC.path:
        return ANTHROPIC
    if path == OPENAI.path:
        return OPENAI
    headers = request.headers
    return ANTHROPIC if "anthropic-version" in headers or "x-api-key" in headers else OPENAI
