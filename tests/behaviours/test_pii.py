"""PII masking: detection per kind, placeholders, restore (whole and streamed), requests."""

from __future__ import annotations

import json

import pytest

from engine.behaviours.pii import PII_KINDS, Masker, PiiPolicy, mask_request, restore_response
from engine.core.messages import (
    Image,
    Message,
    Request,
    Response,
    Text,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
)


def mask(text: str, *kinds: str) -> str:
    return Masker(PiiPolicy(frozenset(kinds or PII_KINDS))).mask_text(text)


def kinds_found(text: str) -> dict[str, int]:
    masker = Masker(PiiPolicy())
    masker.mask_text(text)
    return masker.counts


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cpf", ["123.456.789-09", "12345678909", "529.982.247-25"])
def test_a_cpf_with_valid_check_digits_is_masked(cpf: str) -> None:
    assert mask(f"meu CPF é {cpf}.") == "meu CPF é [CPF_1]."


@pytest.mark.parametrize("cpf", ["123.456.789-00", "12345678900", "123.456.789-19"])
def test_a_cpf_with_wrong_check_digits_is_left_alone(cpf: str) -> None:
    assert mask(f"CPF {cpf}") == f"CPF {cpf}"


@pytest.mark.parametrize("cpf", ["111.111.111-11", "00000000000", "999.999.999-99"])
def test_a_cpf_of_one_repeated_digit_is_left_alone(cpf: str) -> None:
    """Repeated digits pass the mod-11 check but are placeholders people type, not CPFs."""
    assert mask(f"CPF {cpf}") == f"CPF {cpf}"


@pytest.mark.parametrize("cnpj", ["12.345.678/0001-95", "12345678000195", "11.222.333/0001-81"])
def test_a_cnpj_with_valid_check_digits_is_masked(cnpj: str) -> None:
    assert mask(f"CNPJ {cnpj} ok") == "CNPJ [CNPJ_1] ok"


@pytest.mark.parametrize("cnpj", ["12.345.678/0001-96", "12345678000194", "00.000.000/0000-00"])
def test_a_cnpj_with_wrong_check_digits_is_left_alone(cnpj: str) -> None:
    assert mask(f"CNPJ {cnpj} ok") == f"CNPJ {cnpj} ok"


def test_a_formatted_alphanumeric_cnpj_is_masked() -> None:
    """The Receita Federal's alphanumeric CNPJ (from July 2026), with its published example."""
    assert mask("CNPJ 12.ABC.345/01DE-35") == "CNPJ [CNPJ_1]"
    assert mask("CNPJ 12.ABC.345/01DE-36") == "CNPJ 12.ABC.345/01DE-36"


@pytest.mark.parametrize(
    "card", ["4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005", "4111111111111111"]
)
def test_a_card_number_passing_luhn_is_masked(card: str) -> None:
    assert mask(f"cartão {card}, validade 12/28") == "cartão [CARD_1], validade 12/28"


@pytest.mark.parametrize("card", ["4111 1111 1111 1112", "5500-0000-0000-0005", "378282246310006"])
def test_a_card_number_failing_luhn_is_left_alone(card: str) -> None:
    assert kinds_found(f"cartão {card}").get("card") is None


def test_a_card_followed_by_its_cvv_is_masked_without_the_cvv() -> None:
    assert mask("4111 1111 1111 1111 123") == "[CARD_1] 123"


@pytest.mark.parametrize(
    "email", ["joao@example.com", "maria.silva+nubank@empresa.com.br", "a_b-c@sub.dominio.io"]
)
def test_an_email_is_masked(email: str) -> None:
    assert mask(f"e-mail: {email}.") == "e-mail: [EMAIL_1]."


@pytest.mark.parametrize(
    "phone",
    [
        "+55 11 91234-5678",
        "(11) 91234-5678",
        "11 3456-7890",
        "011 91234-5678",
        "11912345678",
        "+5511912345678",
        "5511912345678",
        "(21) 9 8765-4321",
        "91234-5678",
    ],
)
def test_a_brazilian_phone_is_masked(phone: str) -> None:
    assert mask(f"meu zap {phone}, obrigado") == "meu zap [PHONE_1], obrigado"


