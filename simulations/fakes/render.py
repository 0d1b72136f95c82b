"""Turn a chosen fault into the `Reply` a provider of that dialect would send.

One function per kind of fault in the catalogue (`faults.py`); the dialect modules supply the
wire format, so every fault is rendered once for both dialects and served the same way by the
socket server and by the in-process transport.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from email.utils import format_datetime
from types import ModuleType
from typing import Any

from simulations.fakes import anthropic, openai
from simulations.fakes.faults import ErrorShape, FaultSpec, embedded_fault
from simulations.fakes.model import Answer, Conversation, Ids, tokens, tool_call_for, words_text
from simulations.fakes.pages import CLOUDFLARE, html_reply
from simulations.fakes.reply import Event, Piece, Reply

JSON = ("content-type", "application/json")
SSE = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]


@dataclass
class Context:
    """One validated provider request, as the renderers need it."""

    dialect: ModuleType  # simulations.fakes.anthropic or .openai
    body: dict[str, Any]
    conv: Conversation
    request_id: str
    ids: Ids
    wall: datetime
    token_interval: float
    run_model: Callable[[str | None], Answer]  # the model's answer; reads and fills the cache
    reply_text: str | None = None  # the spec's `text=` / `words=`, for every fault that answers
    _answer: Answer | None = field(default=None, repr=False)

    @property
    def model(self) -> str:
        return self.conv.model

    @property
    def created(self) -> int:
        return int(self.wall.timestamp())

    def answer(self) -> Answer:
        if self._answer is None:
            self._answer = self.run_model(self.reply_text)
        return self._answer

    @property
    def paid(self) -> bool:
        return self._answer is not None


def render(spec: FaultSpec, ctx: Context) -> Reply:
    words = spec.get("words")
    if words is not None:
        if not isinstance(words, int) or isinstance(words, bool) or words < 1:
            raise ValueError(f"words must be a whole number of at least 1, not {words!r}")
        ctx.reply_text = words_text(words)
    if spec.get("text") is not None:
        ctx.reply_text = str(spec.get("text"))
    reply = _RENDERERS[spec.fault.kind](spec, ctx)
    reply.paid = ctx.paid
    return reply


# --- answers -----------------------------------------------------------------------------


def _ok(spec: FaultSpec, ctx: Context) -> Reply:
    return answer_reply(ctx, ctx.answer())


def answer_reply(
    ctx: Context, answer: Answer, stream: bool | None = None, interval: float | None = None
) -> Reply:
    stream = ctx.conv.stream if stream is None else stream
    if not stream:
        return Reply(200, [JSON], _dumps(ctx.dialect.message(answer, ctx.model, ctx.created)))
    events = ctx.dialect.events(answer, ctx.model, ctx.conv, ctx.created)
    return Reply(
        200, list(SSE), pieces=_paced(events, ctx.token_interval if interval is None else interval)
    )


def _paced(events: list[Event], interval: float) -> list[Piece]:
    return [Piece(e.data, interval if e.content else 0.0) for e in events]


def _answer_variant(spec: FaultSpec, ctx: Context) -> Reply:
    answer, name, dialect = ctx.answer(), spec.name, ctx.dialect.NAME
    if name == "refusal":
        return answer_reply(ctx, answer.but(text=None, tool_calls=(), stop="refusal"))
    if name == "valid_empty" and dialect == "anthropic":
        return answer_reply(ctx, answer.but(text=None, tool_calls=(), stop="end_turn"))
    if name in ("valid_empty", "bad_tool_args"):
        call = (
            answer.tool_calls[0]
            if answer.tool_calls
            else tool_call_for(ctx.conv, ctx.ids, dialect, force=True)
        )
        assert call is not None
        if name == "bad_tool_args":
            call = replace(call, arguments=call.arguments[:-1] + ',"')
        return answer_reply(ctx, answer.but(text=None, tool_calls=(call,), stop="tool_use"))
    if name == "stream_as_json":
        return answer_reply(ctx, answer, stream=False)
    # slow_tokens: content deltas `interval` apart; without a stream the wait is up front
    interval = float(spec.get("interval"))
    if ctx.conv.stream:
        return answer_reply(ctx, answer, interval=interval)
    reply = answer_reply(ctx, answer)
    reply.head_delay = interval * sum(
        e.content for e in ctx.dialect.events(answer, ctx.model, ctx.conv, ctx.created)
    )
    return reply


def _hang(spec: FaultSpec, ctx: Context) -> Reply:
    reply = _ok(spec, ctx)
    reply.head_delay = float(spec.get("delay"))
    return reply


def _late(spec: FaultSpec, ctx: Context) -> Reply:
    """late_first_token: a stream opens at once and its first content comes `delay` s later."""
    if not ctx.conv.stream:
        return _hang(spec, ctx)
    events = _events(ctx)
    pieces = _paced(events, ctx.token_interval)
    # An answer with no content at all (valid-but-empty) is late with its end instead.
    first = next((i for i, e in enumerate(events) if e.content), len(events) - 1)
    pieces[first] = Piece(pieces[first].data, pieces[first].delay + float(spec.get("delay")))
    return Reply(200, list(SSE), pieces=pieces)


def _prefill(spec: FaultSpec, ctx: Context) -> Reply:
    """prefill_rejected: only a request that ends with the assistant's text is refused."""
    if ctx.conv.prefill is None:
        return _ok(spec, ctx)
    return _error(spec, ctx)


