"""engine.core.pricing: every attempt costs what genai-prices says it costs, in exact Decimals, from
the data bundled with the installed version, unless config overrides the price."""

from __future__ import annotations

import dataclasses
import socket
import time
import tomllib
import warnings
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage, calc_price, extract_usage
from genai_prices.data import providers as bundled_providers
from genai_prices.data_snapshot import DataSnapshot, set_custom_snapshot

from engine.config import parse_config
from engine.core.attempt import Attempt
from engine.core.pricing import GENAI_PRICES_SOURCE, PriceOverride, Pricer, UnitPrices
from engine.runtime.build import build_pricer

WHEN = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
SOURCE = f"genai-prices {genai_prices.__version__}"


def attempt(
    provider_kind: str,
    model: str,
    *,
    provider: str | None = None,
    at: datetime = WHEN,
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
) -> Attempt:
    """An attempt with the given usage; every other required field filled with a plain value."""
    known: dict[str, Any] = dict(
        request_id="req-1",
        attempt_number=1,
        route="support",
        target=f"{provider or provider_kind}/{model}",
        provider=provider or provider_kind,
        provider_kind=provider_kind,
        model=model,
        key_kind="managed",
        process_id=1,
        started_at=at,
        latency_ms=800.0,
        streamed=False,
        outcome="success",
        decision="served",
        breaker_state="closed",
        served=True,
        fallback_depth=0,
        input_tokens=input,
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
    required = (
        f.name
        for f in dataclasses.fields(Attempt)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return Attempt(**{name: None for name in required} | known)


def genai_cost(a: Attempt, provider_id: str) -> Decimal:
    """genai-prices' own answer for the attempt's usage, in genai-prices' convention."""
    usage = Usage(
        input_tokens=a.input_tokens + a.cache_read_tokens + a.cache_write_tokens,
        output_tokens=a.output_tokens,
        cache_read_tokens=a.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens,
    )
    return calc_price(
        usage, a.model, provider_id=provider_id, genai_request_timestamp=a.started_at
    ).total_price


def test_the_source_names_the_installed_genai_prices_version():
    assert GENAI_PRICES_SOURCE == SOURCE
    assert Pricer().price(attempt("openai", "gpt-4o", input=10))[1] == SOURCE


# --- the convention: genai-prices' input_tokens includes the cached tokens, ours does not -----


def test_anthropic_usage_costs_what_genai_prices_makes_of_the_same_response():
    """Anthropic's `input_tokens` is already uncached, as ours is; genai-prices' extractor adds
    the cache reads and writes back into its `input_tokens`."""
    body = {
        "model": "claude-sonnet-4-5",
        "usage": {
            "input_tokens": 1200,
            "cache_creation_input_tokens": 700,
            "cache_read_input_tokens": 5000,
            "output_tokens": 300,
        },
    }
    theirs = extract_usage(body, provider_id="anthropic")
    assert theirs.usage.input_tokens == 6900  # 1200 + 700 + 5000
    ours = attempt(
        "anthropic", "claude-sonnet-4-5", input=1200, output=300, cache_read=5000, cache_write=700
    )
    cost, source = Pricer().price(ours)
    assert cost == theirs.calc_price(genai_request_timestamp=WHEN).total_price
    # 1200×3 + 5000×0.30 + 700×3.75 + 300×15 = 3600 + 1500 + 2625 + 4500 = 12225 → $0.012225
    assert cost == Decimal("0.012225")
    assert source == SOURCE


def test_openai_cached_tokens_cost_what_genai_prices_makes_of_the_same_response():
    """OpenAI's `prompt_tokens` includes `cached_tokens`; our adapter subtracts them."""
    body = {
        "model": "gpt-4.1-mini",
        "usage": {
            "prompt_tokens": 6200,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 5000},
        },
    }
    theirs = extract_usage(body, provider_id="openai", api_flavor="chat")
    ours = attempt("openai", "gpt-4.1-mini", input=6200 - 5000, output=300, cache_read=5000)
    cost, _ = Pricer().price(ours)
    assert cost == theirs.calc_price(genai_request_timestamp=WHEN).total_price
    assert cost == Decimal("0.00146")  # 1200×0.40 + 5000×0.10 + 300×1.60, per million


@pytest.mark.parametrize(
    ("kind", "model", "usage"),
    [
        ("anthropic", "claude-sonnet-4-5", (1200, 300, 5000, 700)),
        ("anthropic", "claude-sonnet-4-5-20250929", (3, 1, 190_000, 0)),
        ("anthropic", "claude-haiku-4-5", (0, 0, 0, 4000)),
        ("anthropic", "claude-haiku-4-5-20251001", (100, 2000, 30_000, 1500)),
        ("openai", "gpt-4.1-mini", (1200, 300, 5000, 0)),
        ("openai", "gpt-4.1-mini-2025-04-14", (1, 0, 1024, 0)),
        ("openai", "gpt-4o", (500, 800, 2048, 0)),
        ("openai", "GPT-4o-2024-08-06", (500, 800, 2048, 0)),
    ],
)
def test_an_attempt_costs_what_genai_prices_calc_price_says(kind, model, usage):
    i, o, cr, cw = usage
    a = attempt(kind, model, input=i, output=o, cache_read=cr, cache_write=cw)
    assert Pricer().price(a) == (genai_cost(a, kind), SOURCE)


def test_cache_prices_hand_computed_from_the_published_per_million_prices():
    """Bundled prices, USD per million tokens: claude-haiku-4-5 input 1, output 5, cache read
    0.10, cache write 1.25; gpt-4o input 2.50, output 10, cached input 1.25."""
    haiku = attempt(
        "anthropic", "claude-haiku-4-5", input=1000, output=500, cache_read=20_000, cache_write=4000
    )
    # 1000×1 + 20000×0.10 + 4000×1.25 + 500×5 = 1000 + 2000 + 5000 + 2500 = 10500 → $0.0105
    assert Pricer().price(haiku)[0] == Decimal("0.0105")
    # prompt_tokens 3000, of which cached 2000 → input 1000, cache read 2000
    gpt = attempt("openai", "gpt-4o", input=1000, output=100, cache_read=2000)
    # 1000×2.50 + 2000×1.25 + 100×10 = 2500 + 2500 + 1000 = 6000 → $0.006
    assert Pricer().price(gpt)[0] == Decimal("0.006")


def test_cached_tokens_count_towards_the_long_context_threshold():
    """claude-sonnet-4-5 charges every token at its >200k tier ($6 in, $22.50 out) once the whole
    prompt, cached part included, exceeds 200,000 tokens."""
    short = attempt("anthropic", "claude-sonnet-4-5", input=1000, output=1000, cache_read=199_000)
    long = attempt("anthropic", "claude-sonnet-4-5", input=1001, output=1000, cache_read=199_000)
    # 1000×3 + 199000×0.30 + 1000×15 = 3000 + 59700 + 15000 = 77700 → $0.0777
    assert Pricer().price(short)[0] == Decimal("0.0777") == genai_cost(short, "anthropic")
    # 1001×6 + 199000×0.60 + 1000×22.50 = 6006 + 119400 + 22500 = 147906 → $0.147906
    assert Pricer().price(long)[0] == Decimal("0.147906") == genai_cost(long, "anthropic")


# --- time -------------------------------------------------------------------------------------


def test_the_price_valid_when_the_attempt_started_is_used():
    """OpenAI cut o3 from $10/$40 to $2/$8 per million on 2025-06-10 (in the bundled data)."""
    before = datetime(2025, 6, 9, 23, 59, 59, tzinfo=UTC)
    after = datetime(2025, 6, 10, 0, 0, 0, tzinfo=UTC)
    pricer = Pricer()
    # 1000×10 + 1000×40 = 50000 → $0.05; then 1000×2 + 1000×8 = 10000 → $0.01
    assert pricer.price(attempt("openai", "o3", at=before, input=1000, output=1000))[0] == Decimal(
        "0.05"
    )
    assert pricer.price(attempt("openai", "o3", at=after, input=1000, output=1000))[0] == Decimal(
        "0.01"
    )
    assert pricer.unit_prices("openai", "o3", before).input == Decimal("0.00001")
    assert pricer.unit_prices("openai", "o3", after).input == Decimal("0.000002")


def test_a_price_that_depends_on_the_hour_follows_the_attempts_hour():
    """DeepSeek (reached as an OpenAI-compatible server) charges half outside 00:30-16:30 UTC."""
    pricer = Pricer(price_providers={"ds": "deepseek"})
    peak, off_peak = WHEN.replace(hour=12), WHEN.replace(hour=20)
    for at, per_mtok in ((peak, "0.27"), (off_peak, "0.135"), (peak, "0.27")):
        a = attempt("openai", "deepseek-chat", provider="ds", at=at, input=1_000_000)
        assert pricer.price(a)[0] == Decimal(per_mtok) == genai_cost(a, "deepseek")


def test_every_bundled_model_prices_as_genai_prices_does():
    """The fast path (cached per-MTok rates) against genai-prices' own calculation, for every
    model of every provider in the bundled data, across price changes, hours and tiers."""
    usages = [(1200, 345, 5000, 700), (150_000, 2000, 60_000, 1000)]
    times = [datetime(2024, 1, 1, tzinfo=UTC), datetime(2026, 9, 1, 7, 15, tzinfo=UTC)]
    compared = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # genai-prices warns about keys it does not price
        for provider in bundled_providers:
            pricer = Pricer(price_providers={"p": provider.id})
            for model in provider.models:
                for at in times:
                    for i, o, cr, cw in usages:
                        a = attempt("openai", model.id, provider="p", at=at, input=i, output=o)
                        a = a.replace(cache_read_tokens=cr, cache_write_tokens=cw)
                        try:
                            expected = genai_cost(a, provider.id)
                        except (LookupError, ValueError):
                            continue  # genai-prices cannot price it either
                        assert pricer.price(a) == (expected, SOURCE), (provider.id, model.id)
                        compared += 1
    assert compared > 5000


# --- what has no price, what overrides it --------------------------------------------------


def test_an_unknown_model_is_unpriced_not_free():
    pricer = Pricer()
    assert pricer.price(attempt("openai", "llama-3-local", input=100, output=10)) == (None, None)
    assert pricer.price(attempt("openai", "llama-3-local")) == (None, None)
    assert pricer.unit_prices("openai", "llama-3-local", WHEN) is None
    assert pricer.price(attempt("openai", "claude-haiku-4-5", input=10)) == (None, None)


def test_a_compatible_server_is_priced_as_its_price_provider():
    """A Groq endpoint speaks OpenAI's dialect but charges Groq's prices."""
    a = attempt("openai", "llama-3.3-70b-versatile", provider="groq", input=1000, output=1000)
    assert Pricer().price(a) == (None, None)
    # 1000×0.59 + 1000×0.79 = 1380 → $0.00138
    pricer = Pricer(price_providers={"groq": "groq"})
    assert pricer.price(a) == (Decimal("0.00138"), SOURCE)


def test_a_per_request_fee_is_charged_as_genai_prices_charges_it():
    """Perplexity's sonar adds $12 per thousand requests, which our token arithmetic does not
    cover: genai-prices computes it (but an attempt that used nothing is still free)."""
    pricer = Pricer(price_providers={"pplx": "perplexity"})
    a = attempt("openai", "sonar", provider="pplx", input=1000, output=1000)
    # 1000×1 + 1000×1 = 2000 per million → $0.002, plus $12 / 1000 requests → $0.014
    assert pricer.price(a) == (Decimal("0.014"), SOURCE) == (genai_cost(a, "perplexity"), SOURCE)
    assert pricer.price(attempt("openai", "sonar", provider="pplx")) == (Decimal(0), SOURCE)


def test_an_override_wins_and_its_source_is_reported():
    overrides = {
        "claude/claude-haiku-4-5": PriceOverride(
            input_mtok=Decimal("0.8"),
            output_mtok=Decimal("4"),
            cache_read_mtok=Decimal("0.08"),
            source="Acme contract 2026-01",
        ),
        "llama-3-local": PriceOverride(
            input_mtok=Decimal("0.05"), output_mtok=Decimal("0.10"), source="our GPU cost"
        ),
    }
    pricer = Pricer(overrides)
    contracted = attempt(
        "anthropic", "claude-haiku-4-5", provider="claude", input=1000, cache_read=10_000
    )
    # 1000×0.8 + 10000×0.08 = 800 + 800 = 1600 → $0.0016
    assert pricer.price(contracted) == (Decimal("0.0016"), "override: Acme contract 2026-01")
    # another provider serving the same model is not under the contract
    other = contracted.replace(provider="bedrock-claude")
    assert pricer.price(other) == (genai_cost(other, "anthropic"), SOURCE)
    # a bare model name applies to every provider; cached tokens default to the input price
    local = attempt(
        "openai", "llama-3-local", provider="vllm", input=1000, output=1000, cache_read=1000
    )
    # 1000×0.05 + 1000×0.10 + 1000×0.05 = 200 → $0.0002
    assert pricer.price(local) == (Decimal("0.0002"), "override: our GPU cost")
    assert pricer.unit_prices("openai", "llama-3-local", WHEN) == UnitPrices(
        input=Decimal("0.00000005"),
        output=Decimal("0.0000001"),
        cache_read=Decimal("0.00000005"),
        cache_write=Decimal("0.00000005"),
        source="override: our GPU cost",
    )


def test_an_override_needs_a_source_and_sane_prices():
    with pytest.raises(ValueError, match="source"):
        PriceOverride(input_mtok=Decimal(1), output_mtok=Decimal(1), source=" ")
    with pytest.raises(ValueError, match="input_mtok"):
        PriceOverride(input_mtok=Decimal(-1), output_mtok=Decimal(1), source="x")
    with pytest.raises(ValueError, match="output_mtok"):
        PriceOverride(input_mtok=Decimal(1), output_mtok=0.5, source="x")  # type: ignore[arg-type]


def test_the_pricer_takes_overrides_and_price_providers_from_config():
    config = parse_config(
        tomllib.loads(
            """
            [providers.fast]
            kind = "openai"
            base_url = "https://api.groq.com/openai/v1"
            price_provider = "groq"
            [prices."fast/llama-3.1-8b-instant"]
            input_mtok = 0.04
            output_mtok = 0.06
            source = "Groq invoice, March 2026"
            """
        )
    )
    pricer = build_pricer(config)
    overridden = attempt("openai", "llama-3.1-8b-instant", provider="fast", input=1_000_000)
    assert pricer.price(overridden) == (Decimal("0.04"), "override: Groq invoice, March 2026")
    groq = attempt("openai", "llama-3.3-70b-versatile", provider="fast", input=1_000_000)
    assert pricer.price(groq) == (Decimal("0.59"), SOURCE)


# --- zero, exactness, speed, no network ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "model"),
    [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o"), ("openai", "o3")],
)
def test_an_attempt_that_used_no_tokens_costs_zero(kind, model):
    cost, source = Pricer().price(attempt(kind, model))
    assert cost == 0 and isinstance(cost, Decimal)
    assert source == SOURCE


def test_costs_are_exact_decimals_that_add_up_without_drift():
    """gpt-4.1-nano: $0.025 per million cached tokens, $0.10 per million input tokens. One token
    of each is $0.000000125; 100,000 of them are exactly $0.0125 (as floats: 0.01250000000001)."""
    pricer = Pricer()
    one_of_each = attempt("openai", "gpt-4.1-nano", input=1, cache_read=1)
    costs = [pricer.price(one_of_each)[0] for _ in range(100_000)]
    assert all(type(c) is Decimal for c in costs)
    assert costs[0] == Decimal("0.000000125")
    assert sum(costs, Decimal(0)) == Decimal("0.0125")
    assert sum(float(c) for c in costs) != 0.0125  # what a float column would have stored
    unit = pricer.unit_prices("anthropic", "claude-sonnet-4-5", WHEN)
    assert unit is not None
    assert all(
        type(p) is Decimal for p in (unit.input, unit.output, unit.cache_read, unit.cache_write)
    )


def test_unit_prices_are_per_token_and_cached_tokens_default_to_the_input_price():
    pricer = Pricer()
    assert pricer.unit_prices("anthropic", "claude-sonnet-4-5", WHEN) == UnitPrices(
        input=Decimal("0.000003"),
        output=Decimal("0.000015"),
        cache_read=Decimal("0.0000003"),
        cache_write=Decimal("0.00000375"),
        source=SOURCE,
    )
    long = pricer.unit_prices("anthropic", "claude-sonnet-4-5", WHEN, total_input_tokens=200_001)
    assert long is not None and long.input == Decimal("0.000006")
    # gpt-4o-search-preview has no cached-input price: cached tokens are billed as input
    search = pricer.unit_prices("openai", "gpt-4o-search-preview", WHEN)
    assert search is not None
    assert search.cache_read == search.cache_write == search.input == Decimal("0.0000025")
    a = attempt("openai", "gpt-4o-search-preview", input=1000, cache_read=1000)
    assert pricer.price(a)[0] == Decimal("0.005") == genai_cost(a, "openai")


def test_pricing_a_repeated_model_takes_well_under_50_microseconds():
    models = [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4.1-mini"), ("openai", "o3")]
    attempts = [
        attempt(
            k,
            m,
            input=n % 5000,
            output=n % 700,
            cache_read=n % 9000,
            at=WHEN + timedelta(seconds=n),
        )
        for n in range(20_000)
        for k, m in [models[n % 3]]
    ]
    pricer = Pricer()
    pricer.price(attempts[0])  # the first call imports genai-prices' data
    started = time.perf_counter()
    for a in attempts:
        pricer.price(a)
    per_attempt = (time.perf_counter() - started) / len(attempts)
    assert per_attempt < 50e-6, f"{per_attempt * 1e6:.1f} µs per attempt"


def test_prices_come_from_the_bundled_data_even_after_someone_fetched_others(monkeypatch):
    """genai-prices' UpdatePrices (started by any library in the process) replaces its global
    snapshot; the Pricer ignores it, and never opens a connection."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("pricing opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    set_custom_snapshot(DataSnapshot(providers=[], from_auto_update=True))
    try:
        with pytest.raises(LookupError):
            calc_price(Usage(input_tokens=1), "gpt-4o", provider_id="openai")
        a = attempt("openai", "gpt-4o", input=1000)
        assert Pricer().price(a) == (Decimal("0.0025"), SOURCE)
        assert Pricer().price(attempt("anthropic", "claude-opus-4-1", input=1)) == (
            Decimal("0.000015"),
            SOURCE,
        )
    finally:
        set_custom_snapshot(None)
