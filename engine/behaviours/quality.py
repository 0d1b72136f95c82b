"""An attempt's answer judged against the route's output contract and the tools' schemas.

`engine.behaviours.contracts` says whether an answer is valid; this module is where the chain asks,
for a
whole answer (`judge`) or one gathered from a stream (`StreamedAnswer`). A broken answer on a
route that falls back on quality raises `QualityFault` (the chain retries once, then moves on);
otherwise the violation is returned, recorded on the attempt and on the response, and the
answer still goes to the caller. A stream's answer is judged at its end: the caller holds it
already, so a stream never falls back on quality, it records.
"""

from __future__ import annotations

import logging

from engine.behaviours.contracts import OutputContract, check_answer
from engine.core import bounded_json
from engine.core.errors import QualityFault
from engine.core.messages import (
    MessageEnd,
    Request,
    Response,
    StreamEvent,
    Text,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)

log = logging.getLogger("switchover.chain")


def judge(
    response: Response,
    request: Request,
    contract: OutputContract | None,
    *,
    fall_back: bool,
) -> str | None:
    """None when the answer is valid; else the violation (`kind: message`), or QualityFault
    when `fall_back`. Judging never fails a request: a contract that cannot be evaluated (a
    `$ref` to a document we do not have) lets the answer through, logged."""
    if contract is None and not response.tool_calls:
        return None  # the common case, without building anything
    try:
        violation = check_answer(response, request, contract)
    except Exception:
        log.exception("the output contract could not be evaluated; the answer is let through")
        return None
    if violation is None:
        return None
    if fall_back:
        raise QualityFault(str(violation), response.usage, error_class=f"output_{violation.kind}")
    return str(violation)


class StreamedAnswer:
    """The answer a stream carried, gathered event by event for judging at its end."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, tuple[str, str, list[str]]] = {}  # index → id, name, pieces

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ToolCallStart):
            self._calls[event.index] = (event.id, event.name, [])
        elif isinstance(event, ToolCallDelta) and event.index in self._calls:
            self._calls[event.index][2].append(event.arguments)

    def response(self, end: MessageEnd, usage: Usage) -> Response:
        content: list[Text | ToolCall] = []
        if self._text:
            content.append(Text("".join(self._text)))
        for index in sorted(self._calls):
            call_id, name, pieces = self._calls[index]
            raw = "".join(pieces)
            content.append(ToolCall(call_id, name, _object(raw), raw))
        return Response(tuple(content), end.stop_reason, usage, end.model)


def _object(raw: str) -> dict | None:
    try:
        value = bounded_json.loads(raw or "{}")  # a call with no arguments streams none
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