# --- HTTP errors -------------------------------------------------------------------------


def error_shape(spec: FaultSpec, ctx: Context, dialect: str | None = None) -> ErrorShape:
    """The fault's error for a dialect, with its {placeholders} filled from the parameters."""
    shape = spec.fault.shape(dialect or ctx.dialect.NAME)
    assert shape is not None, f"{spec.name} is not an HTTP error"
    window = spec.get("window") or ctx.dialect.CONTEXT_WINDOW
    estimate = tokens(len(json.dumps(ctx.body)))
    values = {
        "model": ctx.model,
        "window": window,
        "tokens": spec.get("tokens") or (estimate if estimate > window else window + 8310),
        "retry_after": _number(spec.get("retry_after", 0)),
        "code": spec.get("code"),
    }
    message = spec.get("message") or shape.message.format(**values)
    code = shape.code.format(**values) if shape.code else None
    details = shape.details
    if code == "content_filter":  # Azure says why in an innererror
        details = {"innererror": _AZURE_INNERERROR}
    return ErrorShape(
        shape.status,
        shape.type,
        message,
        code,
        shape.param,
        details,
        shape.body,
        shape.should_retry,
    )


def _fits(spec: FaultSpec, ctx: Context) -> bool:
    """A context overflow told its prompt size (`tokens=`) answers a prompt that fits the
    window (`window=`, else the dialect's), so one spec overflows a small model only."""
    given = spec.params.get("tokens")
    window = spec.get("window") or ctx.dialect.CONTEXT_WINDOW
    return isinstance(given, int | float) and given <= window


_AZURE_INNERERROR = {
    "code": "ResponsibleAIPolicyViolation",
    "content_filter_result": {"hate": {"filtered": True, "severity": "high"}},
}


def error_reply(
    ctx: Context, shape: ErrorShape, body_style: str | None = None, delay: float = 0.0
) -> Reply:
    style = body_style or shape.body
    if style == "html":
        return html_reply(ctx.dialect.HOST, ctx.ids.ray(), shape.status, delay)
    if style == "fastapi":
        detail = [
            {"type": "missing", "loc": ["body", "messages"], "msg": shape.message, "input": None}
        ]
        return Reply(shape.status, [JSON], _dumps({"detail": detail}), head_delay=delay)
    headers = [JSON, *ctx.dialect.error_headers(shape)]
    return Reply(
        shape.status,
        headers,
        _dumps(ctx.dialect.error_body(shape, ctx.request_id)),
        head_delay=delay,
    )


def _error(spec: FaultSpec, ctx: Context) -> Reply:
    if spec.name in ("context_overflow", "context_overflow_compat") and _fits(spec, ctx):
        return _ok(spec, ctx)
    return error_reply(ctx, error_shape(spec, ctx), spec.get("body"), float(spec.get("delay", 0.0)))


