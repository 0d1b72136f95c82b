"""Output contracts: the route's JSON Schema on final answers, tools' input_schema on calls."""

from __future__ import annotations

import json

import pytest

from engine.behaviours.contracts import (
    MESSAGE_LIMIT,
    QUALITY_KINDS,
    OutputContract,
    Violation,
    check_answer,
    check_tool_calls,
)
from engine.core.messages import Message, Request, Response, Text, Tool, ToolCall, Usage

INVOICE = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["amount", "currency"],
}
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

WEATHER = Tool(
    "get_weather",
    "Current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)


def answer(*content: Text | ToolCall) -> Response:
    return Response(content=content, stop_reason="end_turn", usage=Usage(), model="m")


def request(*tools: Tool) -> Request:
    return Request(messages=(Message.user("hi"),), tools=tools)


def call(arguments: dict | None, name: str = "get_weather", raw: str | None = None) -> ToolCall:
    return ToolCall("call_1", name, arguments, raw)


# --- the contract on text ------------------------------------------------------------------


def test_an_answer_satisfying_the_schema_passes():
    assert OutputContract(INVOICE).check_text('{"amount": 12.5, "currency": "EUR"}') is None


def test_an_answer_that_is_not_json_is_an_invalid_json_violation():
    violation = OutputContract(INVOICE).check_text("The total is 12.50 EUR.")
    assert violation is not None
    assert violation.kind == "invalid_json"
    assert str(violation).startswith("invalid_json: the answer is not JSON: ")


def test_an_empty_answer_is_an_invalid_json_violation():
    violation = OutputContract(INVOICE).check_text("  \n")
    assert violation == Violation("invalid_json", "the answer is empty")


def test_json_failing_the_schema_is_a_schema_violation_naming_the_path():
    violation = OutputContract(INVOICE).check_text('{"amount": "abc", "currency": "EUR"}')
    assert violation is not None
    assert str(violation) == "schema: $.amount: must be of type 'number'"


def test_a_missing_required_property_is_a_schema_violation():
    violation = OutputContract(INVOICE).check_text('{"amount": 1}')
    assert str(violation) == "schema: $: 'currency' is a required property"


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"amount": 1, "currency": "EUR"}\n```',
        '```JSON\n{"amount": 1, "currency": "EUR"}\n```',
        '```\n{"amount": 1, "currency": "EUR"}\n```',
        '\n  ```json\n{\n  "amount": 1,\n  "currency": "EUR"\n}\n```\n',
    ],
)
def test_json_in_a_single_code_fence_is_accepted(text):
    assert OutputContract(INVOICE).check_text(text) is None


def test_fenced_json_is_still_held_to_the_schema():
    violation = OutputContract(INVOICE).check_text('```json\n{"amount": "abc"}\n```')
    assert violation is not None and violation.kind == "schema"


@pytest.mark.parametrize(
    "text",
    [
        'Here you go:\n```json\n{"amount": 1, "currency": "EUR"}\n```',
        '```json\n{"amount": 1, "currency": "EUR"}\n```\nAnything else?',
        '```json\n{"amount": 1, "currency": "EUR"}\n```\nor\n```json\n{"amount": 2}\n```',
        '```python\n{"amount": 1, "currency": "EUR"}\n```',
        'Sure! {"amount": 1, "currency": "EUR"}',
    ],
)
def test_json_with_prose_around_it_is_not_repaired(text):
    """Only a fence that is the whole answer is unwrapped; a caller's parser would fail here."""
    violation = OutputContract(INVOICE).check_text(text)
    assert violation is not None and violation.kind == "invalid_json"


# --- the contract itself -------------------------------------------------------------------


def test_an_invalid_schema_is_rejected_when_the_contract_is_built():
    with pytest.raises(ValueError, match=r"invalid output contract .*\$\.type: 'strin'"):
        OutputContract({"type": "strin"})


def test_a_schema_that_is_not_an_object_is_rejected():
    with pytest.raises(ValueError, match="must be a JSON object"):
        OutputContract(["type", "object"])  # type: ignore[arg-type]


def test_an_unknown_schema_dialect_is_rejected_rather_than_guessed():
    with pytest.raises(ValueError, match="unknown JSON Schema dialect"):
        OutputContract({"$schema": "https://example.com/my-dialect", "type": "object"})


def test_draft_07_is_honoured_when_the_schema_says_so():
    """Array-form `items` (tuple validation) is Draft 7; Draft 2020-12 replaced it."""
    pair = {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}
    with pytest.raises(ValueError, match="Draft202012Validator"):
        OutputContract(pair)
    contract = OutputContract({"$schema": DRAFT_07, **pair})
    assert contract.check_text('["EUR", 12.5]') is None
    assert str(contract.check_text('["EUR", "12.5"]')) == "schema: $[1]: must be of type 'number'"


def test_contracts_with_the_same_schema_are_equal():
    reordered = dict(reversed(list(INVOICE.items())))
    assert OutputContract(INVOICE) == OutputContract(reordered)
    assert hash(OutputContract(INVOICE)) == hash(OutputContract(reordered))
    assert OutputContract(INVOICE) != OutputContract({"type": "object"})


# --- tool calls ----------------------------------------------------------------------------


def test_tool_call_arguments_satisfying_the_input_schema_pass():
    assert check_tool_calls([call({"city": "Oslo", "days": 3})], [WEATHER]) is None


def test_tool_call_arguments_that_are_not_json_are_a_tool_arguments_violation():
    violation = check_tool_calls([call(None, raw='{"city": "Os')], [WEATHER])
    assert violation == Violation("tool_arguments", "call get_weather: arguments are not JSON")


def test_tool_call_arguments_that_are_json_but_not_an_object_are_named_as_such():
    violation = check_tool_calls([call(None, raw="[1, 2]")], [WEATHER])
    assert str(violation) == "tool_arguments: call get_weather: arguments are not a JSON object"


def test_tool_call_arguments_missing_a_required_property_are_a_tool_arguments_violation():
    violation = check_tool_calls([call({"days": 3})], [WEATHER])
    assert str(violation) == ("tool_arguments: call get_weather: $: 'city' is a required property")


def test_tool_call_arguments_of_the_wrong_type_are_a_tool_arguments_violation():
    violation = check_tool_calls([call({"city": "Oslo", "days": "three"})], [WEATHER])
    assert str(violation) == ("tool_arguments: call get_weather: $.days: must be of type 'integer'")


def test_a_call_to_a_tool_that_was_not_offered_is_an_unknown_tool_violation():
    violation = check_tool_calls([call({"city": "Oslo"}, name="get_wether")], [WEATHER])
    assert violation is not None and violation.kind == "unknown_tool"
    assert "get_wether" in violation.message


def test_the_first_bad_call_is_the_one_reported():
    calls = [call({"city": "Oslo"}), call({}, name="search"), call(None, raw="{")]
    violation = check_tool_calls(calls, [WEATHER])
    assert violation is not None and violation.kind == "unknown_tool"


def test_arguments_are_not_judged_by_a_tool_schema_that_is_itself_invalid():
    """The caller wrote the tool's schema; a broken one says nothing about the model."""
    broken = Tool("lookup", input_schema={"type": "objekt"})
    assert check_tool_calls([call({"q": 1}, name="lookup")], [broken]) is None


def test_arguments_are_not_judged_by_a_tool_schema_with_an_unresolvable_ref():
    remote = Tool("lookup", input_schema={"$ref": "https://example.com/lookup.json"})
    assert check_tool_calls([call({"q": 1}, name="lookup")], [remote]) is None


# --- whole answers -------------------------------------------------------------------------


def test_tool_calls_are_checked_even_without_a_contract():
    response = answer(call({"days": 3}))
    violation = check_answer(response, request(WEATHER), contract=None)
    assert violation is not None and violation.kind == "tool_arguments"


def test_the_contract_is_not_applied_to_an_answer_that_calls_a_tool():
    """Text beside a tool call is commentary on the way, not the final answer."""
    response = answer(Text("Let me look that up."), call({"city": "Oslo"}))
    assert check_answer(response, request(WEATHER), OutputContract(INVOICE)) is None


def test_the_contract_is_applied_to_a_final_text_answer():
    response = answer(Text('{"amount": 1}'))
    violation = check_answer(response, request(WEATHER), OutputContract(INVOICE))
    assert violation is not None and violation.kind == "schema"


def test_a_text_answer_without_a_contract_is_not_judged():
    assert check_answer(answer(Text("not json at all")), request(), contract=None) is None


# --- violations ----------------------------------------------------------------------------


def test_long_messages_are_truncated():
    violation = Violation("schema", "x" * 1000)
    assert len(violation.message) == MESSAGE_LIMIT
    assert violation.message.endswith("…")


def test_a_violation_never_contains_the_whole_long_answer():
    long_answer = json.dumps([f"line {i} of a long report" for i in range(500)])
    short_city = Tool("get_weather", input_schema={"properties": {"city": {"maxLength": 10}}})
    for violation in [
        OutputContract(INVOICE).check_text(long_answer),  # an array, not an object
        OutputContract(INVOICE).check_text(long_answer[:-1]),  # cut short: not JSON
        check_tool_calls([call({"city": long_answer})], [short_city]),
    ]:
        assert violation is not None
        assert len(violation.message) <= MESSAGE_LIMIT
        assert long_answer not in str(violation)


def test_a_violation_has_one_of_the_quality_kinds():
    with pytest.raises(ValueError, match="unknown quality kind"):
        Violation("timeout", "not a quality error")
    assert {Violation(kind, "m").kind for kind in QUALITY_KINDS} == set(QUALITY_KINDS)
