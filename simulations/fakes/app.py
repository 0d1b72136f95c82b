"""The fake providers' request handling, shared by the socket server and the httpx transport.

`FakeApp.handle` takes a parsed HTTP request and returns the `Reply` to send: it routes the
dialect endpoints (`POST /v1/messages`, `POST /v1/chat/completions`, `POST /chat/completions`)
and the control endpoints under `/_fake/`, chooses the fault, checks the key and the request
the way the real API does, renders the answer, and logs the call. It never touches a socket
and never sleeps: the waits are part of the `Reply`.

A provider is a base URL: the request's host and whatever path comes before the endpoint
(`http://127.0.0.1:8700/eu/v1/messages` reaches the provider "127.0.0.1:8700/eu"). Each has
prompt caches of its own (`simulations.fakes.cache`), and the log names it on every call.

Choosing a fault per request: the `x-fake-fault` header, or a model named `<model>#<spec>`
(e.g. "claude-sonnet-4-5#529", "gpt-4o#rate_limit:retry_after=3"; the part before `#` is the
model the answer names; `#` because no real model id contains it, while Vertex ids contain
`@`), or the scripts and schedules of `control.py`. A request the real API
would reject is answered 400 whatever the fault, so translation bugs stay visible.

Control endpoints (JSON bodies):
    POST /_fake/script    {"model": "*", "faults": [spec, ...], "cycle": false, "append": false,
                           "default": spec?}
    POST /_fake/schedule  {"model": "*", "windows": [{"start_s", "end_s", "fault", "rate"?}],
                           "flapping": [{"period_s", "down_s", "fault", "rate"?, "offset_s"?}]}
    POST /_fake/latency   {"model": "*", "fixed_ms"? | "median_ms" + "p99_ms"?,
                           "token_interval_ms"?}
    POST /_fake/config    {"default_fault"?, "valid_keys"?, "reply_text"?, "cache_hit_ratio"?}
    POST /_fake/poison    {"text": "...", "fault": spec}: a body containing the text gets the
                          fault on every model (a payload the provider fails whoever sends it)
    POST /_fake/reset     forget scripts, schedules, latency, the log and the prompt caches
    GET  /_fake/log       [call, ...] (?model=&dialect=&provider= filter); GET /_fake/health;
    GET  /_fake/faults    the catalogue
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import parse_qs

from engine.core.clock import Clock, SystemClock
from simulations.fakes import anthropic, openai
from simulations.fakes.cache import PromptCache
from simulations.fakes.control import Controls, Spec
from simulations.fakes.faults import CATALOGUE, ErrorShape, Fault, FaultSpec, parse_spec
from simulations.fakes.model import Ids, make_answer
from simulations.fakes.render import JSON, Context, error_reply, render
from simulations.fakes.reply import Reply

T = TypeVar("T")

ROUTES: Mapping[str, ModuleType] = {
    "/v1/messages": anthropic,
    "/v1/chat/completions": openai,
    "/chat/completions": openai,
}
_ENDPOINTS = sorted(ROUTES, key=len, reverse=True)  # /v1/chat/completions before /chat/...
_BEFORE_CONNECT = {"connect_refused", "connect_timeout", "dns_failure", "tls_failure"}


@dataclass(frozen=True)
class Incoming:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes = b""
    query: str = ""


@dataclass(frozen=True)
class Call:
    """One provider request the fake received, as `GET /_fake/log` lists it."""

    seq: int
    time: float  # the injected clock's now()
    wall: str
    path: str
    provider: str  # the base URL it reached, as host and path prefix: "127.0.0.1:8700"
    dialect: str
    model: str | None
    stream: bool
    fault: str
    source: str  # header, model, script, schedule, default, rate (drawn healthy), invalid
    status: int | None  # None: the connection was dropped before any status
    request_id: str
    paid: bool  # the fake ran the model, so a provider would have billed the work
    # input_tokens counts every prompt token, the cached ones included (unlike Anthropic's
    # wire field): cache_read_tokens and cache_write_tokens are parts of it.
    usage: dict[str, int] | None = None
    request: Any = field(default=None, repr=False)


class FakeApp:
    def __init__(
        self,
        *,
        clock: Clock | None = None,
        seed: int = 0,
        valid_keys: Iterable[str] | None = None,
        reply_text: str | None = None,
        default_fault: Spec = "ok",
        cache_hit_ratio: float | None = None,
        log_limit: int | None = 100_000,
    ) -> None:
        """`log_limit`: the call log keeps only the latest calls, so a long simulation does not
        hold every request body in memory (0 keeps none, None every one)."""
        self.clock = clock or SystemClock()
        self.rng = random.Random(seed)
        self.ids = Ids(self.rng)
        self.controls = Controls(self.clock, self.rng, default_fault)
        self.cache = PromptCache(cache_hit_ratio, now=self.clock.now)
        self.valid_keys = set(valid_keys) if valid_keys is not None else None
        self.reply_text = reply_text
        self.log: deque[Call] = deque(maxlen=log_limit)
        self._seq = 0

    def reset(self) -> None:
        self.controls.clear()
        self.cache.clear()
        self.log.clear()

    def calls(
        self, model: str | None = None, dialect: str | None = None, provider: str | None = None
    ) -> list[Call]:
        return [
            c
            for c in self.log
            if (model is None or c.model == model)
            and (dialect is None or c.dialect == dialect)
            and (provider is None or c.provider == provider)
        ]

    def handle(self, request: Incoming) -> Reply:
        if request.path.startswith("/_fake/"):
            return self._control(request)
        dialect, prefix = _endpoint(request.path)
        if dialect is None or request.method != "POST":
            status = 404 if dialect is None else 405
            error = {
                "message": f"Unknown request URL: {request.method} {request.path}.",
                "type": "invalid_request_error",
            }
            return Reply(status, [JSON], json.dumps({"error": error}).encode())
        return self._provider(dialect, request, request.headers.get("host", "") + prefix)

    def _provider(self, dialect: ModuleType, request: Incoming, provider: str) -> Reply:
        request_id = self.ids.request(dialect.NAME)
        body, model, spec, source, problem = self._admit(dialect, request)
        ctx = None
        if problem is not None:
            reply = self._error(dialect, problem, request_id)
        else:
            ctx = self._context(dialect, body, model or "", request_id, provider)
            try:
                reply = render(spec, ctx)
            except ValueError as e:  # a fault parameter out of range
                reply = error_reply(ctx, _fake_problem(e))
        if spec.name not in _BEFORE_CONNECT:
            reply.head_delay += self.controls.head_delay(model or "")
        if reply.abort is None:
            reply.headers.append((dialect.REQUEST_ID_HEADER, request_id))
        self._record(request, provider, dialect, model, body, spec, source, reply, request_id, ctx)
        return reply

    def _admit(
        self, dialect: ModuleType, request: Incoming
    ) -> tuple[Any, str | None, FaultSpec, str, ErrorShape | None]:
        """Parse the body, choose the fault, then check the key and the request."""
        ok = parse_spec("ok")
        try:
            body = json.loads(request.body)
        except ValueError:
            return None, None, ok, "invalid", _unparsable(dialect)
        if not isinstance(body, dict):
            return body, None, ok, "invalid", _unparsable(dialect)
        model, model_spec = _split_model(body.get("model"))
        if model is not None:
            body["model"] = model  # the answer and the checks see the bare model name
        try:
            spec, source = self._choose(request, model_spec, model or "")
        except ValueError as e:
            return body, model, ok, "invalid", _fake_problem(e)
        problem = dialect.check_auth(request.headers, self.valid_keys)
        return body, model, spec, source, problem or dialect.validate(body, request.headers)

    def _choose(
        self, request: Incoming, model_spec: str | None, model: str
    ) -> tuple[FaultSpec, str]:
        headers, poisoned = request.headers, self.controls.poisoned(request.body)
        if headers.get("x-fake-fault"):
            spec, source = parse_spec(headers["x-fake-fault"]), "header"
        elif poisoned is not None:
            spec, source = poisoned, "poison"
        elif model_spec:
            spec, source = parse_spec(model_spec), "model"
        else:
            spec, source = self.controls.choose(model)
        if not self.controls.applies(spec):
            return parse_spec("ok"), "rate"
        return spec, source

    def _context(
        self, dialect: ModuleType, body: dict[str, Any], model: str, request_id: str, provider: str
    ) -> Context:
        conv = dialect.conversation(body, model)

        def run_model(reply_text: str | None) -> Any:
            prompt = dialect.prompt_usage(body, model, self.cache, provider)
            return make_answer(conv, prompt, self.ids, dialect.NAME, reply_text or self.reply_text)

        return Context(
            dialect,
            body,
            conv,
            request_id,
            self.ids,
            self.clock.wall(),
            self.controls.token_interval(model),
            run_model,
        )

    def _error(self, dialect: ModuleType, problem: ErrorShape, request_id: str) -> Reply:
        body = dialect.error_body(problem, request_id)
        return Reply(
            problem.status, [JSON, *dialect.error_headers(problem)], json.dumps(body).encode()
        )

    def _record(
        self,
        request: Incoming,
        provider: str,
        dialect: ModuleType,
        model: str | None,
        body: Any,
        spec: FaultSpec,
        source: str,
        reply: Reply,
        request_id: str,
        ctx: Context | None,
    ) -> None:
        answer = ctx._answer if ctx is not None else None
        usage = None
        if answer is not None:
            p = answer.prompt
            usage = {
                "input_tokens": p.total,
                "output_tokens": answer.output_tokens,
                "cache_read_tokens": p.cache_read,
                "cache_write_tokens": p.cache_write,
            }
        self._seq += 1
        self.log.append(
            Call(
                seq=self._seq,
                time=self.clock.now(),
                wall=self.clock.wall().isoformat(),
                path=request.path,
                provider=provider,
                dialect=dialect.NAME,
                model=model,
                stream=bool(isinstance(body, dict) and body.get("stream")),
                fault=str(spec),
                source=source,
                status=None if reply.abort else reply.status,
                request_id=request_id,
                paid=reply.paid,
                usage=usage,
                request=body,
            )
        )

    # --- /_fake/ control endpoints -----------------------------------------------------

    def _control(self, request: Incoming) -> Reply:
        action = request.path[len("/_fake/") :].strip("/")
        try:
            payload = json.loads(request.body) if request.body.strip() else {}
            status, result = (
                200,
                self._act(request.method, action, payload, parse_qs(request.query)),
            )
        except LookupError as e:
            status, result = 404, {"error": str(e)}
        except (ValueError, TypeError) as e:
            status, result = 400, {"error": str(e)}
        return Reply(status, [JSON], json.dumps(result, default=str).encode())

    def _act(self, method: str, action: str, payload: Any, query: dict[str, list[str]]) -> Any:
        model = payload.get("model", "*") if isinstance(payload, dict) else "*"
        if (method, action) == ("GET", "health"):
            return {"status": "ok", "calls": len(self.log)}
        if (method, action) == ("GET", "log"):
            first = {k: v[0] for k, v in query.items()}
            calls = self.calls(first.get("model"), first.get("dialect"), first.get("provider"))
            return [asdict(c) for c in calls]
        if (method, action) == ("GET", "faults"):
            return [_describe(f) for f in CATALOGUE]
        if method != "POST":
            raise LookupError(f"no {method} /_fake/{action}")
        if action == "script":
            self.controls.script(
                model,
                payload.get("faults", []),
                cycle=bool(payload.get("cycle")),
                append=bool(payload.get("append")),
            )
            if "default" in payload:
                self.controls.default = parse_spec(payload["default"])
            return {"model": model, "queued": self.controls.scripted(model)}
        if action == "schedule":
            self.controls.schedule(
                model,
                payload.get("windows", ()),
                payload.get("flapping", ()),
                append=bool(payload.get("append")),
            )
            return {"model": model, "scheduled": True}
        if action == "latency":
            fields = ("fixed_ms", "median_ms", "p99_ms", "token_interval_ms")
            self.controls.latency(model, **{k: payload[k] for k in fields if k in payload})
            return {"model": model, "latency": True}
        if action == "poison":
            self.controls.poison(str(payload["text"]), payload["fault"])
            return {"poison": payload["text"]}
        if action == "config":
            self.configure(**payload)
            return {"configured": sorted(payload)}
        if action == "reset":
            self.reset()
            return {"reset": True}
        raise LookupError(f"no POST /_fake/{action}")

    def configure(
        self,
        *,
        default_fault: Spec | None = None,
        valid_keys: Iterable[str] | None = None,
        reply_text: str | None = None,
        cache_hit_ratio: float | None = None,
    ) -> None:
        if default_fault is not None:
            self.controls.default = parse_spec(default_fault)
        if valid_keys is not None:
            self.valid_keys = set(valid_keys)
        if reply_text is not None:
            self.reply_text = reply_text
        if cache_hit_ratio is not None:
            self.cache.hit_ratio = float(cache_hit_ratio)


def _describe(fault: Fault) -> dict[str, Any]:
    defaults = {k: str(v) if v == float("inf") else v for k, v in fault.defaults.items()}
    return {
        "name": fault.name,
        "row": fault.row,
        "decision": fault.decision,
        "summary": fault.summary,
        "defaults": defaults,
    }


def _endpoint(path: str) -> tuple[ModuleType | None, str]:
    """The dialect whose endpoint `path` ends with, and the path before it: the provider's own
    part of its base URL (`/eu/v1/messages` is not the provider of `/v1/messages`)."""
    path = path.rstrip("/")
    for endpoint in _ENDPOINTS:
        if path.endswith(endpoint):
            return ROUTES[endpoint], path[: -len(endpoint)]
    return None, ""


def _split_model(name: Any) -> tuple[str | None, str | None]:
    if not isinstance(name, str):
        return None, None
    model, sep, spec = name.partition("#")
    return (model or "fake-model"), (spec if sep else None)


def _unparsable(dialect: ModuleType) -> ErrorShape:
    if dialect.NAME == "anthropic":
        return ErrorShape(
            400,
            "invalid_request_error",
            "There was an error parsing the body of your request as JSON.",
        )
    return ErrorShape(
        400,
        "invalid_request_error",
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
        "sent was not valid JSON.)",
    )


def _fake_problem(error: Exception) -> ErrorShape:
    return ErrorShape(400, "invalid_request_error", f"fake provider: {error}")


class Controlled:
    """In-process control of a fake (`FakeProviders`, `FakeTransport`): the same operations
    as the `/_fake/` endpoints. `_on_app` runs each one where the app lives."""

    app: FakeApp

    def _on_app(self, fn: Callable[[], T]) -> T:
        return fn()

    def script(
        self, model: str, faults: Iterable[Spec], *, cycle: bool = False, append: bool = False
    ) -> None:
        faults = list(faults)
        self._on_app(lambda: self.app.controls.script(model, faults, cycle=cycle, append=append))

    def set_default(self, spec: Spec) -> None:
        self._on_app(lambda: self.app.configure(default_fault=spec))

    def schedule(
        self,
        model: str = "*",
        windows: Iterable[Mapping[str, Any]] = (),
        flapping: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
        *,
        append: bool = False,
    ) -> None:
        self._on_app(lambda: self.app.controls.schedule(model, windows, flapping, append=append))

    def latency(self, model: str = "*", **ms: float) -> None:
        """`fixed_ms`, or `median_ms` (+ `p99_ms`) for a lognormal; `token_interval_ms`."""
        self._on_app(lambda: self.app.controls.latency(model, **ms))

    def configure(self, **config: Any) -> None:
        self._on_app(lambda: self.app.configure(**config))

    def poison(self, text: str, spec: Spec) -> None:
        """A body containing `text` gets `spec` on every model (see `Controls.poison`)."""
        self._on_app(lambda: self.app.controls.poison(text, spec))

    def calls(
        self, model: str | None = None, *, dialect: str | None = None, provider: str | None = None
    ) -> list[Call]:
        return self._on_app(lambda: self.app.calls(model, dialect, provider))

    def reset(self) -> None:
        self._on_app(self.app.reset)
