"""The SSE parser: framing only, whatever way the network splits the bytes."""

from __future__ import annotations

import pytest

from engine.providers.sse import ServerSentEvent, SSEDecoder, aiter_sse, parse_sse

ANTHROPIC_LIKE = (
    b"event: message_start\n"
    b'data: {"type":"message_start"}\n'
    b"\n"
    b"event: ping\n"
    b'data: {"type": "ping"}\n'
    b"\n"
)


def test_event_and_data_lines_make_one_event():
    assert parse_sse(ANTHROPIC_LIKE) == [
        ServerSentEvent(data='{"type":"message_start"}', event="message_start"),
        ServerSentEvent(data='{"type": "ping"}', event="ping"),
    ]


def test_data_without_event_line_has_no_event_name():
    assert parse_sse(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [
        ServerSentEvent(data='{"a":1}'),
        ServerSentEvent(data="[DONE]"),
    ]


def test_multi_line_data_is_joined_with_newlines():
    assert parse_sse(b"data: first\ndata: second\ndata:\n\n") == [
        ServerSentEvent(data="first\nsecond\n")
    ]


def test_comment_lines_are_ignored():
    stream = b": keep-alive\n\n: OPENROUTER PROCESSING\ndata: x\n: inside\n\n"
    assert parse_sse(stream) == [ServerSentEvent(data="x")]


def test_only_one_space_after_the_colon_is_stripped():
    assert parse_sse(b"data:no-space\n\ndata:  two\n\n") == [
        ServerSentEvent(data="no-space"),
        ServerSentEvent(data=" two"),
    ]


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_any_line_ending_is_accepted(line_end):
    stream = ANTHROPIC_LIKE.replace(b"\n", line_end)
    assert [e.event for e in parse_sse(stream)] == ["message_start", "ping"]


def test_crlf_split_across_chunks_is_one_line_end():
    """A CR at the end of one chunk and its LF at the start of the next must not make an
    extra blank line, which would dispatch the event too early."""
    chunks = [b"event: a\r", b"\ndata: 1\r", b"\n", b"data: 2\r\n\r\n"]
    assert parse_sse(chunks) == [ServerSentEvent(data="1\n2", event="a")]


def test_any_byte_split_gives_the_same_events():
    stream = ANTHROPIC_LIKE.replace(b"\n", b"\r\n") + "data: héllo ✓\r\n\r\n".encode()
    whole = parse_sse(stream)
    for size in range(1, 9):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert parse_sse(chunks) == whole
    assert whole[-1].data == "héllo ✓"


def test_a_leading_byte_order_mark_is_dropped():
    assert parse_sse("\ufeffdata: x\n\n".encode()) == [ServerSentEvent(data="x")]


def test_an_event_with_no_data_is_not_dispatched():
    assert parse_sse(b"event: ping\n\nretry: 100\n\n") == []


def test_id_and_retry_fields_are_kept():
    assert parse_sse(b"id: 7\nretry: 1500\ndata: x\n\ndata: y\n\n") == [
        ServerSentEvent(data="x", id="7", retry=1500),
        ServerSentEvent(data="y", id="7"),
    ]


def test_last_event_without_blank_line_is_delivered_at_end_of_stream():
    assert parse_sse(b"data: 1\n\ndata: [DONE]\n") == [
        ServerSentEvent(data="1"),
        ServerSentEvent(data="[DONE]"),
    ]


def test_a_line_cut_by_the_network_is_dropped_at_end_of_stream():
    assert parse_sse(b'data: 1\n\ndata: {"choi') == [ServerSentEvent(data="1")]


def test_feed_line_takes_lines_already_split():
    decoder = SSEDecoder()
    assert decoder.feed_line("data: x") is None
    assert decoder.feed_line("") == ServerSentEvent(data="x")


async def test_async_iteration_yields_each_event_as_soon_as_it_is_complete():
    seen: list[str] = []

    async def chunks():
        yield b"data: one\n"
        assert seen == []
        yield b"\ndata: tw"
        assert seen == ["one"]
        yield b"o\n\n"

    async for event in aiter_sse(chunks()):
        seen.append(event.data)
    assert seen == ["one", "two"]
