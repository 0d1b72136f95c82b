"""A route's behaviours from the field, end to end through `Switchover` and the provider adapters
over the in-process fake providers on virtual time: PII masked before any target, a prompt per
target, output contracts, and a tool conversation that changes provider halfway."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from engine.config import parse_config
from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.errors import AllProvidersUnavailable
from engine.core.messages import Message, Request, Text, TextDelta, Tool, ToolCall, ToolResult
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeTransport

PRIMARY, BACKUP = "claude-sonnet-4-5", "gpt-4.1-mini"
CPF, CARD = "123.456.789-09", "4111 1111 1111 1111"
PROVIDERS = """
[providers.claude]
kind = "anthropic"
base_url = "http://anthropic.fake"
api_key_env = "K"
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "K"
"""


class Rig:
    def __init__(
        self,
        route: str,
        extra: str = "",
        record_to: DataPaths | None = None,
        providers: str = PROVIDERS,
    ) -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock, keep_bodies=True)
        self.attempts: list[Attempt] = []
        text = providers + extra + "[routes.support]\n" + route
        self.sw = Switchover(
            parse_config(tomllib.loads(text)),
            clock=self.clock,
            transport=self.fake,
            hooks=[self.attempts.append],
            environ={"K": "test-key"},
            record_to=record_to,
        )

    def script(self, model: str, *faults: str) -> None:
        self.fake.script(model, faults)

    def complete(self, prompt: Any, **fields: Any) -> Any:
        return self.clock.run(self.sw.complete("support", prompt, **fields))

    def stream_text(self, prompt: str) -> str:
        async def read() -> str:
            events = [e async for e in self.sw.stream("support", prompt)]
            return "".join(e.text for e in events if isinstance(e, TextDelta))

        return self.clock.run(read())

    def sent_to(self, model: str) -> list[str]:
        return [json.dumps(body, ensure_ascii=False) for body in self.fake.sent_to(model)]


# --- PII -------------------------------------------------------------------------------------


def test_no_provider_receives_the_raw_cpf_or_card_number_even_on_fallback():
    rig = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\npii = true\n')
    rig.script(PRIMARY, "529", "529")
    answer = rig.complete(f"Meu CPF é {CPF} e o cartão {CARD}, pode cancelar?")
    assert answer.provider == "gpt"
    sent = rig.sent_to(PRIMARY) + rig.sent_to(BACKUP)
    assert len(sent) == 3
    for body in sent:
        assert CPF not in body and CARD not in body and "4111" not in body
        assert "[CPF_1]" in body and "[CARD_1]" in body
    assert [a.pii_masked for a in rig.attempts] == [2, 2, 2]


def test_the_answer_carries_placeholders_unless_the_route_restores_them():
    plain = Rig(f'targets = ["claude/{PRIMARY}"]\npii = ["cpf"]\n')
    assert "[CPF_1]" in plain.complete(f"CPF {CPF}").text  # the fake echoes what it received
    restoring = Rig(f'targets = ["claude/{PRIMARY}"]\npii = ["cpf"]\npii_restore = true\n')
    answer = restoring.complete(f"CPF {CPF}")
    assert CPF in answer.text and "[CPF_1]" not in answer.text
    assert CPF not in restoring.sent_to(PRIMARY)[0]


def test_a_streamed_answer_is_restored_even_when_a_placeholder_is_cut_across_deltas():
    rig = Rig(f'targets = ["gpt/{BACKUP}"]\npii = true\npii_restore = true\n')
    text = rig.stream_text(f"confirme o e-mail ana.souza@example.com.br e o CPF {CPF} por favor")
    assert "ana.souza@example.com.br" in text and CPF in text and "[" not in text
    assert "ana.souza" not in rig.sent_to(BACKUP)[0]


def test_an_end_user_id_that_is_a_phone_number_is_masked_too():
    rig = Rig(f'targets = ["gpt/{BACKUP}"]\npii = ["phone"]\n')
    rig.complete("oi", user="+55 11 91234-5678")
    (body,) = rig.sent_to(BACKUP)
    assert "91234" not in body and json.loads(body)["user"] == "[PHONE_1]"


def test_only_the_kinds_a_route_names_are_masked():
    rig = Rig(f'targets = ["claude/{PRIMARY}"]\npii = ["card"]\n')
    rig.complete(f"CPF {CPF} cartão {CARD}")
    (body,) = rig.sent_to(PRIMARY)
    assert CPF in body and CARD not in body


# --- the order of targets ---------------------------------------------------------------------


def first_targets(rig: Rig, requests: int) -> list[str]:
    """The target each request tried first."""
    firsts = []
    for _ in range(requests):
        before = len(rig.attempts)
        rig.complete("hi")
        firsts.append(rig.attempts[before].target.split("/")[0])
    return firsts


def test_an_adaptive_route_tries_the_healthiest_target_first():
    rig = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\nadaptive_order = true\n')
    firsts = first_targets(rig, 40)  # no data: both score 1.0, ties in random order
    assert {"claude", "gpt"} == set(firsts)
    rig.script(PRIMARY, "500", "500")
    while rig.fake.app.controls.scripted(PRIMARY):  # until claude was tried, and failed twice
        rig.complete("hi")
    assert any(a.target.startswith("claude") and a.outcome == "error" for a in rig.attempts)
    assert first_targets(rig, 20) == ["gpt"] * 20
    rig.clock.advance(301)  # the failures leave the 5-minute window: claude scores 1.0 again
    assert "claude" in first_targets(rig, 20)


def test_a_plain_route_keeps_its_order_and_own_keys_can_go_first():
    plain = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n')
    assert first_targets(plain, 10) == ["claude"] * 10
    own = PROVIDERS.replace('base_url = "http://openai.fake/v1"',
                            'base_url = "http://openai.fake/v1"\nkey_kind = "own"')  # fmt: skip
    byok = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\nown_keys_first = true\n',
               providers=own)  # fmt: skip
    assert first_targets(byok, 10) == ["gpt"] * 10
    assert byok.attempts[0].key_kind == "own"


# --- a prompt per target ---------------------------------------------------------------------

PROMPTS = """
[prompts.support-gpt]
version = "3"
system = "Responda em português, em no máximo duas frases."
[prompts.support-claude]
version = "2026-11-30"
template = "{system}\\nNunca prometa reembolso."
"""


def test_each_target_gets_its_own_prompt_and_the_attempt_records_its_version():
    rig = Rig(
        f'targets = [{{ target = "claude/{PRIMARY}", prompt = "support-claude" }}, '
        f'{{ target = "gpt/{BACKUP}", prompt = "support-gpt" }}]\n',
        extra=PROMPTS,
    )
    rig.script(PRIMARY, "529", "529")
    rig.complete("Onde está meu pedido?", system="Você atende clientes da loja.")
    claude = json.loads(rig.sent_to(PRIMARY)[0])
    assert claude["system"] == "Você atende clientes da loja.\nNunca prometa reembolso."
    gpt = json.loads(rig.sent_to(BACKUP)[0])
    assert gpt["messages"][0] == {
        "role": "system",
        "content": "Responda em português, em no máximo duas frases.",
    }
    assert [a.prompt_version for a in rig.attempts] == [
        "support-claude@2026-11-30",
        "support-claude@2026-11-30",
        "support-gpt@3",
    ]


def test_a_target_without_a_prompt_sends_the_callers_system_prompt_unchanged():
    rig = Rig(f'targets = ["claude/{PRIMARY}"]\n')
    rig.complete("oi", system="Seja breve.")
    assert json.loads(rig.sent_to(PRIMARY)[0])["system"] == "Seja breve."
    assert rig.attempts[0].prompt_version is None


# --- output contracts ------------------------------------------------------------------------

SCHEMA = (
    'output_schema = { type = "object", required = ["intent"], properties = '
    '{ intent = { enum = ["refund", "status", "other"] } } }\n'
)
VALID = 'ok:text={"intent": "refund"}'


def test_an_invalid_json_answer_is_a_quality_error_counted_on_the_provider_that_gave_it(tmp_path):
    paths = DataPaths(tmp_path)
    rig = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n' + SCHEMA, record_to=paths)
    rig.script(PRIMARY, "ok:text=I think it is a refund")
    answer = rig.complete("classify: I want my money back")
    assert answer.provider == "claude"  # recorded, not a fallback: the route did not ask for one
    assert answer.quality_error is not None and answer.quality_error.startswith("invalid_json")
    (attempt,) = rig.attempts
    assert attempt.outcome == "success" and attempt.quality_error == answer.quality_error
    rig.sw.close()
    rig.clock.run(rig.sw.aclose())
    pipeline = Pipeline(paths, now=lambda: rig.clock.wall())
    try:
        pipeline.cycle()
        rows = pipeline.con.execute(
            "SELECT provider, sum(quality_errors)::INT FROM rollup_minute GROUP BY provider"
        ).fetchall()
    finally:
        pipeline.close()
    assert rows == [("claude", 1)]


def test_a_route_that_falls_back_on_quality_retries_once_then_uses_the_backup():
    rig = Rig(
        f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n'
        + SCHEMA
        + 'on_quality_error = "fall_back"\n'
    )
    rig.script(PRIMARY, 'ok:text={"intent": "maybe"}', "ok:text=not json")
    rig.script(BACKUP, VALID)
    answer = rig.complete("classify: I want my money back")
    assert answer.provider == "gpt" and json.loads(answer.text) == {"intent": "refund"}
    assert answer.quality_error is None
    assert [(a.target, a.decision, a.error_class) for a in rig.attempts] == [
        (f"claude/{PRIMARY}", "retry", "output_schema"),
        (f"claude/{PRIMARY}", "fall_back", "output_invalid_json"),
        (f"gpt/{BACKUP}", "served", None),
    ]
    assert rig.attempts[0].output_tokens > 0  # the broken answer was billed: it is wasted spend
    breaker = rig.clock.run(rig.sw.breakers.snapshot(f"claude/{PRIMARY}"))
    assert breaker.status == "closed" and breaker.consecutive_failures == 0


def test_when_no_target_meets_the_contract_the_caller_gets_an_error_not_a_broken_answer():
    rig = Rig(
        f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n'
        + SCHEMA
        + 'on_quality_error = "fall_back"\n'
    )
    rig.fake.app.reply_text = "no JSON here"
    with pytest.raises(AllProvidersUnavailable, match="output_invalid_json"):
        rig.complete("classify: hello")
    assert len(rig.attempts) == 3


def test_tool_call_arguments_are_validated_before_they_are_returned():
    rig = Rig(f'targets = ["claude/{PRIMARY}"]\n')
    order_id = {"type": "string", "pattern": "^[0-9]{6}$"}
    tool = Tool("lookup_order", "", {"type": "object", "properties": {"order_id": order_id},
                                     "required": ["order_id"]})  # fmt: skip
    answer = rig.complete("where is my order?", tools=(tool,))
    (call,) = answer.tool_calls  # the fake fills the first string property with the user's text
    assert call.arguments == {"order_id": "where is my order?"}
    assert answer.quality_error is not None
    assert answer.quality_error.startswith("tool_arguments: call lookup_order: $.order_id")
    assert rig.attempts[0].quality_error == answer.quality_error


# --- a tool conversation across providers ----------------------------------------------------

LOOKUP = Tool(
    "lookup_order",
    "Find an order by its number",
    {"type": "object", "properties": {"order_number": {"type": "string"}},
     "required": ["order_number"]},
)  # fmt: skip


def test_a_tool_conversation_switches_provider_midway_and_completes():
    rig = Rig(f'targets = ["claude/{PRIMARY}", "gpt/{BACKUP}"]\n')
    ask = Message.user("Onde está o pedido 884213?")
    first = rig.complete(Request(messages=(ask,), tools=(LOOKUP,)))
    assert first.provider == "claude" and first.quality_error is None
    (call,) = first.tool_calls
    assert isinstance(call, ToolCall) and call.arguments is not None
    rig.script(PRIMARY, "529", "529")  # the primary goes down between the two turns
    second = rig.complete(
        Request(
            messages=(
                ask,
                Message("assistant", tuple(first.content)),
                Message("user", (ToolResult(call.id, (Text("em trânsito, chega amanhã"),)),)),
            ),
            tools=(LOOKUP,),
        )
    )
    assert second.provider == "gpt" and second.fallback_depth == 1
    # The backup saw the whole conversation in its own dialect, Anthropic's call id included.
    assert second.text == f"tool results: {call.id}=em trânsito, chega amanhã"
    sent = json.loads(rig.sent_to(BACKUP)[-1])
    assert sent["messages"][1]["tool_calls"][0]["id"] == call.id
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": "em trânsito, chega amanhã",
    }
