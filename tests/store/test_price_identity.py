"""One price identity: the rollups price a route's primary by the same name the recorder
prices its attempts by (the configured provider, its price_provider and its provider/model
override), so a primary priced through either has a fallback premium and a cache loss."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pandas as pd
import pytest
from helpers.alert_harness import START, World

from engine.runtime.build import build_pricer

NANO = Decimal("1e-9")
GROQ_MODEL = "llama-3.3-70b-versatile"
OWN_MODEL = "our-finetune-v3"


def _config() -> dict:
    return {
        "providers": {
            # An OpenAI-compatible server selling Llama: priced as Groq, not as OpenAI.
            "grq": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": "K",
                    "price_provider": "groq"},
            # A model genai-prices has never heard of, priced by an override.
            "own": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": "K"},
            "gpt": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": "K"},
        },
        "prices": {
            f"own/{OWN_MODEL}": {"input_mtok": "2.00", "output_mtok": "8.00",
                                  "cache_read_mtok": "0.50", "source": "our GPU contract"},
        },
        "routes": {
            "llama": {"targets": [f"grq/{GROQ_MODEL}", "gpt/gpt-4.1-mini"]},
            "finetune": {"targets": [f"own/{OWN_MODEL}", "gpt/gpt-4.1-mini"]},
        },
        "alerting": {"receivers": [], "builtin_rules": False},
    }  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("prices"), _config(), per_minute=6,
              start=START - timedelta(minutes=50), routes=("llama", "finetune"))  # fmt: skip
    w.minutes(55)  # the primaries' caches warm, into the next hour (its hit-ratio baseline)
    w.fails(GROQ_MODEL, "overloaded", 8)
    w.fails(OWN_MODEL, "overloaded", 8)
    w.minutes(12)
    yield w
    w.close()


def _attempts(world: World) -> pd.DataFrame:
    return world.pipeline.con.execute("SELECT * FROM attempts ORDER BY started_at").df()


def _hand(world: World, route: str, provider: str, model: str) -> tuple[Decimal, Decimal]:
    """The route's fallback premium and cache loss, as docs/metrics.md defines them: for each
    answer a backup served, its cost minus what the primary would have charged for the same
    tokens at its healthy cache-hit ratio (its successes in the 24 hours before the hour)."""
    pricer = build_pricer(world.config)
    attempts = _attempts(world)
    primary = attempts[(attempts["target"] == f"{provider}/{model}")
                       & (attempts["outcome"] == "success")]  # fmt: skip
    ok = attempts["served"] & (attempts["outcome"] == "success")
    served = attempts[ok & (attempts["route"] == route) & (attempts["fallback_depth"] > 0)]
    assert len(served) > 10, "the backup answered during the outage"
    premium = cache_loss = Decimal(0)
    for row in served.itertuples():
        hour = row.started_at.floor("h")
        before = primary[(primary["started_at"] >= hour - timedelta(days=1))
                         & (primary["started_at"] < hour)]  # fmt: skip
        tokens = before[["input_tokens", "cache_read_tokens", "cache_write_tokens"]].sum()
        h = Decimal(float(tokens["cache_read_tokens"] / tokens.sum()))
        p = pricer.unit_prices("openai", model, row.started_at, provider=provider)
        total_in = row.input_tokens + row.cache_read_tokens + row.cache_write_tokens
        on_primary = (total_in * (1 - h) * p.input + total_in * h * p.cache_read
                      + row.output_tokens * p.output)  # fmt: skip
        premium += Decimal(row.cost_usd).quantize(NANO) - on_primary
        cache_loss += total_in * h * (p.input - p.cache_read)
    return premium, cache_loss


def _rolled_up(world: World, route: str) -> tuple[Decimal | None, Decimal | None]:
    (premium, loss) = world.query(
        "SELECT sum(fallback_premium_usd), sum(cache_loss_usd) FROM rollup_minute "
        "WHERE route = $route", {"route": route},
    )[0]  # fmt: skip
    return premium, loss


@pytest.mark.parametrize(
    ("route", "provider", "model"),
    [("llama", "grq", GROQ_MODEL), ("finetune", "own", OWN_MODEL)],
    ids=["price_provider", "prices override"],
)
def test_a_primary_priced_by_its_configured_name_has_a_premium_and_cache_loss(
    world, route, provider, model
):
    premium, loss = _rolled_up(world, route)
    assert premium is not None and loss is not None, "the primary has a price in the rollups"
    hand_premium, hand_loss = _hand(world, route, provider, model)
    # Each minute's figure is rounded to the nano-dollar once: a few nano-dollars in all.
    assert abs(premium - hand_premium) < Decimal("1e-7")
    assert abs(loss - hand_loss) < Decimal("1e-7")


def test_an_override_with_a_cache_discount_loses_its_cache_when_traffic_moves(world):
    _, loss = _rolled_up(world, "finetune")
    assert loss is not None and loss > 0, "the fine-tune's cached prompt was lost to the backup"
    _, groq_loss = _rolled_up(world, "llama")
    assert groq_loss == 0, "Groq bills cached tokens as input: nothing to lose"
