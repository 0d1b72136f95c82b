"""The fault catalogue as data, and the fault-spec syntax the fake providers understand.

Every row of `shared/reference/fault-catalogue.md` (and every sub-case of a row) is a named
`Fault` below, with the decision the chain is expected to take and, for the faults that are
an HTTP error, the status and error body in each dialect. The renderers (`render.py`) read this
table; they hold no status codes or error types of their own.

Fault-spec syntax (the same everywhere: scripts, schedules, the `x-fake-fault` header, the
`<model>#<spec>` model-name suffix, `FakeTransport(script=[...])`):

    spec   := name [":" param ("," param)*]        e.g. "overloaded", "529",
    param  := key "=" value                              "rate_limit:retry_after=3,reset=date",
                                                         "stream_cut:after_events=5"
    or an object {"fault": name, key: value, ...}       e.g. {"fault": "stream_cut",
                                                              "after_events": 3}

- `name` is a fault name below, or an HTTP status alias ("529" → overloaded, "429" →
  rate_limit, "520".."524" → cf_52x with that status; see `STATUS_ALIASES`).
- Values are parsed as int, float ("inf" allowed), true/false, else kept as strings. A value
  that contains a comma needs the dict form.
- Every fault accepts `rate=<0..1>`: the probability that the fault applies to a request it
  is chosen for (otherwise the request is answered "ok"); the draw uses the fake's seeded RNG.
- Error and HTML faults accept `delay=<seconds>` (the answer comes after that wait); error
  faults also `message=...` and, where they have a JSON and an HTML form, `body=json|html`.
- Every fault that answers accepts `text=...` (the reply text) or `words=<n>` (a reply of n
  words, for streams of many events: `bad_event:after_events=9,words=120`).
- `context_overflow:window=N,tokens=M` answers normally when M <= N (the prompt fits), so the
  same spec on every model overflows only the small ones; without `tokens` it always overflows.

Per-dialect shapes: where the providers differ the fault does what each one really does
(e.g. "overloaded" is an Anthropic 529 `overloaded_error` but an OpenAI 503 "engine
overloaded"); the summary of each entry and `reference/fault-catalogue.md` say which.
Faults that only make sense with streaming map to their nearest non-streaming form when the
request did not ask to stream (stream_cut → truncated, stream_error → the HTTP error of that
type, slow_drip → headers after the drip time, slow_tokens → headers after all tokens,
late_first_token → the whole answer after `delay`, bad_event and no_done → the healthy answer,
stream_stall → half the body, then silence).

Waits that never end (`read_timeout`, `stream_stall`, `slow_drip:then=hang`) hold the
connection open and idle until the client closes it; the server then drops the exchange.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Decision labels, as in the catalogue.
FF, RF, FBN = "fail_fast", "retry_then_fall_back", "fall_back_now"
RL, AMB = "rate_limited", "ambiguous"
OK, ADAPT, CLASSIFY_EMBEDDED = "ok", "adapt", "classify_embedded"


@dataclass(frozen=True)
class ErrorShape:
    """How one dialect reports an error: status, error type/code and the body style.

    `body` is "json" (the dialect's error object), "html" (the Cloudflare-style page for the
    status; `type` and `message` are then what an embedded or `body=json` error says) or
    "fastapi" (the 422 `{"detail": [...]}` of compatible servers). `message` may hold
    `{placeholders}` filled from the fault's parameters.
    """

    status: int
    type: str | None = None
    message: str = ""
    code: str | None = None
    param: str | None = None
    details: Mapping[str, Any] | None = None
    body: str = "json"
    should_retry: bool | None = None  # Anthropic's `x-should-retry` header, when it sends one


@dataclass(frozen=True)
class Fault:
    name: str
    row: int  # row of reference/fault-catalogue.md (0: not a fault)
    decision: str
    kind: str  # which renderer: ok, answer, error, rate_limit, html, body, connection, ...
    summary: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    anthropic: ErrorShape | None = None
    openai: ErrorShape | None = None

    def shape(self, dialect: str) -> ErrorShape | None:
        return self.anthropic if dialect == "anthropic" else self.openai


E = ErrorShape  # the table below reads better with a short name


def _fault(
    name: str,
    row: int,
    decision: str,
    kind: str,
    summary: str,
    defaults: Mapping[str, Any] | None = None,
    an: E | None = None,
    oa: E | None = None,
) -> Fault:
    return Fault(name, row, decision, kind, summary, defaults or {}, an, oa)


def _error(
    name: str, row: int, decision: str, summary: str, an: E, oa: E, **defaults: Any
) -> Fault:
    return Fault(name, row, decision, "error", summary, defaults, an, oa)


_RATE_AN = E(
    429,
    "rate_limit_error",
    "This request would exceed the rate limit for your organization of 50 requests "
    "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    should_retry=True,
)
_RATE_OA = E(
    429,
    "requests",
    "Rate limit reached for {model} in organization org-fake on requests per min "
    "(RPM): Limit 500, Used 500, Requested 1. Please try again in {retry_after}s.",
    code="rate_limit_exceeded",
)
_QUOTA_OA = E(
    429,
    "insufficient_quota",
    "You exceeded your current quota, please check your plan and billing details.",
    code="insufficient_quota",
)
_OVERFLOW_AN = E(
    400, "invalid_request_error", "prompt is too long: {tokens} tokens > {window} maximum"
)


def _rate_limit(name: str, summary: str, **defaults: Any) -> Fault:
    defaults = {"retry_after": 3, "reset": "seconds", **defaults}
    return Fault(name, 8, RL, "rate_limit", summary, defaults, _RATE_AN, _RATE_OA)


def _html(name: str, status: int, title: str) -> Fault:
    page = E(status, None, title, body="html")
    return Fault(name, 11, RF, "html", f"{status} with an HTML body", {}, page, page)


def _conn(name: str, row: int, decision: str, summary: str, **defaults: Any) -> Fault:
    return Fault(name, row, decision, "connection", summary, defaults)


CATALOGUE: tuple[Fault, ...] = (
    _fault("ok", 0, OK, "ok", "200 with the model's answer (text=...: the reply text)"),
    # 1-4: the request's fault
    _error("invalid_request", 1, FF, "400 invalid_request_error",
           E(400, "invalid_request_error", "messages: text content blocks must be non-empty"),
           E(400, "invalid_request_error",
             "Invalid 'messages[0].content': string too short. Expected a string with minimum "
             "length 1, but got an empty string instead.",
             code="string_below_min_length", param="messages[0].content")),
    _error("context_overflow", 2, FF,
           "400 context window exceeded (window=, tokens=); answered when tokens <= window",
           _OVERFLOW_AN,
           E(400, "invalid_request_error",
             "This model's maximum context length is {window} tokens. However, your messages "
             "resulted in {tokens} tokens. Please reduce the length of the messages.",
             code="context_length_exceeded", param="messages"),
           window=None, tokens=None),
    _error("context_overflow_compat", 2, FF,
           "400 context overflow as DeepSeek-like servers say it (as context_overflow)",
           _OVERFLOW_AN,
           E(400, "invalid_request_error",
             "This model's maximum context length is {window} tokens. However, you requested "
             "{tokens} tokens. Please reduce the length of the messages or completion.",
             code="invalid_request_error"),
           window=None, tokens=None),
    _error("too_large", 3, FF, "413 plain Cloudflare page (body=json: the JSON error)",
           E(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.",
             body="html"),
           E(413, "invalid_request_error", "Request too large.", code="request_too_large",
             body="html")),
    _error("unprocessable", 3, FF, "422 FastAPI-style validation error (compatible servers)",
           E(422, "invalid_request_error", "Field required", body="fastapi"),
           E(422, "invalid_request_error", "Field required", body="fastapi")),
    _error("content_policy", 4, FF, "400 content policy (code=content_filter: Azure shape)",
           E(400, "invalid_request_error", "Output blocked by content filtering policy"),
           E(400, "invalid_request_error",
             "Your request was rejected as a result of our safety system. Your prompt may "
             "contain text that is not allowed by our safety system.", code="{code}"),
           code="content_policy_violation"),
    _fault("refusal", 4, FF, "answer", "200, stop_reason refusal / finish_reason content_filter"),
    # 5-7: the account or the credential is broken
    _error("auth", 5, FBN, "401 bad key",
           E(401, "authentication_error", "invalid x-api-key"),
           E(401, "invalid_request_error",
             "Incorrect API key provided: sk-fake***0000. You can find your API key at "
             "https://platform.openai.com/account/api-keys.", code="invalid_api_key")),
    _error("permission", 6, FBN, "403 forbidden",
           E(403, "permission_error",
             "Your API key does not have permission to use the specified resource."),
           E(403, "request_forbidden", "Country, region, or territory not supported",
             code="unsupported_country_region_territory")),
    _error("model_not_found", 6, FBN, "404 model not found",
           E(404, "not_found_error", "model: {model}"),
           E(404, "invalid_request_error",
             "The model `{model}` does not exist or you do not have access to it.",
             code="model_not_found")),
    _error("quota", 7, FBN, "AN 429 + error.details.error_code; OA 429 insufficient_quota",
           E(429, "rate_limit_error", "You have reached your monthly spend limit.",
             details={"error_code": "enforced_spend_limit_reached"}),
           _QUOTA_OA),
    _error("spend_limit", 7, FBN, "AN 400 spend limit you set; OA 429 insufficient_quota",
           E(400, "invalid_request_error",
             "You have reached your specified workspace API usage limits. You will regain "
             "access on 2026-02-01 at 00:00 UTC."),
           _QUOTA_OA),
    _error("billing", 7, FBN, "402 billing_error (OA: as compatible servers send it)",
           E(402, "billing_error",
             "Your credit balance is too low to access the Anthropic API. Please go to Plans "
             "& Billing to upgrade or purchase credits."),
           E(402, "billing_error", "Insufficient credits. Add more using your billing page.",
             code="insufficient_credits")),
    # 8-9: rate limited; `reset` says how the wait is told
    _rate_limit("rate_limit", "429, retry-after: <retry_after> seconds"),
    _rate_limit("rate_limit_date", "429, retry-after as an HTTP-date", reset="date"),
    _rate_limit("rate_limit_ms", "429, only retry-after-ms", reset="ms"),
    _rate_limit("rate_limit_reset_headers", "429, only anthropic-ratelimit-*-reset (RFC 3339) / "
                "x-ratelimit-reset-* (Go duration: 6m0s)", reset="headers", retry_after=360),
    _rate_limit("rate_limit_long", "429, retry-after: 3600", retry_after=3600),
    _rate_limit("rate_limit_garbage", "429, retry-after: soon", reset="garbage"),
    _rate_limit("rate_limit_past", "429, retry-after an HTTP-date in the past", reset="past"),
    _rate_limit("rate_limit_no_header", "429 with no reset header at all", reset="none"),
    _fault("slow_down", 9, RL, "rate_limit", "429 for ramping up too fast",
           {"retry_after": 1, "reset": "seconds"},
           E(429, "rate_limit_error",
             "Your organization's usage increased too quickly (acceleration limit). Please "
             "ramp up your traffic gradually.", should_retry=True),
           E(429, "slow_down", "Please reduce the rate at which you are sending requests.",
             code="slow_down")),
    # 10-13: the provider's fault
    _error("server_error", 10, RF, "500 internal error",
           E(500, "api_error", "Internal server error", should_retry=True),
           E(500, "server_error",
             "The server had an error while processing your request. Sorry about that!")),
    _html("bad_gateway", 502, "502 Bad Gateway"),
    _html("unavailable", 503, "503 Service Temporarily Unavailable"),
    _fault("cf_52x", 11, RF, "html", "Cloudflare 520-524 page (status=520..524)", {"status": 520}),
    _error("overloaded", 12, RF, "AN 529 overloaded_error; OA 503 engine overloaded",
           E(529, "overloaded_error", "Overloaded", should_retry=True),
           E(503, "service_unavailable_error",
             "The engine is currently overloaded, please try again later.",
             code="server_is_overloaded")),
    _error("timeout_504", 13, RF, "504 after `delay` s (AN JSON timeout_error; OA HTML page)",
           E(504, "timeout_error", "Request timeout"),
           E(504, "server_error", "504 Gateway Time-out", body="html"),
           delay=30.0),
    # 14-17: the connection; connect_* only FakeTransport can produce (see server.py)
    _conn("connect_refused", 14, RF, "connection refused"),
    _conn("connect_timeout", 14, RF, "no connection within the connect timeout"),
    _conn("dns_failure", 14, RF, "name resolution failed"),
    _conn("tls_failure", 14, RF, "TLS handshake failed"),
    _conn("reset", 15, AMB, "request read, then RST (mode=fin: a clean close) before any header",
          mode="rst"),
    _fault("read_timeout", 16, AMB, "hang", "headers only after `delay` s (default never), then ok",
           {"delay": float("inf")}),
    _fault("late_first_token", 16, AMB, "late",
           "stream: head and message start at once, the first content after `delay` s; "
           "no stream: the whole answer after `delay` s", {"delay": 30.0}),
    _fault("truncated", 17, AMB, "truncated", "content-length larger than the body, then close",
           {"fraction": 0.5}),
    _fault("truncated_chunked", 17, AMB, "truncated", "chunked body cut before its last chunk",
           {"fraction": 0.5}),
    # 18-20: a 200 that is not a usable answer
    _fault("invalid_json", 18, AMB, "body", "200 application/json with broken JSON"),
    _fault("not_json", 18, AMB, "body", "200 text/html maintenance page"),
    _fault("empty", 19, AMB, "body", "200 with an empty body"),
    _fault("empty_choices", 19, AMB, "body", "OA choices:[]; AN content:[] + stop_reason null"),
    _fault("missing_fields", 19, AMB, "body", "200 JSON without the required fields"),
    _fault("valid_empty", 19, OK, "answer", "AN content:[] + end_turn; OA null + tool_calls"),
    _fault("error_in_200", 20, CLASSIFY_EMBEDDED, "body",
           "200 whose body is an error (type=fault name or error type, shape=anthropic|openai)",
           {"type": "overloaded_error", "shape": None}),
    # 21-25: streaming and tool calls
    _fault("stream_cut", 21, RF, "stream", "stream dies after N events (close=abrupt|clean)",
           {"after_events": 3, "close": "abrupt"}),
    _fault("no_done", 21, OK, "stream",
           "whole stream with its finish reason and usage, but no OA [DONE] / AN message_stop "
           "(close=clean|abrupt)", {"close": "clean"}),
    _fault("prefill_rejected", 21, FF, "prefill",
           "400 to a request whose last message is the assistant's (prefill, continuation); "
           "any other request is answered",
           an=E(400, "invalid_request_error",
                "This model does not support assistant message prefill. The conversation must "
                "end with a user message."),
           oa=E(400, "invalid_request_error",
                "Invalid 'messages': the last message must have role 'user' or 'tool'; "
                "continuing an assistant message (prefill) is not supported by this model.",
                code="invalid_value", param="messages")),
    _fault("stream_error", 22, RF, "stream", "in-band error event after N events",
           {"after_events": 3, "type": "overloaded_error"}),
    _fault("slow_drip", 23, RF, "stream",
           "only pings / `:` comments (start=true: the first event first; then=cut|ok|hang)",
           {"interval": 1.0, "count": 30, "start": False, "then": "cut"}),
    _fault("slow_tokens", 23, RF, "answer", "content deltas `interval` s apart", {"interval": 2.0}),
    _fault("stream_stall", 23, RF, "stream",
           "after N events nothing more, the connection left open until the client closes it",
           {"after_events": 1}),
    _fault("stream_as_json", 24, ADAPT, "answer", "stream:true answered with plain JSON"),
    _fault("bad_tool_args", 25, OK, "answer", "a tool call whose arguments are not valid JSON"),
    # 26: a healthy stream with an event nobody can read in it
    _fault("bad_event", 26, OK, "stream",
           "`count` invalid-JSON SSE events inserted after N events of a healthy stream",
           {"after_events": 3, "count": 1}),
)  # fmt: skip

FAULTS: Mapping[str, Fault] = MappingProxyType({f.name: f for f in CATALOGUE})
FAULT_NAMES: tuple[str, ...] = tuple(FAULTS)

STATUS_ALIASES: Mapping[str, tuple[str, dict[str, Any]]] = MappingProxyType({
    "200": ("ok", {}), "400": ("invalid_request", {}), "401": ("auth", {}), "402": ("billing", {}),
    "403": ("permission", {}), "404": ("model_not_found", {}), "413": ("too_large", {}),
    "422": ("unprocessable", {}), "429": ("rate_limit", {}), "500": ("server_error", {}),
    "502": ("bad_gateway", {}), "503": ("unavailable", {}), "504": ("timeout_504", {}),
    "529": ("overloaded", {}), "hang": ("read_timeout", {}),
    **{str(s): ("cf_52x", {"status": s}) for s in range(520, 525)},
})  # fmt: skip

# Error types of either dialect, as met in a 200 body or an in-stream error, to the fault
# whose error they are (`error_in_200:type=...`, `stream_error:type=...`).
EMBEDDED_TYPES: Mapping[str, str] = MappingProxyType({
    "overloaded_error": "overloaded", "api_error": "server_error", "server_error": "server_error",
    "rate_limit_error": "rate_limit", "rate_limit_exceeded": "rate_limit",
    "invalid_request_error": "invalid_request", "authentication_error": "auth",
    "invalid_api_key": "auth", "permission_error": "permission",
    "not_found_error": "model_not_found", "model_not_found": "model_not_found",
    "billing_error": "billing", "insufficient_quota": "quota",
    "timeout_error": "timeout_504", "context_length_exceeded": "context_overflow",
    "request_too_large": "too_large", "service_unavailable_error": "overloaded",
})  # fmt: skip

_ERROR_KINDS = {"error", "rate_limit"}


@dataclass(frozen=True)
class FaultSpec:
    """A fault with the parameters given for it; missing ones fall back to the fault's defaults."""

    fault: Fault
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fault.name

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.params:
            return self.params[key]
        return self.fault.defaults.get(key, default)

    def with_params(self, **params: Any) -> FaultSpec:
        return FaultSpec(self.fault, {**self.params, **params})

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={_show(v)}" for k, v in self.params.items())