def _rate_limit(spec: FaultSpec, ctx: Context) -> Reply:
    reply = _error(spec, ctx)
    seconds, style = float(spec.get("retry_after")), spec.get("reset")
    at = ctx.wall + timedelta(seconds=seconds)
    headers = {
        "seconds": [("retry-after", _number(seconds))],
        "date": [("retry-after", format_datetime(at, usegmt=True))],
        "ms": [("retry-after-ms", str(round(seconds * 1000)))],
        "headers": ctx.dialect.reset_headers(at, seconds),
        "garbage": [("retry-after", "soon")],
        "past": [("retry-after", format_datetime(ctx.wall - timedelta(hours=1), usegmt=True))],
        "none": [],
    }.get(style)
    if headers is None:
        raise ValueError(
            f"reset must be seconds, date, ms, headers, garbage, past or none, not {style!r}"
        )
    reply.headers += headers
    return reply


def _html(spec: FaultSpec, ctx: Context) -> Reply:
    status = int(spec.get("status") or spec.fault.anthropic.status)  # type: ignore[union-attr]
    if spec.name == "cf_52x" and status not in CLOUDFLARE:
        raise ValueError(f"cf_52x status must be 520..524, not {status}")
    return html_reply(ctx.dialect.HOST, ctx.ids.ray(), status, float(spec.get("delay", 0.0)))


# --- bodies that are not a usable answer ---------------------------------------------------