@pytest.mark.parametrize(
    "phone", ["+44 20 7946 0958", "+1 415-555-2671", "+14155552671", "+351 912 345 678"]
)
def test_an_e164_international_phone_is_masked(phone: str) -> None:
    assert mask(f"call {phone} now") == "call [PHONE_1] now"


def test_a_whatsapp_id_is_masked_whole() -> None:
    assert mask("de 5511912345678@s.whatsapp.net") == "de [EMAIL_1]"


@pytest.mark.parametrize(
    ("phrase", "masked"),
    [
        ("agência 1234-5 conta 12345-6", "agência [BANK_ACCOUNT_1] conta [BANK_ACCOUNT_2]"),
        ("ag 0001 c/c 123456-7", "ag [BANK_ACCOUNT_1] c/c [BANK_ACCOUNT_2]"),
        (
            "agencia: 1234 conta corrente: 98765-4",
            "agencia: [BANK_ACCOUNT_1] conta corrente: [BANK_ACCOUNT_2]",
        ),
        ("Ag. 1234 / CC 12345-X", "Ag. [BANK_ACCOUNT_1] / CC [BANK_ACCOUNT_2]"),
        ("conta 12.345-6 agência 0001", "conta [BANK_ACCOUNT_1] agência [BANK_ACCOUNT_2]"),
        ("minha conta corrente 123456-7.", "minha conta corrente [BANK_ACCOUNT_1]."),
    ],
)
def test_bank_agency_and_account_digits_are_masked_and_the_words_kept(
    phrase: str, masked: str
) -> None:
    assert mask(phrase) == masked


@pytest.mark.parametrize(
    "text",
    [
        "R$ 1.234,56",
        "R$ 12.345.678,90",
        "pedido 123456",
        "pedido 1234567",
        "em 2026",
        "de 2019-2026",
        "em 12/05/2026 às 14:30",
        "CEP 01310-100",
        "a conta de luz deu 2026",
        "IP 192.168.100.200",
    ],
)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert mask(text) == text


def test_a_valid_cpf_is_a_cpf_not_a_phone() -> None:
    assert kinds_found("12345678909") == {"cpf": 1}


# --- placeholders and policy --------------------------------------------------------------------


def test_the_same_value_gets_the_same_placeholder_throughout_a_request() -> None:
    masker = Masker(PiiPolicy())
    first = masker.mask_text("CPF 123.456.789-09, e-mail a@b.com")
    second = masker.mask_text("confirma o CPF 123.456.789-09 e o 529.982.247-25?")
    assert first == "CPF [CPF_1], e-mail [EMAIL_1]"
    assert second == "confirma o CPF [CPF_1] e o [CPF_2]?"


def test_counts_are_occurrences_per_kind() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text("123.456.789-09 123.456.789-09 a@b.com (11) 91234-5678")
    assert masker.counts == {"cpf": 2, "email": 1, "phone": 1}
    assert masker.count == 4


def test_a_policy_with_a_subset_of_kinds_masks_only_those() -> None:
    text = "CPF 123.456.789-09, e-mail a@b.com, fone (11) 91234-5678"
    assert mask(text, "email") == "CPF 123.456.789-09, e-mail [EMAIL_1], fone (11) 91234-5678"


def test_a_policy_with_an_unknown_kind_is_rejected_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"rg.*allowed: cpf, cnpj, email, phone, card"):
        PiiPolicy(frozenset({"cpf", "rg"}))


def test_a_policy_given_a_bare_string_is_rejected() -> None:
    with pytest.raises(ValueError, match="collection"):
        PiiPolicy("cpf")  # type: ignore[arg-type]


def test_the_default_policy_masks_every_kind_and_does_not_restore() -> None:
    assert PiiPolicy().kinds == frozenset(PII_KINDS)
    assert PiiPolicy().restore is False


def test_the_masker_repr_shows_counts_never_values() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text("CPF 123.456.789-09")
    assert "123" not in repr(masker)
    assert "'cpf': 1" in repr(masker)


# --- restore ------------------------------------------------------------------------------------

SAMPLE = (
    "Olá, sou a Ana, CPF 123.456.789-09, CNPJ 12.345.678/0001-95, cartão 4111 1111 1111 1111, "
    "e-mail ana@exemplo.com.br, cel +55 11 91234-5678, agência 1234-5 conta 12345-6. "
    "Pagar R$ 1.234,56 do pedido 123456 até 2026."
)


