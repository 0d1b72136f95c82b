"""A context overflow falls back only to a larger window (catalogue row 2): the real chain and
adapters over the in-process fake providers, with windows from genai-prices' model data or
from the configuration, through the composition root (`Switchover`) where the configuration
is what is tested."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from engine.config import parse_config
from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.core.errors import AllProvidersUnavailable, ConfigError, RequestFailed
from engine.core.messages import Message, MessageEnd, Request, Response, StreamStart
from engine.fallback.chain import Chain
from engine.fallback.context_windows import window_of
from engine.fallback.target import Target
from engine.providers.openai import OpenAIProvider
from engine.runtime.switchover import Switchover
from engine.state.breaker import AccountFailure, BreakerState
from simulations.fakes import FakeTransport

ASK = Request(messages=(Message.user("summarise this very long contract"),))
# A 150,000-token prompt, to a model of a 128,000-token window (refused) or of 1,000,000.
OVERFLOW = "context_overflow:window=128000,tokens=150000"
FITS = "context_overflow:window=1000000,tokens=150000"


class Route:
    """OpenAI-dialect targets on one in-process fake, on virtual time; `windows` gives a
    target the configuration's `context_window`."""

    def __init__(self, *models: str, windows: dict[str, int] | None = None) -> None:
        self.clock = VirtualClock()
        self.fake = FakeTransport(clock=self.clock)
        self.attempts: list[Attempt] = []
        provider = OpenAIProvider(
            "gpt", base_url="http://openai.fake/v1", api_key="k", transport=self.fake,
            clock=self.clock,
        )  # fmt: skip
        windows = windows or {}
        self.chain = Chain(
            "long-documents",
            [Target(provider, m, context_window=windows.get(m)) for m in models],
            clock=self.clock,
            hooks=[self.attempts.append],
        )

    def complete(self) -> Response:
        return self.clock.run(self.chain.complete(ASK))

    def stream(self) -> list[Any]:
        async def read() -> list[Any]:
            return [event async for event in self.chain.stream(ASK)]

        return self.clock.run(read())

    def calls(self, model: str) -> int:
        return len(self.fake.calls(model))

    def decisions(self) -> list[tuple[str, str]]:
        return [(a.model, a.decision) for a in self.attempts]


def test_the_windows_come_from_genai_prices_and_the_configuration_wins():
    provider = OpenAIProvider("gpt", base_url="http://openai.fake/v1", api_key="k")
    assert window_of(Target(provider, "gpt-4o")) == 128_000
    assert window_of(Target(provider, "gpt-4.1-mini")) == 1_000_000
    assert window_of(Target(provider, "gpt-4o", context_window=64_000)) == 64_000
    assert window_of(Target(provider, "our-fine-tune")) is None
    # A provider priced as another genai-prices provider is looked up under that one.
    groq = Target(provider, "claude-sonnet-4-5", price_provider="anthropic")
    assert window_of(groq) == 200_000


@pytest.mark.parametrize("streamed", [False, True])
def test_an_overflow_falls_back_to_a_later_target_with_a_larger_window(streamed: bool):
    route = Route("gpt-4o", "gpt-4.1-mini")  # 128,000 and 1,000,000 tokens (genai-prices)
    route.fake.script("gpt-4o", [OVERFLOW])
    route.fake.script("gpt-4.1-mini", [FITS])
    if streamed:
        events = route.stream()
        assert isinstance(events[0], StreamStart) and isinstance(events[-1], MessageEnd)
        assert events[0].model == "gpt-4.1-mini"
    else:
        assert route.complete().fallback_depth == 1
    assert route.decisions() == [
        ("gpt-4o", "fall_back_larger_context"),
        ("gpt-4.1-mini", "served"),
    ]
    assert route.attempts[0].error_class == "context_overflow"


def test_targets_no_larger_are_skipped_on_the_way_to_a_larger_one():
    """An equal window (gpt-4o-mini: 128,000) is never tried."""
    route = Route("gpt-4o", "gpt-4o-mini", "gpt-4.1-mini")
    route.fake.script("gpt-4o", [OVERFLOW])
    assert route.complete().fallback_depth == 2
    assert route.calls("gpt-4o-mini") == 0
    assert [d for _, d in route.decisions()] == ["fall_back_larger_context", "served"]


def test_a_target_whose_window_nobody_states_is_tried():
    """Issue 35: a backup with an unknown window (a fine-tune) may take the request; the
    chain tries it rather than fail a request a backup could answer."""
    route = Route("gpt-4o", "gpt-4o-mini", "our-fine-tune", "gpt-4.1-mini")
    route.fake.script("gpt-4o", [OVERFLOW])
    assert route.complete().model == "our-fine-tune"
    assert route.calls("gpt-4o-mini") == 0
    assert route.decisions() == [("gpt-4o", "fall_back_larger_context"),
                                 ("our-fine-tune", "served")]  # fmt: skip