def parse_spec(spec: str | Mapping[str, Any] | FaultSpec) -> FaultSpec:
    """Read a fault spec (see the module docstring); raise ValueError naming what is wrong."""
    if isinstance(spec, FaultSpec):
        return spec
    if isinstance(spec, Mapping):
        params = dict(spec)
        name = params.pop("fault", None)
        if not isinstance(name, str):
            raise ValueError(f"a fault spec object needs a 'fault' name: {spec!r}")
    elif isinstance(spec, str):
        text = spec.strip()
        if text.startswith("{"):
            return parse_spec(json.loads(text))
        name, _, rest = text.partition(":")
        params = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq:
                raise ValueError(f"fault parameter {item!r} in {spec!r} is not key=value")
            params[key.strip()] = _value(value.strip())
    else:
        raise ValueError(f"a fault spec is a string or an object, not {type(spec).__name__}")
    name = name.strip()
    if name in STATUS_ALIASES:
        name, implied = STATUS_ALIASES[name]
        params = {**implied, **params}
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULT_NAMES)}")
    rate = params.get("rate", 1.0)
    if not isinstance(rate, int | float) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be a number in [0, 1], not {rate!r}")
    return FaultSpec(FAULTS[name], params)


def embedded_fault(type_or_name: str) -> Fault:
    """The error fault named by a fault name or by either dialect's error type/code."""
    name = EMBEDDED_TYPES.get(type_or_name, type_or_name)
    fault = FAULTS.get(name)
    if fault is None or fault.kind not in _ERROR_KINDS:
        raise ValueError(f"{type_or_name!r} names no error fault or error type")
    return fault


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
