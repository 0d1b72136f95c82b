"""Provider error texts as they may be kept: no key, no text quoted from the request, short."""

from __future__ import annotations

from engine.core.messages import Message, Request, Text, ToolCall, ToolResult
from engine.core.scrub import MESSAGE_LIMIT, Scrubber

KEY = "sk-ant-api03-ReallySecret-0001"


def test_a_configured_key_is_removed_wherever_it_appears():
    scrub = Scrubber([KEY, "plain-custom-secret"])
    assert scrub(f"invalid x-api-key {KEY}!") == "invalid x-api-key ***!"
    assert "plain-custom-secret" not in scrub("key=plain-custom-secret rejected")


def test_key_shapes_are_removed_even_when_not_configured():
    text = Scrubber()(
        "Incorrect API key provided: sk-proj-abcd1234efgh; Authorization: Bearer eyJhbGciOiJI.x.y;"
        " api_key=abcdef123456 AIzaSyA1234567890abcdefghijklmnop AKIAABCDEFGHIJKLMNOP"
    )
    for secret in (
        "abcd1234efgh",
        "eyJhbGciOiJI",
        "abcdef123456",
        "A1234567890abc",
        "ABCDEFGHIJKLMNOP",
    ):
        assert secret not in text, secret


def test_text_quoted_from_anywhere_in_the_request_is_cut():
    request = Request(
        messages=(
            Message.user("Refund order 5521 to the card that ends in 4242, please"),
            Message(
                "assistant", (ToolCall("c1", "refund", None, '{"order": "5521-XYZ-ABCDEFGH"}'),)
            ),
            Message("user", (ToolResult("c1", (Text("refund queued under ticket T-99887766"),)),)),
        ),
        system="You are the billing assistant of an online shop.",
    )
    message = (
        "bad content 'Refund order 5521 to the card that ends in 4242' in 'You are the billing "
        "assistant of' and '{\"order\": \"5521-XYZ-ABCDEFGH\"}' and 'ticket T-99887766' (ok)"
    )
    kept = Scrubber().error_text(message, request)
    assert kept == "bad content '[…]' in '[…]' and '[…]' and 'ticket T-99887766' (ok)"


def test_an_error_text_is_cut_to_the_limit():
    kept = Scrubber().error_text("x " * 1000)
    assert len(kept) == MESSAGE_LIMIT and kept.endswith("…")


def test_a_short_prompt_quoted_at_any_place_in_an_error_is_cut():
    """Issue 35: a prompt of 24 to 35 characters quoted by a provider's error was kept when it
    did not hold a window aligned on the scan's step."""
    scrub = Scrubber()
    for length in (24, 25, 30, 35):
        prompt = "my card is 4111 1111 and pin 998877665544"[:length]
        request = Request(messages=(Message.user(prompt),))
        for offset in range(0, 14):
            error = "x" * offset + f"invalid request: '{prompt}' is not allowed here"
            kept = scrub.error_text(error, request)
            assert prompt not in kept, (length, offset, kept)
            assert prompt[:12] not in kept or prompt[-12:] not in kept, (length, offset, kept)


def test_words_shorter_than_a_quote_are_kept_in_an_error():
    scrub = Scrubber()
    request = Request(messages=(Message.user("please summarise the invalid request for me today"),))
    error = "invalid request: the model is overloaded, retry later"
    assert scrub.error_text(error, request) == error
