"""The gateway: the Starlette app that speaks both dialects to callers and the chain to providers.

    POST /v1/chat/completions   OpenAI face      POST /v1/messages   Anthropic face
    GET  /v1/models             the routes, in a shape both official SDKs' models.list() read
    GET  /v1/status             routes and breakers (JSON)
    GET  /admin/targets, POST /admin/targets/{disable,enable}   operator switches (admin.py)
    GET  /healthz  /readyz  /metrics

One request, one concern per step: the face (by path) → method → gateway key → content type
→ body size → `dialect.parse` → `Switchover.chain(model)` → a hard-capped budget that is
spent refuses (`engine.gateway.budget_guard`) → the chain → `dialect.encode`. The gateway key's
label, when it has one, goes on the request as `key_label`.
Every error goes out in the caller's dialect, as JSON, with the request id header
(`engine.gateway.replies`); bad input is always a 4xx. Statuses for failed chains come from
`engine.gateway.errors.failure_for`.

A stream's head is held until the chain yields `StreamStart` (the first content): until then
a failure is still a typed HTTP error and fallback stays invisible. After it, a failure is
the dialect's in-band error event and the stream ends cleanly (`engine.gateway.streaming`). A
caller who hangs up stops the chain (the attempt is recorded as cancelled).

Never here: provider JSON (the dialects' job), provider keys in any answer or log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from engine.core.errors import ChainError, ConfigError
from engine.core.messages import Response as Answer
from engine.core.messages import StreamStart
from engine.core.pricing import Pricer
from engine.fallback.chain import Chain
from engine.gateway.admin import admin_routes
from engine.gateway.budget_guard import BudgetGuard
from engine.gateway.dialects.anthropic import ANTHROPIC
from engine.gateway.dialects.base import BadRequest, Dialect, Parsed, dumps
from engine.gateway.dialects.openai import OPENAI
from engine.gateway.errors import local
from engine.gateway.httputil import (
    GONE,
    caller_budget_s,
    header_safe,
    key_accepted,
    matched_key,
    read_body,
    route_headers,
    unless_disconnected,
)
from engine.gateway.learned_refresh import learning
from engine.gateway.observability import (
    CONTENT_TYPE,
    Metrics,
    breakers_shared,
    models_document,
    status_document,
)
from engine.gateway.protocol import OriginForm
from engine.gateway.replies import Call, Replies, unauthorized
from engine.gateway.streaming import CommittedStream
from engine.runtime.switchover import Switchover

log = logging.getLogger("switchover.gateway")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # Anthropic's own limit for Messages
_JSON_TYPES = ("application/json",)


@dataclass(frozen=True)
class GatewaySettings:
    keys: frozenset[str] = frozenset()  # empty: no auth (loopback development only)
    # key → label, for the keys given as `label:secret` (engine.gateway.server.key_labels):
    # the label goes on the request and its every attempt as `key_label`; never the key.
    labels: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    admin_keys: frozenset[str] = frozenset()  # for /admin/* (engine.gateway.admin)


def create_app(
    sw: Switchover,
    settings: GatewaySettings | None = None,
    *,
    owns: bool = False,
) -> Starlette:
    """The ASGI app over `sw` (whose scrubber keeps its providers' keys out of every message);
    `owns`: close `sw` when the app shuts down."""
    gateway = Gateway(sw, settings or GatewaySettings())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pricer = sw.recorder.pricer if sw.recorder is not None else None
        if isinstance(pricer, Pricer):  # before the recorder's first flush, not during it
            await asyncio.to_thread(pricer.warm)
        async with learning(sw):
            yield
        if owns:
            await sw.aclose()

    settings = gateway.settings
    admin = admin_routes(sw, admin_keys=settings.admin_keys, gateway_keys=settings.keys)
    routes = [
        *admin,
        Route(OPENAI.path, gateway.openai, methods=["POST"]),
        Route(ANTHROPIC.path, gateway.anthropic, methods=["POST"]),
        Route("/v1/models", gateway.models, methods=["GET"]),
        Route("/v1/status", gateway.status, methods=["GET"]),
        Route("/healthz", gateway.healthz, methods=["GET"]),
        Route("/readyz", gateway.readyz, methods=["GET"]),
        Route("/metrics", gateway.metrics_text, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: gateway.http_error, Exception: gateway.crashed},
        middleware=[Middleware(OriginForm)],  # `POST http://host/v1/messages` is /v1/messages
    )
    app.state.gateway = gateway
    return app


class Gateway:
    def __init__(self, sw: Switchover, settings: GatewaySettings) -> None:
        self.sw = sw
        self.settings = settings
        self.metrics = Metrics(recorder=sw.recorder, breakers_shared=breakers_shared(sw.breakers))
        self.replies = Replies(sw, self.metrics)
        self.started = int(time.time())
        sw.add_hook(self.metrics.on_attempt)
        self.budgets = BudgetGuard.for_gateway(sw)  # None: no budget has a hard cap

    # --- the two faces -----------------------------------------------------------------

    async def openai(self, request: Request) -> Response:
        return await self._serve(request, OPENAI)

    async def anthropic(self, request: Request) -> Response:
        return await self._serve(request, ANTHROPIC)

    async def _serve(self, request: Request, dialect: Dialect) -> Response:
        call = Call.begin(dialect)
        try:
            return await self._answer(request, call)
        except ClientDisconnect:  # gone mid-upload: nobody to answer
            self.replies.done(call, "cancelled")
            return Response(status_code=499)
        except Exception:
            log.exception("gateway error on %s (request %s)", request.url.path, call.request_id)
            failure = local(dialect.name, 500, "internal error in the gateway", cause="error")
            return self.replies.fail(call, failure)

    async def _answer(self, request: Request, call: Call) -> Response:
        face = call.dialect.name
        key = matched_key(request.headers, self.settings.keys)
        if key is None and self.settings.keys:
            return self.replies.fail(call, unauthorized(face))
        media = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if media.lower() not in _JSON_TYPES:
            message = f"unsupported content-type {media!r}: send application/json"
            return self.replies.fail(call, local(face, 415, message))
        timeout_s = self.sw.config.gateway.body_timeout_s
        try:
            body = await read_body(request, self.settings.max_body_bytes, timeout_s)
        except TimeoutError:  # the rest of the body is never read: the connection must close
            message = f"the request body did not arrive within {timeout_s:g} s"
            return self.replies.fail(
                call, local(face, 408, message), headers={"connection": "close"}
            )
        if body is None:
            limit_mb = self.settings.max_body_bytes / 1024 / 1024
            message = f"request body too large: the limit is {limit_mb:g} MB"
            return self.replies.fail(call, local(face, 413, message))
        try:
            parsed = call.dialect.parse(body, request.headers)
        except BadRequest as exc:
            status = exc.status if 400 <= exc.status < 500 else 400
            return self.replies.fail(
                call, local(face, status, exc.message, code=exc.code, param=exc.param)
            )
        except ValueError as exc:  # a neutral type refusing a value the dialect let through
            return self.replies.fail(call, local(face, 400, str(exc)))
        if key is not None and key in self.settings.labels:
            labelled = parsed.request.replace(key_label=self.settings.labels[key])
            parsed = replace(parsed, request=labelled)
        try:
            chain = self.sw.chain(parsed.model)
        except ConfigError as exc:
            failure = local(
                face, 404, str(exc), code="model_not_found", param="model", cause="not_found"
            )
            return self.replies.fail(call, failure)
        call.route, call.stream = chain.route, parsed.request.stream
        if self.budgets and (spent := await self.budgets.check(chain.route, parsed.request)):
            return self.replies.fail(call, spent.failure(face, self.sw.clock.wall()))
        if call.stream:
            return await self._stream(request, call, chain, parsed)
        return await self._complete(request, call, chain, parsed)

    async def _complete(
        self, request: Request, call: Call, chain: Chain, parsed: Parsed
    ) -> Response:
        try:
            answer = await unless_disconnected(
                request,
                chain.complete(
                    parsed.request,
                    request_id=call.request_id,
                    budget_s=caller_budget_s(request.headers),
                ),
            )
        except ChainError as exc:
            return await self.replies.chain_failed(call, exc)
        if answer is GONE:
            self.replies.done(call, "cancelled")
            return Response(status_code=499)
        assert isinstance(answer, Answer)
        body = call.dialect.encode(answer, model=answer.model, request_id=call.request_id)
        served = next((a for a in answer.attempts if a.served), None)
        headers = route_headers(
            answer.route,
            answer.provider,
            served.model if served else answer.model,
            len(answer.attempts),
            answer.fallback_depth > 0,
        )
        if answer.quality_error is not None:  # returned as the route asks, flagged for the caller
            headers["x-switchover-quality-error"] = header_safe(answer.quality_error[:200])
        await self.replies.after(
            call, "ok", fallback=answer.fallback_depth > 0, attempts=answer.attempts
        )
        return self.replies.json(call, 200, body, headers)

    async def _stream(self, request: Request, call: Call, chain: Chain, parsed: Parsed) -> Response:
        """Hold the head until the chain commits (StreamStart, just before the first content),
        then stream; the body closes the chain's stream however the response ends."""
        events = chain.stream(
            parsed.request, request_id=call.request_id, budget_s=caller_budget_s(request.headers)
        )
        try:
            first = await unless_disconnected(request, anext(events))
        except ChainError as exc:
            await events.aclose()
            return await self.replies.chain_failed(call, exc)
        if first is GONE:
            await events.aclose()
            self.replies.done(call, "cancelled")
            return Response(status_code=499)
        assert isinstance(first, StreamStart), first
        ttft = time.perf_counter() - call.started
        self.metrics.first_token(route=call.route, dialect=call.dialect.name, seconds=ttft)
        encoder = call.dialect.stream_encoder(
            model=first.model, request_id=call.request_id, include_usage=parsed.include_usage
        )
        return CommittedStream(call, events, first, encoder, self.replies).response()

    # --- the other endpoints -----------------------------------------------------------

    async def models(self, request: Request) -> Response:
        if not key_accepted(request.headers, self.settings.keys):
            return self.replies.other_fail(request, 401)
        return self._plain(models_document(self.sw, self.started))

    async def status(self, request: Request) -> Response:
        if not key_accepted(request.headers, self.settings.keys):
            return self.replies.other_fail(request, 401)
        return self._plain(await status_document(self.sw))

    async def healthz(self, request: Request) -> Response:
        return self._plain({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        routes = len(self.sw.config.routes)
        status = 200 if routes else 503
        body = {"status": "ready" if routes else "no routes configured", "routes": routes}
        return self._plain(body, status)

    async def metrics_text(self, request: Request) -> Response:
        """Target names, traffic, costs and breaker states are for the operator: with gateway
        keys set, a scrape presents one (Prometheus: `authorization: {credentials: ...}`), or
        an admin key."""
        keys = self.settings.keys | self.settings.admin_keys
        if self.settings.keys and not key_accepted(request.headers, keys):
            return self.replies.other_fail(request, 401)
        await self.metrics.refresh_breakers(self.sw.breakers)
        self.metrics.refresh_recorder(self.sw.recorder)
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    @staticmethod
    def _plain(body: Any, status: int = 200) -> Response:
        return Response(dumps(body), status_code=status, media_type="application/json")

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Starlette's own 404 (unknown path) and 405 (wrong method), in the caller's dialect."""
        assert isinstance(exc, HTTPException)
        return self.replies.other_fail(request, exc.status_code, dict(exc.headers or {}))

    async def crashed(self, request: Request, exc: Exception) -> Response:
        log.error("unhandled gateway error on %s", request.url.path, exc_info=exc)
        return self.replies.other_fail(request, 500)