def test_mask_then_restore_gives_back_the_original_text() -> None:
    masker = Masker(PiiPolicy())
    masked = masker.mask_text(SAMPLE)
    assert masker.counts == {
        "cpf": 1, "cnpj": 1, "card": 1, "email": 1, "phone": 1, "bank_account": 2
    }  # fmt: skip
    assert masker.restore_text(masked) == SAMPLE


def test_restore_leaves_placeholders_this_masker_did_not_make() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text("CPF 123.456.789-09")
    assert masker.restore_text("[CPF_1] [CPF_2] [EMAIL_1] [cpf_1]") == (
        "123.456.789-09 [CPF_2] [EMAIL_1] [cpf_1]"
    )


def test_a_placeholder_already_in_the_text_is_never_issued() -> None:
    """A user quoting an unrestored answer ("[CPF_1]") keeps their text after restore."""
    masker = Masker(PiiPolicy())
    masked = masker.mask_text("antes: [CPF_1]; agora: 123.456.789-09")
    assert masked == "antes: [CPF_1]; agora: [CPF_2]"
    assert masker.restore_text(masked) == "antes: [CPF_1]; agora: 123.456.789-09"


def test_the_stream_restorer_holds_back_a_partial_placeholder() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text("CPF 123.456.789-09")
    restorer = masker.stream_restorer()
    assert restorer.feed("seu CPF [CP") == "seu CPF "
    assert restorer.feed("F_1] confere") == "123.456.789-09 confere"
    assert restorer.feed(" [x") == " [x"
    assert restorer.flush() == ""


def test_the_stream_restorer_gives_what_restore_text_gives_for_every_split() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text(SAMPLE)
    answer = "Ana [CPF_1], [CARD_1][EMAIL_1] e [BANK_ACCOUNT_2]; [CPF_9] [CPF_1"
    expected = masker.restore_text(answer)
    for i in range(len(answer) + 1):
        for j in range(i, len(answer) + 1):
            restorer = masker.stream_restorer()
            pieces = [answer[:i], answer[i:j], answer[j:]]
            assert "".join(map(restorer.feed, pieces)) + restorer.flush() == expected, (i, j)


def test_the_stream_restorer_fed_one_character_at_a_time_restores_everything() -> None:
    masker = Masker(PiiPolicy())
    masked = masker.mask_text(SAMPLE)
    restorer = masker.stream_restorer()
    assert "".join(map(restorer.feed, masked)) + restorer.flush() == SAMPLE


def test_restore_response_restores_text_and_tool_call_arguments() -> None:
    masker = Masker(PiiPolicy())
    masker.mask_text("CPF 123.456.789-09, e-mail ana@exemplo.com")
    call = ToolCall(
        "call_1",
        "lookup",
        {"cpf": "[CPF_1]", "filter": {"emails": ["[EMAIL_1]", "x"]}, "limit": 5},
        '{"cpf": "[CPF_1]"}',
    )
    response = Response((Text("CPF [CPF_1] ok"), call), "tool_use", Usage(), "m")
    restored = restore_response(response, masker)
    assert restored.text == "CPF 123.456.789-09 ok"
    assert restored.tool_calls[0].arguments == {
        "cpf": "123.456.789-09",
        "filter": {"emails": ["ana@exemplo.com", "x"]},
        "limit": 5,
    }
    assert json.loads(restored.tool_calls[0].raw_arguments or "") == {"cpf": "123.456.789-09"}


# --- requests -----------------------------------------------------------------------------------

RAW = [
    "123.456.789-09",
    "ana@exemplo.com",
    "4111 1111 1111 1111",
    "12.345.678/0001-95",
    "91234-5678",
    "98765",
    "52998224725",
]


