"""The fake providers' prompt caches over the wire, in both dialects, on the socket server and
the in-process transport alike: written cold, read warm, cold again five minutes after their
last use on the fake's own clock, kept per provider, model and prefix; and the call log that
says what each call read and wrote."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, an_body, oa_body

from engine.core.clock import VirtualClock
from simulations.fakes.cache import PromptCache

POLICY = "You are the support agent of an online shop. "
LONG = POLICY * 120  # ~1,400 tokens: above Sonnet's minimum, below Haiku 4.5's
LONGER = POLICY * 400  # ~4,500 tokens: above every model's minimum
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


def marked(text: str = LONG) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


async def ask(
    backend,
    dialect: str,
    question: str = "Where is my order?",
    *,
    prefix: str = "",
    model: str | None = None,
    system: Any = None,
) -> dict[str, int]:
    """One call with the long prompt (a marked system prompt in Anthropic's dialect, a system
    message in OpenAI's); its usage as (total, read, written) prompt tokens."""
    if dialect == "anthropic":
        body = an_body(question, model=model or "claude-sonnet-4-5")
        body["system"] = marked() if system is None else system
        headers = AN_HEADERS
    else:
        body = oa_body(question, model=model or "gpt-4.1-mini")
        body["messages"].insert(0, {"role": "system", "content": LONG})
        headers = OA_HEADERS
    response = await backend.client.post(prefix + PATHS[dialect], headers=headers, json=body)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    if dialect == "anthropic":
        read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        return {"total": usage["input_tokens"] + read + written, "read": read, "written": written}
    read = usage["prompt_tokens_details"]["cached_tokens"]
    return {"total": usage["prompt_tokens"], "read": read, "written": 0}


async def test_a_marked_prefix_is_written_cold_then_read_warm(backend):
    first = await ask(backend, "anthropic", "one")
    second = await ask(backend, "anthropic", "two")
    assert first["read"] == 0 and first["written"] > 1024
    assert second == {**second, "read": first["written"], "written": 0}
    assert second["total"] - second["read"] < 20, "only the question is plain input"


async def test_nothing_is_cached_without_a_breakpoint(backend):
    await ask(backend, "anthropic", system=LONG)
    again = await ask(backend, "anthropic", system=LONG)
    assert again["read"] == again["written"] == 0


async def test_a_marked_prefix_below_the_models_minimum_is_billed_as_plain_input(backend):
    """Haiku 4.5 caches from 4,096 tokens, Sonnet 4.5 from 1,024 (Anthropic's guide)."""
    short_on_haiku = [await ask(backend, "anthropic", model="claude-haiku-4-5") for _ in "ab"]
    assert all(u["read"] == u["written"] == 0 for u in short_on_haiku)
    assert (await ask(backend, "anthropic", model="claude-sonnet-4-5"))["written"] > 1024
    long_on_haiku = await ask(backend, "anthropic", model="claude-haiku-4-5", system=marked(LONGER))
    assert long_on_haiku["written"] > 4096


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_a_prefix_goes_cold_five_minutes_after_its_last_use(backend, dialect):
    """A read keeps it warm: 299 s after each use it is read, 300 s after the last it is gone."""
    clock: VirtualClock = backend.clock  # type: ignore[assignment]
    cold = await ask(backend, dialect)
    clock.advance(299)
    warm = await ask(backend, dialect)
    clock.advance(299)  # 598 s after the write, 299 s after the read
    still_warm = await ask(backend, dialect)
    clock.advance(300)
    cold_again = await ask(backend, dialect)
    assert cold["read"] == cold_again["read"] == 0
    assert warm["read"] == still_warm["read"] >= 1024
    if dialect == "anthropic":
        assert cold["written"] == cold_again["written"] == warm["read"]


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_two_providers_of_one_dialect_have_caches_of_their_own(backend, dialect):
    """A base URL is a provider: the one at /eu starts cold while the other is warm, and the
    log names each call's provider."""
    await ask(backend, dialect)
    assert (await ask(backend, dialect))["read"] >= 1024
    assert (await ask(backend, dialect, prefix="/eu"))["read"] == 0
    assert (await ask(backend, dialect, prefix="/eu"))["read"] >= 1024
    host = str(backend.client.base_url.netloc.decode())
    assert [c.provider for c in backend.fake.calls()] == [host, host, host + "/eu", host + "/eu"]


async def test_each_model_of_a_provider_has_a_cache_of_its_own(backend):
    await ask(backend, "anthropic", model="claude-sonnet-4-5")
    other = await ask(backend, "anthropic", model="claude-opus-4-1")
    assert other["read"] == 0 and other["written"] > 1024


async def test_openai_caches_long_prompts_in_128_token_steps(backend):
    await ask(backend, "openai", "one")
    cached = (await ask(backend, "openai", "a different question"))["read"]
    assert cached >= 1024 and (cached - 1024) % 128 == 0


async def test_openai_does_not_cache_short_prompts(backend):
    await backend.openai("short")
    usage = (await backend.openai("short")).json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


async def test_a_configured_hit_ratio_overrides_the_cache(backend):
    backend.fake.configure(cache_hit_ratio=0.5)
    usage = (await backend.openai("y" * 400)).json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] // 2


async def test_the_log_says_what_each_call_read_and_wrote(backend):
    """`input_tokens` in the log is the whole prompt; the cached tokens are parts of it."""
    clock: VirtualClock = backend.clock  # type: ignore[assignment]
    wire = [await ask(backend, "anthropic")]
    clock.advance(60)
    wire.append(await ask(backend, "anthropic"))
    logged = backend.fake.calls("claude-sonnet-4-5")
    assert [c.time - logged[0].time for c in logged] == [0, 60]
    assert [
        (c.usage["input_tokens"], c.usage["cache_read_tokens"], c.usage["cache_write_tokens"])
        for c in logged
    ] == [(u["total"], u["read"], u["written"]) for u in wire]


def test_a_full_cache_forgets_expired_prefixes_before_warm_ones():
    clock = VirtualClock()
    cache = PromptCache(now=clock.now)
    cache.MAX_ENTRIES = 2
    prompt = "x" * 4 * 1100  # one 1,024-token block: one entry

    def cached(text: str) -> int:
        return cache.openai("provider", "gpt-4.1-mini", text).cache_read

    cached("a" + prompt)
    clock.advance(301)  # the first prompt's prefix expires, still counted until dropped
    cached("b" + prompt)
    cached("c" + prompt)
    assert cached("b" + prompt) == 1024, "the warm prefix outlives the expired one"
