"""The demo's prompt-cache money, proven from the fake providers' own account.

Three days of the demo's history (the real chain on the in-process fakes, on a virtual clock)
hold the first 529 outage of its plan: Sonnet, the support primary, overloaded for 45 minutes.
The scheduler's pass prices what the rollups and the incident show; the fakes' log of every
call (what each read from and wrote to its provider's prompt cache) and genai-prices give the
same figures independently, as docs/metrics.md defines them:

- re-warm: the cache-write tokens Sonnet wrote when it came back × (its cache-write price −
  its input price);
- cache loss: for each support request a backup served, its prompt tokens × Sonnet's cache-hit
  ratio over its successes in the 24 hours before that hour × (input price − cache-read price).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import pairwise

import pytest

from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.runtime.build import build_pricer
from engine.scheduler.pipeline import Pipeline
from simulations.demo.history import PAST_INCIDENTS, seed_history
from simulations.demo.traffic import Traffic
from simulations.demo.up import DEMO_KEY_ENV, demo_config
from simulations.fakes import Call

END = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
DAYS = 3  # from Nov 27: the plan's day 2 holds its first 529 outage, and nothing else
OUTAGE = PAST_INCIDENTS[0]
PRIMARY, SUPPORT = "claude-sonnet-4-5", "support"
NANO = Decimal("1e-9")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The history's store after one scheduler pass, and the fakes' log of it."""
    assert (OUTAGE.day, OUTAGE.model, OUTAGE.fault) == (2, PRIMARY, "overloaded")
    paths = DataPaths(tmp_path_factory.mktemp("cache-economics") / "data")
    calls: list[Call] = []
    config = demo_config(8700)
    seed_history(paths, config, days=DAYS, end=END, peak_per_minute=1.5,
                 environ={DEMO_KEY_ENV: "k"}, say=lambda _: None, fakes_log=calls)  # fmt: skip
    pipeline = Pipeline(paths, build_pricer(config), now=lambda: END)
    try:
        pipeline.cycle()
        yield pipeline.con, calls, build_pricer(config)
    finally:
        pipeline.close()


def wall(call: Call) -> datetime:
    return datetime.fromisoformat(call.wall)


def is_support(call: Call, prompt: str = Traffic().support_system) -> bool:
    """The call carried the support route's system prompt (in either dialect)."""
    body = call.request or {}
    system = body.get("system")  # Anthropic: a marked block
    if isinstance(system, list):
        return system[0].get("text") == prompt
    return system == prompt or body["messages"][0].get("content") == prompt  # OpenAI: a message


def answered(call: Call) -> bool:
    return call.status == 200 and call.usage is not None


def sonnet_prices(pricer: Pricer, at: datetime):
    prices = pricer.unit_prices("anthropic", PRIMARY, at, provider="claude")
    assert prices is not None
    return prices


def outage_of(calls: list[Call]) -> tuple[datetime, datetime]:
    """The first and last 529 the primary answered, as the fakes logged them."""
    faults = [wall(c) for c in calls if c.model == PRIMARY and c.status == 529]
    assert faults, "the outage happened"
    return min(faults), max(faults)


def hit_ratio(calls: list[Call]) -> Callable[[datetime], Decimal]:
    """The primary's cache-hit ratio for an hour, from the fakes' log: its answered calls in
    the 24 hours before the hour, cache reads ÷ every prompt token."""
    primary = [c for c in calls if c.model == PRIMARY and answered(c)]

    def of(hour: datetime) -> Decimal:
        window = [c for c in primary if hour - timedelta(days=1) <= wall(c) < hour]
        read = sum(c.usage["cache_read_tokens"] for c in window)  # type: ignore[index]
        total = sum(c.usage["input_tokens"] for c in window)  # type: ignore[index]
        return Decimal(read / total) if total else Decimal(0)

    return of


