"""Untrusted JSON read within bounds: each refusal names its reason, and nothing a caller can
send escapes as another exception (a RecursionError, say)."""

from __future__ import annotations

import pytest

from engine.core.bounded_json import MAX_DEPTH, JsonRejected, check_value, loads


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a": "\\ud800"}', "unencodable"),
        ('{"a": "\\udfff x"}', "unencodable"),
        (b'{"a": "\xed\xa0\x80"}', "unencodable"),
        (b'{"a": NaN}', "non_finite"),
        (b'{"a": -Infinity}', "non_finite"),
        (b'{"a": 1e999}', "non_finite"),
        (b"[" * 50_000 + b"]" * 50_000, "too_deep"),
        (b'{"a":' * 3_000 + b"1" + b"}" * 3_000, "too_deep"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "too_deep"),
        (b'{"a": ', "invalid"),
        (b"\xff", "unencodable"),
    ],
)
def test_what_no_provider_could_be_sent_is_refused_with_its_reason(data, reason):
    with pytest.raises(JsonRejected) as caught:
        loads(data)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    "data",
    [
        b'{"emoji": "\\ud83d\\ude00", "text": "caf\xc3\xa9"}',
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
        b'{"big": 123456789012345678901234567890, "neg": -0.0}',
        '{"escaped backslash": "\\\\ud800"}',
    ],
)
def test_ordinary_json_reads_as_json_does(data):
    import json

    assert loads(data) == json.loads(data)


def test_a_value_built_in_code_is_checked_without_recursion():
    deep: list = []
    node = deep
    for _ in range(10_000):
        node.append([])
        node = node[0]
    with pytest.raises(JsonRejected):
        check_value(deep)
    with pytest.raises(JsonRejected):
        check_value({"k\udc80": 1})