def a_request() -> Request:
    history_call = ToolCall(
        "call_1",
        "find_customer",
        {"query": {"cpf": "123.456.789-09", "emails": ["ana@exemplo.com"]}},
        '{"query": {"cpf": "123.456.789-09", "emails": ["ana@exemplo.com"]}}',
    )
    return Request(
        system="Atenda a cliente ana@exemplo.com com cuidado.",
        messages=(
            Message.user("Meu CPF é 123.456.789-09 e o cartão 4111 1111 1111 1111."),
            Message("assistant", (Text("Vou procurar."), history_call)),
            Message(
                "user",
                (
                    ToolResult(
                        "call_1",
                        (
                            Text("cliente CNPJ 12.345.678/0001-95, fone (11) 91234-5678"),
                            Image(url="https://example.com/rg.png"),
                        ),
                    ),
                    Text("Depositar na agência 1234 conta 98765-4"),
                ),
            ),
            Message("assistant", (ToolCall("call_2", "pay", {"cpf": 52998224725}),)),
        ),
        tools=(Tool("find_customer", "Finds by CPF, e.g. 123.456.789-09"),),
    )


def test_mask_request_masks_system_messages_tool_results_and_tool_call_arguments() -> None:
    masked, masker = mask_request(a_request(), PiiPolicy())
    assert masked.system == "Atenda a cliente [EMAIL_1] com cuidado."
    assert masked.messages[0].text == "Meu CPF é [CPF_1] e o cartão [CARD_1]."
    call = masked.messages[1].content[1]
    assert isinstance(call, ToolCall)
    assert call.arguments == {"query": {"cpf": "[CPF_1]", "emails": ["[EMAIL_1]"]}}
    assert json.loads(call.raw_arguments or "") == call.arguments
    result = masked.messages[2].content[0]
    assert isinstance(result, ToolResult)
    assert result.content[0] == Text("cliente CNPJ [CNPJ_1], fone [PHONE_1]")
    assert masked.messages[2].content[1] == Text(
        "Depositar na agência [BANK_ACCOUNT_1] conta [BANK_ACCOUNT_2]"
    )
    assert masker.counts == {
        "email": 2, "cpf": 3, "card": 1, "cnpj": 1, "phone": 1, "bank_account": 2
    }  # fmt: skip


def test_the_masked_request_contains_none_of_the_raw_values() -> None:
    masked, _ = mask_request(a_request().replace(tools=()), PiiPolicy())
    for raw in RAW:
        assert raw not in repr(masked), raw


def test_a_pii_integer_in_tool_call_arguments_becomes_its_placeholder() -> None:
    """A CPF sent as a JSON number would otherwise reach the provider unmasked."""
    masked, _ = mask_request(a_request(), PiiPolicy())
    call = masked.messages[3].content[0]
    assert isinstance(call, ToolCall)
    assert call.arguments == {"cpf": "[CPF_2]"}


def test_a_tool_call_counts_once_although_its_arguments_are_held_twice() -> None:
    """`arguments` and `raw_arguments` are one occurrence, not two."""
    call = ToolCall("c", "f", {"email": "a@b.com"}, '{"email": "a@b.com"}')
    request = Request(messages=(Message("assistant", (call,)),))
    _, masker = mask_request(request, PiiPolicy())
    assert masker.counts == {"email": 1}


def test_invalid_json_raw_arguments_are_masked_as_text() -> None:
    call = ToolCall("c", "f", None, '{"email": "a@b.com"')
    request = Request(messages=(Message("assistant", (call,)),))
    masked, _ = mask_request(request, PiiPolicy())
    assert masked.messages[0].content[0] == ToolCall("c", "f", None, '{"email": "[EMAIL_1]"')


def test_images_and_tool_definitions_are_left_alone() -> None:
    request = a_request()
    masked, _ = mask_request(request, PiiPolicy())
    assert masked.tools == request.tools
    assert masked.messages[2].content[0].content[1] == Image(url="https://example.com/rg.png")  # type: ignore[union-attr]


def test_a_request_masked_then_its_echo_restored_gives_the_original_text() -> None:
    request = a_request()
    masked, masker = mask_request(request, PiiPolicy(restore=True))
    echo = Response((Text(masked.messages[0].text),), "end_turn", Usage(), "m")
    assert restore_response(echo, masker).text == request.messages[0].text


def test_an_empty_policy_returns_the_request_unchanged() -> None:
    request = a_request()
    masked, masker = mask_request(request, PiiPolicy(frozenset()))
    assert masked is request
    assert masker.count == 0