def test_with_no_larger_window_the_request_fails_fast_with_the_providers_400():
    route = Route("gpt-4o", "gpt-4o-mini")
    route.fake.script("gpt-4o", [OVERFLOW])
    with pytest.raises(RequestFailed) as failed:
        route.complete()
    assert (failed.value.error.status, failed.value.error.error_class) == (400, "context_overflow")
    assert route.decisions() == [("gpt-4o", "fail_fast")]
    assert route.calls("gpt-4o-mini") == 0


def test_an_overflow_on_an_unknown_window_tries_the_backup():
    route = Route("our-fine-tune", "gpt-4.1-mini")
    route.fake.script("our-fine-tune", ["context_overflow"])
    assert route.complete().model == "gpt-4.1-mini"
    assert route.decisions() == [("our-fine-tune", "fall_back_larger_context"),
                                 ("gpt-4.1-mini", "served")]  # fmt: skip


def test_the_skips_say_why_when_the_larger_target_fails_too():
    route = Route("gpt-4o", "gpt-4o-mini", "gpt-4.1-mini")
    route.fake.script("gpt-4o", [OVERFLOW])
    route.fake.script("gpt-4.1-mini", ["500"])
    with pytest.raises(AllProvidersUnavailable) as failed:
        route.complete()
    reason = "context window 128,000 tokens, the request overflowed 128,000"
    assert failed.value.skipped == (("gpt/gpt-4o-mini", reason),)
    assert [d for _, d in route.decisions()] == ["fall_back_larger_context", "give_up"]


def test_a_larger_target_whose_breaker_is_open_leaves_the_overflow_as_the_last_record():
    """Found by tests/fallback/test_chain_budget.py's property: the fallback is the last
    decision when the target it heads for is passed over, and the failure names both."""
    route = Route("gpt-4o", "gpt-4.1-mini")
    now = route.clock.now()
    route.clock.run(route.chain.breakers.record("gpt/gpt-4.1-mini", AccountFailure(), now))
    route.fake.script("gpt-4o", [OVERFLOW])
    with pytest.raises(AllProvidersUnavailable) as failed:
        route.complete()
    assert route.decisions() == [("gpt-4o", "fall_back_larger_context")]
    assert failed.value.skipped == (("gpt/gpt-4.1-mini", "breaker open"),)
    assert "context_overflow (400)" in str(failed.value)


def test_a_second_overflow_raises_the_bar():
    windows = {"big-a": 1_000_000, "big-b": 2_000_000}
    route = Route("gpt-4o", "gpt-4.1-mini", "big-a", "big-b", windows=windows)
    route.fake.script("gpt-4o", [OVERFLOW])
    route.fake.script("gpt-4.1-mini", ["context_overflow"])
    assert route.complete().model is not None
    assert route.calls("big-a") == 0  # 1,000,000: what gpt-4.1-mini just overflowed
    assert route.decisions() == [
        ("gpt-4o", "fall_back_larger_context"),
        ("gpt-4.1-mini", "fall_back_larger_context"),
        ("big-b", "served"),
    ]


def test_the_configured_window_wins_over_genai_prices():
    """The operator says their gpt-4.1-mini deployment takes 100,000 tokens: below gpt-4o's."""
    route = Route("gpt-4o", "gpt-4.1-mini", windows={"gpt-4.1-mini": 100_000})
    route.fake.script("gpt-4o", [OVERFLOW])
    with pytest.raises(RequestFailed):
        route.complete()
    assert route.calls("gpt-4.1-mini") == 0


def test_a_context_overflow_never_counts_on_the_breaker():
    route = Route("gpt-4o", "gpt-4.1-mini")
    route.fake.script("gpt-4o", [OVERFLOW] * 6)
    for _ in range(6):
        assert route.complete().fallback_depth == 1
    assert route.clock.run(route.chain.breakers.snapshot("gpt/gpt-4o")) == BreakerState()


# --- the configuration ----------------------------------------------------------------------

CONFIG = """
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "FAKE_KEY"
[routes.long]
targets = ["gpt/gpt-4o", {{ target = "gpt/our-fine-tune", context_window = {window} }}]
"""


def switchover(window: object) -> tuple[Switchover, FakeTransport, VirtualClock]:
    clock = VirtualClock()
    fake = FakeTransport(clock=clock)
    config = parse_config(tomllib.loads(CONFIG.format(window=window)), source="test")
    sw = Switchover(config, clock=clock, transport=fake, environ={"FAKE_KEY": "k"})
    return sw, fake, clock


@pytest.mark.parametrize(("window", "tried"), [(1_000_000, True), (128_000, False)])
def test_a_target_in_the_configuration_takes_its_context_window_from_there(window, tried):
    sw, fake, clock = switchover(window)
    fake.script("gpt-4o", [OVERFLOW])
    if tried:
        assert clock.run(sw.complete("long", ASK)).model == "our-fine-tune"
    else:
        with pytest.raises(RequestFailed):
            clock.run(sw.complete("long", ASK))
    assert len(fake.calls("our-fine-tune")) == int(tried)


@pytest.mark.parametrize("window", ['"big"', "0", "-1", "true", "1.5"])
def test_a_context_window_is_a_positive_number_of_tokens(window: str):
    with pytest.raises(ConfigError, match=r"routes\.long\.targets\[1\]\.context_window"):
        switchover(window)