def test_the_primary_pays_a_rewarm_after_the_outage_that_the_fakes_account_for(history):
    """The rollups' re-warm is above $0, and it is exactly the cache the primary wrote again
    in the ten minutes after its last 529 (nothing else re-warmed in three days)."""
    con, calls, pricer = history
    began, ended = outage_of(calls)
    rewritten = [
        c for c in calls
        if c.model == PRIMARY and answered(c) and ended < wall(c) <= ended + timedelta(minutes=10)
        and c.usage["cache_write_tokens"] > 0  # type: ignore[index]
    ]  # fmt: skip
    assert len(rewritten) == 1, "one write of the prefix, then reads: the cache is warm again"
    prices = sonnet_prices(pricer, began)
    expected = sum(
        c.usage["cache_write_tokens"] * (prices.cache_write - prices.cache_read)  # type: ignore[index]
        for c in rewritten
    )
    (rewarm,) = con.execute(
        "SELECT sum(rewarm_usd) FROM rollup_hour WHERE route = $r", {"r": SUPPORT}
    ).fetchone()
    (everywhere,) = con.execute("SELECT sum(rewarm_usd) FROM rollup_hour").fetchone()
    assert rewarm > 0
    assert rewarm == everywhere == expected.quantize(NANO)
    (incident,) = con.execute(
        "SELECT rewarm_usd FROM incidents WHERE target = $t", {"t": f"claude/{PRIMARY}"}
    ).fetchall()
    assert incident[0] == rewarm, "the incident shows the re-warm its outage caused"


def test_the_cache_loss_is_what_the_primarys_cache_would_have_saved_on_the_backups_requests(
    history,
):
    """Per docs/metrics.md, from the fakes' log alone: the support requests another model
    answered, each at the primary's hit ratio for its hour and prices."""
    con, calls, pricer = history
    began, _ = outage_of(calls)
    ratio = hit_ratio(calls)
    prices = sonnet_prices(pricer, began)
    served_by_backups = [c for c in calls if c.model != PRIMARY and answered(c) and is_support(c)]
    assert served_by_backups, "the backups took the primary's traffic"
    expected = sum(
        c.usage["input_tokens"]  # type: ignore[index]
        * ratio(wall(c).replace(minute=0, second=0, microsecond=0))
        * (prices.input - prices.cache_read)
        for c in served_by_backups
    )
    minutes, loss = con.execute(
        "SELECT count(*), sum(cache_loss_usd) FROM rollup_minute WHERE route = $r "
        "AND cache_loss_usd <> 0",
        {"r": SUPPORT},
    ).fetchone()
    assert loss > Decimal("0.1"), "a long cached prompt: the loss is worth showing"
    # Each minute's figure is rounded to the nano-dollar.
    assert abs(loss - expected) <= minutes * NANO
    (incident,) = con.execute(
        "SELECT cache_loss_usd FROM incidents WHERE target = $t", {"t": f"claude/{PRIMARY}"}
    ).fetchall()
    assert incident[0] == loss, "every request the backups served fell in the incident"


def test_the_backup_writes_its_own_cache_cold_and_keeps_it_five_minutes_from_each_use(history):
    """The traffic moved to Haiku, whose cache of the support prompt was cold: it wrote the
    prompt, then read it on every request within five minutes of the one before, and wrote
    it again after a longer gap."""
    _, calls, _ = history
    began, ended = outage_of(calls)
    haiku = [c for c in calls if c.model == "claude-haiku-4-5" and answered(c) and is_support(c)]
    assert len(haiku) > 10 and all(began <= wall(c) <= ended + timedelta(minutes=1) for c in haiku)
    prefix = haiku[0].usage["cache_write_tokens"]  # type: ignore[index]
    assert prefix > 4096, "past Haiku 4.5's least cacheable prefix"
    gaps = [None, *(b.time - a.time for a, b in pairwise(haiku))]
    for gap, call in zip(gaps, haiku, strict=True):
        warm = gap is not None and gap < 300
        usage = call.usage or {}
        assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (
            (prefix, 0) if warm else (0, prefix)
        ), f"{gap} s after the last use"
