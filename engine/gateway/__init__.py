"""The HTTP gateway: OpenAI- and Anthropic-dialect endpoints in front of the engine.

    app.py            the Starlette app (create_app, GatewaySettings): a request's steps
    replies.py        every reply in the caller's dialect, scrubbed, counted once
    streaming.py      a committed stream, from its head to its last byte
    stream_log.py     log lines about streams that failed or were continued after their start
    admin.py          /admin/*: operator switches and drills
    dialects/         callers' wire formats in and out (no I/O)
    errors.py         a failed chain → the status and error a caller's SDK can act on
    httputil.py       body limits, hang-ups, closing streams, header values, keys, scrubbing
    observability.py  Prometheus metrics and the /v1/status and /v1/models documents
    protocol.py       the guarded HTTP protocol: slow callers, connection caps
    server.py         `switchover serve`: uvicorn, workers, settings from the environment

Imports are lazy so that `engine.gateway.dialects` and `engine.gateway.errors` load without
Starlette's app machinery.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GatewaySettings", "create_app", "failure_for"]


def __getattr__(name: str) -> Any:
    if name in ("GatewaySettings", "create_app"):
        from engine.gateway import app

        return getattr(app, name)
    if name == "failure_for":
        from engine.gateway.errors import failure_for

        return failure_for
    raise AttributeError(f"module 'engine.gateway' has no attribute {name!r}")