def _body(spec: FaultSpec, ctx: Context) -> Reply:
    name, dialect = spec.name, ctx.dialect
    if name == "not_json":
        page = (
            b"<html><head><title>Down for maintenance</title></head><body>Back soon.</body></html>"
        )
        return Reply(200, [("content-type", "text/html; charset=utf-8")], page)
    if name == "empty":
        return Reply(200, [JSON], b"")
    if name == "error_in_200":
        embedded = FaultSpec(embedded_fault(str(spec.get("type"))), spec.params)
        shape_of = spec.get("shape") or dialect.NAME
        body_of = _DIALECTS.get(shape_of, dialect)
        shape = error_shape(embedded, ctx, body_of.NAME)
        return Reply(200, [JSON], _dumps(body_of.error_body(shape, ctx.request_id)))
    answer = ctx.answer()
    if name == "invalid_json":
        full = _dumps(dialect.message(answer, ctx.model, ctx.created))
        return Reply(200, [JSON], full[: len(full) // 2])
    build = dialect.empty_choices if name == "empty_choices" else dialect.missing_fields
    return Reply(200, [JSON], _dumps(build(answer, ctx.model, ctx.created)))


def _truncated(spec: FaultSpec, ctx: Context) -> Reply:
    answer, fraction = ctx.answer(), float(spec.get("fraction"))
    if ctx.conv.stream:  # an SSE body cut mid-event: "incomplete chunked read"
        sse = b"".join(e.data for e in ctx.dialect.events(answer, ctx.model, ctx.conv, ctx.created))
        return Reply(200, list(SSE), pieces=[Piece(sse[: int(len(sse) * fraction)])], cut=True)
    full = _dumps(ctx.dialect.message(answer, ctx.model, ctx.created))
    part = full[: int(len(full) * fraction)]
    if spec.name == "truncated_chunked":
        return Reply(200, [JSON], pieces=[Piece(part)], cut=True)
    return Reply(200, [JSON], part, declared_length=len(full))


# --- streams -----------------------------------------------------------------------------


def _events(ctx: Context) -> list[Event]:
    return ctx.dialect.events(ctx.answer(), ctx.model, ctx.conv, ctx.created)


def _close(spec: FaultSpec) -> bool:
    """Whether the stream ends by dropping the connection (`close=abrupt`) or cleanly."""
    close = spec.get("close")
    if close not in ("abrupt", "clean"):
        raise ValueError(f"close must be abrupt or clean, not {close!r}")
    return close == "abrupt"


def _stream(spec: FaultSpec, ctx: Context) -> Reply:
    name = spec.name
    if not ctx.conv.stream:
        return _stream_fault_without_stream(spec, ctx)
    events = _events(ctx)
    if name == "stream_cut":
        n = int(spec.get("after_events"))
        return Reply(
            200, list(SSE), pieces=_paced(events[:n], ctx.token_interval), cut=_close(spec)
        )
    if name == "no_done":  # finished (finish reason, usage) but never says so at the end
        # OpenAI's last event is its [DONE] terminator, Anthropic's message_stop.
        whole = events[:-1]
        return Reply(200, list(SSE), pieces=_paced(whole, ctx.token_interval), cut=_close(spec))
    if name == "stream_stall":  # then silence, with the connection held open
        n = int(spec.get("after_events"))
        pieces = _paced(events[:n], ctx.token_interval)
        return Reply(200, list(SSE), pieces=[*pieces, Piece(b"", math.inf)])
    if name == "stream_error":
        n = int(spec.get("after_events"))
        shape = error_shape(FaultSpec(embedded_fault(str(spec.get("type"))), spec.params), ctx)
        pieces = _paced(events[:n], ctx.token_interval)
        return Reply(
            200,
            list(SSE),
            pieces=[*pieces, Piece(ctx.dialect.stream_error(shape, ctx.request_id).data)],
        )
    if name == "bad_event":  # the whole answer, with unreadable events slipped in
        n, bad = int(spec.get("after_events")), ctx.dialect.unreadable_event()
        pieces = _paced(events, ctx.token_interval)
        pieces[n:n] = [Piece(bad.data)] * int(spec.get("count"))
        return Reply(200, list(SSE), pieces=pieces)
    # slow_drip: keep-alives only, then cut, hang, or carry on with the answer
    start = 1 if spec.get("start") else 0
    pieces = [Piece(e.data) for e in events[:start]]
    interval = float(spec.get("interval"))
    pieces += [Piece(ctx.dialect.keepalive().data, interval) for _ in range(int(spec.get("count")))]
    then = spec.get("then")
    if then == "ok":
        return Reply(200, list(SSE), pieces=pieces + _paced(events[start:], ctx.token_interval))
    if then == "hang":
        return Reply(200, list(SSE), pieces=[*pieces, Piece(b"", math.inf)])
    return Reply(200, list(SSE), pieces=pieces, cut=True)


def _stream_fault_without_stream(spec: FaultSpec, ctx: Context) -> Reply:
    """The nearest non-streaming form of a streaming fault."""
    if spec.name == "stream_cut":
        return _truncated(FaultSpec(spec.fault, {"fraction": 0.5}), ctx)
    if spec.name == "stream_error":
        fault = embedded_fault(str(spec.get("type")))
        return _RENDERERS[fault.kind](FaultSpec(fault, {}), ctx)
    if spec.name in ("bad_event", "no_done"):  # a whole body has no events to break or end
        return _ok(spec, ctx)
    if spec.name == "stream_stall":  # half the body, then silence
        full = _dumps(ctx.dialect.message(ctx.answer(), ctx.model, ctx.created))
        pieces = [Piece(full[: len(full) // 2]), Piece(b"", math.inf)]
        return Reply(200, [JSON], pieces=pieces)
    reply = _ok(spec, ctx)
    reply.head_delay = float(spec.get("interval")) * int(spec.get("count"))
    if spec.get("then") == "hang":
        reply.head_delay = math.inf
    elif spec.get("then") != "ok":
        reply.abort = "fin"
    return reply


def _connection(spec: FaultSpec, ctx: Context) -> Reply:
    if spec.name != "reset":
        return Reply(0, abort=spec.name)  # type: ignore[arg-type]
    mode = spec.get("mode")
    if mode not in ("rst", "fin"):
        raise ValueError(f"reset mode must be rst or fin, not {mode!r}")
    return Reply(0, abort=mode, head_delay=float(spec.get("delay", 0.0)))


_RENDERERS: dict[str, Callable[[FaultSpec, Context], Reply]] = {
    "ok": _ok, "answer": _answer_variant, "hang": _hang, "late": _late, "prefill": _prefill,
    "error": _error,
    "rate_limit": _rate_limit, "html": _html, "body": _body, "truncated": _truncated,
    "stream": _stream, "connection": _connection,
}  # fmt: skip


_DIALECTS: dict[str, ModuleType] = {"anthropic": anthropic, "openai": openai}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
