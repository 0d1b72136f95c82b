"""The gateway's operator endpoints: turn a target off during an incident, and back on.

    GET  /admin/targets            every route's targets in the order a request would try
                                   them now, and the operator switches in force
    POST /admin/targets/disable    {"target": "provider/model", "route"?: "...", "reason"?: "..."}
    POST /admin/targets/enable     {"target": "provider/model", "route"?: "..."}
    GET  /admin/drills             the fault drills running
    POST /admin/drills/start       {"route": "...", "target": "provider/model", "for_s": 300,
                                    "force"?: true}   409 when its pre-flight finds no other
                                   target of the route healthy (the message says why), unless
                                   forced
    POST /admin/drills/end         {"drill_id": "..."}          (engine.state.drills)

A switch is kept where every gateway process reads it (`Switchover.switches`: the data folder's
control file, or Redis when configured), so a call to one worker turns the target off for all.
Access: an admin key (`SWITCHOVER_ADMIN_KEYS`, as `x-api-key` or `Authorization: Bearer`).
Without admin keys the endpoints answer only a gateway that has no keys at all (loopback
development); a caller's gateway key never unlocks them. Answers and errors are plain JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.core import bounded_json
from engine.gateway.dialects.base import dumps
from engine.gateway.httputil import key_accepted
from engine.runtime.drills import DrillError, DrillRefused, active_drills, end_drill, start_drill
from engine.runtime.switchover import Switchover

log = logging.getLogger("switchover.gateway")

ADMIN_KEYS_ENV = "SWITCHOVER_ADMIN_KEYS"
_MAX_BODY = 16 * 1024


def admin_routes(
    sw: Switchover, *, admin_keys: Collection[str], gateway_keys: Collection[str]
) -> list[Route]:
    admin = _Admin(sw, frozenset(admin_keys), frozenset(gateway_keys))
    return [
        Route("/admin/targets", admin.targets, methods=["GET"]),
        Route("/admin/targets/disable", admin.disable, methods=["POST"]),
        Route("/admin/targets/enable", admin.enable, methods=["POST"]),
        Route("/admin/drills", admin.drills, methods=["GET"]),
        Route("/admin/drills/start", admin.start_drill, methods=["POST"]),
        Route("/admin/drills/end", admin.end_drill, methods=["POST"]),
    ]


class _Admin:
    def __init__(self, sw: Switchover, admin_keys: frozenset[str], gateway_keys: frozenset[str]):
        self.sw = sw
        self.admin_keys = admin_keys
        self.gateway_keys = gateway_keys

    async def targets(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        switches = self.sw.switches
        entries = await switches.entries() if switches is not None else []
        routes = {}
        for name in self.sw.config.routes:
            chain = self.sw.chain(name)
            disabled = await switches.disabled(name) if switches is not None else frozenset()
            order = await chain.order.arrange(name, chain.targets) if chain.order else chain.targets
            routes[name] = {
                "order_now": [t.name for t in order],
                "disabled": sorted(t.name for t in chain.targets if t.name in disabled),
            }
        return _json({"switches": entries, "routes": routes})

    async def disable(self, request: Request) -> Response:
        return await self._switch(request, enable=False)

    async def enable(self, request: Request) -> Response:
        return await self._switch(request, enable=True)

    async def _switch(self, request: Request, *, enable: bool) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        switches = self.sw.switches
        if switches is None:
            return _error(409, "no place to keep switches: run the gateway with a data folder")
        body, problem = await _body(request)
        if problem is not None:
            return _error(400, problem)
        target, route, reason = body.get("target"), body.get("route"), body.get("reason", "")
        problem = _check(self.sw, target, route, reason)
        if problem is not None:
            return _error(404 if "unknown" in problem else 400, problem)
        if enable:
            await switches.enable(target, route=route)
        else:
            by = request.client.host if request.client else ""
            await switches.disable(target, route=route, reason=reason, by=f"admin api ({by})")
        where = f"route {route}" if route else "every route"
        log.warning("target %s %s for %s", target, "enabled" if enable else "disabled", where)
        return _json({"switches": await switches.entries()})

    async def drills(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        return _json({"drills": [d.as_json() for d in await active_drills(self.sw)]})

    async def start_drill(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body, problem = await _body(request)
        seconds, force = body.get("for_s"), body.get("force", False)
        # A number a timedelta can hold (NaN and 1e300 cannot); how long is start_drill's call.
        usable = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        if problem is None and not (usable and abs(seconds) < 1e9):  # NaN fails the comparison
            problem = "give the drill's length in seconds as for_s"
        if problem is None and not isinstance(force, bool):
            problem = "force must be true or false"
        if problem is not None:
            return _error(400, problem)
        by = request.client.host if request.client else ""
        try:
            drill = await start_drill(
                self.sw,
                str(body.get("route", "")),
                str(body.get("target", "")),
                timedelta(seconds=seconds),
                by=str(body.get("by") or f"admin api ({by})"),
                now=self.sw.clock.wall(),
                force=force,
            )
        except DrillRefused as exc:
            log.warning(
                "drill of %s on route %s refused: %s", body.get("target"), body.get("route"), exc
            )
            return _error(409, str(exc), "drill_refused")
        except DrillError as exc:
            return _error(404 if "unknown" in str(exc) else 409, str(exc))
        log.warning(
            "drill %s: %s fails on route %s until %s%s",
            drill.drill_id,
            drill.target,
            drill.route,
            drill.ends_at.isoformat(),
            f" (forced past its pre-flight: {drill.preflight})" if drill.forced else "",
        )
        return _json({"drill": drill.as_json()})

    async def end_drill(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body, problem = await _body(request)
        if problem is not None:
            return _error(400, problem)
        try:
            drill = await end_drill(
                self.sw, str(body.get("drill_id", "")), now=self.sw.clock.wall()
            )
        except DrillError as exc:
            return _error(404, str(exc))
        log.warning(
            "drill %s ended: %s restored on route %s", drill.drill_id, drill.target, drill.route
        )
        return _json({"drill": drill.as_json()})

    def _refused(self, request: Request) -> Response | None:
        if self.admin_keys:
            if key_accepted(request.headers, self.admin_keys):
                return None
            return _error(401, "missing or invalid admin key (x-api-key or Authorization: Bearer)")
        if self.gateway_keys:
            return _error(403, f"the admin endpoints need an admin key: set {ADMIN_KEYS_ENV}")
        return None  # no keys at all: a loopback development gateway (server.check_bind)


def _check(sw: Switchover, target: Any, route: Any, reason: Any) -> str | None:
    if not isinstance(target, str) or not target:
        return 'give the target as "provider/model"'
    if route is not None and route not in sw.config.routes:
        return f"unknown route {route!r} (routes: {', '.join(sorted(sw.config.routes))})"
    known = {t.name for r in sw.config.routes.values() for t in r.targets}
    if route is not None:
        known = {t.name for t in sw.config.routes[route].targets}
    if target not in known:
        return f"unknown target {target!r} (targets: {', '.join(sorted(known))})"
    if not isinstance(reason, str):
        return "reason must be a string"
    return None


async def _body(request: Request) -> tuple[dict[str, Any], str | None]:
    """The body as a JSON object of plain values: an operator's fields are strings and
    numbers, so anything nested deeper than a few levels is refused with them."""
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        return {}, "request body too large"
    try:
        body = bounded_json.loads(raw or b"{}", max_depth=4)
    except bounded_json.JsonRejected as exc:
        return {}, f"the body is not JSON an admin call takes: {exc.message}"
    if not isinstance(body, dict):
        return {}, "the body must be a JSON object"
    for key in ("target", "route", "reason", "by", "drill_id"):
        if body.get(key) is not None and not isinstance(body[key], str):
            return {}, f"{key} must be a string"
    return body, None


def _json(body: Any, status: int = 200) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json")


def _error(status: int, message: str, kind: str = "admin_error") -> Response:
    return _json({"error": {"message": message, "type": kind}}, status)
