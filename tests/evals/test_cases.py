"""Case files: every key parsed, every mistake named in one line, and each check's reason."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from engine.behaviours.contracts import OutputContract
from engine.core.errors import ConfigError
from engine.evals.cases import Case, load_cases, parse_cases

FULL = """
route = "support"
min_pass_rate = 0.75

[[cases]]
name = "refund intent"
prompt = "I want my money back"
system = "Classify the message."
max_tokens = 200
json_schema = { type = "object", required = ["intent"] }
regex = "(?i)refund"
must_contain = ["refund", "order"]
max_length = 400

[[cases]]
name = "from a file"
prompt = "Where is my order?"
json_schema = "schemas/intent.json"
"""


def parse(text: str):
    return parse_cases(tomllib.loads(text), source="cases.toml")


def one_case(body: str) -> str:
    return f'[[cases]]\nname = "a"\nprompt = "hi"\n{body}\n'


def test_every_key_of_a_case_file_is_read(tmp_path):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "intent.json").write_text(json.dumps({"required": ["intent"]}))
    (tmp_path / "cases.toml").write_text(FULL)
    cases = load_cases(tmp_path / "cases.toml")
    assert cases.route == "support" and cases.min_pass_rate == 0.75
    assert cases.source == str(tmp_path / "cases.toml")
    first, second = cases.cases
    assert (first.name, first.prompt, first.system, first.max_tokens, first.max_length) == (
        "refund intent", "I want my money back", "Classify the message.", 200, 400,
    )  # fmt: skip
    assert first.regex is not None and first.regex.pattern == "(?i)refund"
    assert first.must_contain == ("refund", "order")
    assert first.json_schema is not None and first.json_schema.schema["required"] == ["intent"]
    assert second.json_schema is not None and second.json_schema.schema == {"required": ["intent"]}
    request = first.request()
    assert request.system == "Classify the message." and request.max_tokens == 200
    assert request.messages[0].text == "I want my money back"


def test_the_minimum_pass_rate_defaults_to_ninety_percent_and_the_route_to_none():
    cases = parse(one_case('regex = "x"'))
    assert cases.min_pass_rate == 0.9 and cases.route is None


def case(**checks) -> Case:
    return Case("c", "hi", **checks)


def test_an_answer_passes_when_every_check_passes():
    checked = case(
        json_schema=OutputContract({"type": "object", "required": ["intent"]}),
        regex=re.compile("(?i)REFUND"),
        must_contain=("refund",),
        max_length=40,
    )
    assert checked.check('{"intent": "refund"}') is None


def test_each_check_names_itself_in_its_reason():
    schema = OutputContract({"type": "object", "properties": {"intent": {"enum": ["refund"]}}})
    assert case(regex=re.compile("(?i)refund")).check("no") == "regex '(?i)refund' not found"
    assert case(must_contain=("refund", "order")).check("refund") == "must_contain 'order' missing"
    assert case(max_length=400).check("x" * 512) == "max_length 400 exceeded (512)"
    reason = case(json_schema=schema).check('{"intent": "maybe"}')
    assert reason is not None and reason.startswith("json_schema: schema: $.intent: ")
    reason = case(json_schema=schema).check("I think it is a refund")
    assert reason is not None and reason.startswith("json_schema: invalid_json: ")


def test_the_reason_is_the_first_check_that_fails_in_file_order():
    both = case(
        json_schema=OutputContract({"type": "object"}),
        regex=re.compile("refund"),
        max_length=3,
    )
    assert both.check("not json").startswith("json_schema: ")  # type: ignore[union-attr]
    assert both.check("{}") == "regex 'refund' not found"


def test_a_reason_never_carries_the_whole_answer():
    answer = "SECRET " * 1000
    for checked in (
        case(regex=re.compile("x")),
        case(max_length=10),
        case(json_schema=OutputContract({"type": "string", "maxLength": 3})),
    ):
        reason = checked.check(answer) or checked.check(json.dumps(answer))
        assert reason is not None and len(reason) <= 300


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('routes = "x"\n' + one_case('regex = "x"'), "routes: unknown key"),
        ('route = ""\n' + one_case('regex = "x"'), "route: must name a route"),
        ("min_pass_rate = 1.5\n" + one_case('regex = "x"'), "min_pass_rate: must be a share"),
        ("min_pass_rate = true\n" + one_case('regex = "x"'), "min_pass_rate: must be a share"),
        ('route = "support"\n', "cases: define at least one case"),
        ("cases = 3\n", "cases: define at least one case"),
        ("cases = [3]\n", "cases[0]: must be a table"),
        ('[[cases]]\nprompt = "hi"\nregex = "x"\n', "cases[0].name: must be a non-empty string"),
        ('[[cases]]\nname = "a"\nregex = "x"\n', "cases[0].prompt: must be a non-empty string"),
        (one_case('regex = "x"\nsystem = 3'), "cases[0].system: must be a non-empty string"),
        (one_case('regex = "x"\nmax_tokens = 0'), "cases[0].max_tokens: must be a positive"),
        (one_case('regex = "x"\nexpected = "y"'), "cases[0].expected: unknown key"),
        (one_case(""), "cases[0]: give at least one check: json_schema, regex, must_contain"),
        (one_case('regex = "(unclosed"'), "cases[0].regex: not a valid regular expression: "),
        (one_case("regex = 3"), "cases[0].regex: must be a regular expression"),
        (one_case("must_contain = []"), "cases[0].must_contain: must be a non-empty list"),
        (one_case('must_contain = "refund"'), "cases[0].must_contain: must be a non-empty list"),
        (one_case('must_contain = ["a", ""]'), "cases[0].must_contain: must be a non-empty list"),
        (one_case("max_length = -1"), "cases[0].max_length: must be a positive integer"),
        (one_case("max_length = 1.5"), "cases[0].max_length: must be a positive integer"),
        (one_case("json_schema = 3"), "cases[0].json_schema: must be a JSON Schema"),
        (one_case('json_schema = { type = "thing" }'), "cases[0].json_schema: invalid output"),
        (one_case('json_schema = "missing.json"'), "cases[0].json_schema: no such file: "),
        (
            one_case('regex = "x"') + '[[cases]]\nname = "a"\nprompt = "again"\nregex = "y"\n',
            "cases[1].name: 'a' is already the name of cases[0]",
        ),
    ],
)
def test_a_bad_case_file_fails_with_one_line_naming_the_file_and_key(text, message):
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert str(caught.value).startswith(f"cases.toml: {message}")
    assert "\n" not in str(caught.value)


def test_a_missing_or_broken_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file"):
        load_cases(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[[cases]\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_cases(tmp_path / "bad.toml")
