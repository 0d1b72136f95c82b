"""The fast-forward changes nothing: every library scenario, and generated ones, run with it on
and off give the same attempts (apart from request ids), the same rollups and the same
incidents; and the arrays it prices with agree with the recorder's Pricer to the nano-dollar."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal

import duckdb
import numpy as np
import pytest

from engine.core.attempt import Attempt
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from simulations.whatif.arrivals import arrivals
from simulations.whatif.candidates import with_backup
from simulations.whatif.fastforward_rows import BUSY_MARGIN
from simulations.whatif.results import QUIET_ANSWERS, RunResult
from simulations.whatif.scenario import library, load_scenario, parse_scenario
from simulations.whatif.simulate import run_once

ATTEMPT = """SELECT attempt_number, route, target, started_at, ttft_ms, outcome, decision,
    error_class, fault_kind, http_status, breaker_state, served, fallback_depth, input_tokens,
    output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, price_source, feature,
    quality_error
FROM attempts ORDER BY ALL"""
KEY = "bucket, route, target, feature"
# Latencies are the same draws, added on the virtual clock one way and in arrays the other: they
# agree to a floating-point rounding, not bit for bit. The answers' latencies as the results
# read them: from the attempts, and those that went into the rollups only.
LATENCY = f"""SELECT ms FROM (
    SELECT (max(epoch_us(started_at) + latency_ms * 1000) - min(epoch_us(started_at))) / 1000
        AS ms
    FROM attempts GROUP BY request_id HAVING bool_or(served AND outcome = 'success')
    UNION ALL SELECT ms FROM {QUIET_ANSWERS}) ORDER BY ms"""

INCIDENT = "SELECT * EXCLUDE (incident_id) FROM incidents ORDER BY ALL"
# Library scenarios are run at a small share of their traffic: what matters is that both ways
# meet faults, breakers opening and closing, rate limits and cache expiries.
SCALE = {"week-with-a-tuesday-outage": 0.004}


def _both_ways(scenario, tmp_path, no_margin: bool = False) -> Ways:
    """The scenario every request through the chain, and fast-forwarded (with `no_margin`
    also with every quiet request straight into the rollups, even beside a fault: the hardest
    case for the rollups, though not for an incident's figures, which read the rows)."""
    traffic = arrivals(scenario)
    backup = scenario.backups[0] if scenario.backups else None
    config = with_backup(scenario.config, backup) if backup else scenario.config
    ways = {"chain": (False, BUSY_MARGIN), "fast": (True, BUSY_MARGIN)}
    if no_margin:
        ways["no margin"] = (True, 0)
    stores, results = {}, {}
    for name, (fast, margin) in ways.items():
        paths = DataPaths(tmp_path / name)
        results[name] = run_once(
            scenario, config, traffic, paths, backup=backup, fast_forward=fast,
            busy_margin=margin,
        )  # fmt: skip
        stores[name] = duckdb.connect(str(paths.database), read_only=True)
    return Ways(stores, results, len(traffic))


@dataclass
class Ways:
    stores: dict[str, duckdb.DuckDBPyConnection]
    results: dict[str, RunResult]
    requests: int


def _same(ways: Ways) -> int:
    """Asserts the two ways agree; how many requests the fast-forward left out of the rows."""
    chain, fast = ways.stores["chain"], ways.stores["fast"]
    rows = Counter(chain.execute(ATTEMPT).fetchall())
    written = Counter(fast.execute(ATTEMPT).fetchall())
    assert not written - rows  # every row written is one the chain wrote
    left_out = rows - written  # the rest went into the rollups: each a first answer at once
    assert all(row[0] == 1 and row[5] == "success" and row[12] == 0 for row in left_out)
    _same_rollups(chain, fast)
    assert chain.execute(INCIDENT).fetchall() == fast.execute(INCIDENT).fetchall()
    assert _figures(ways.results["chain"]) == _figures(ways.results["fast"])
    if "no margin" in ways.stores:
        _same_rollups(chain, ways.stores["no margin"])
    return sum(left_out.values())


def _same_rollups(chain, fast) -> None:
    kinds = chain.execute("DESCRIBE rollup_minute").fetchall()
    exact = ", ".join(name for name, kind, *_ in kinds if kind != "DOUBLE")
    floats = ", ".join(f"coalesce({name}, -1)" for name, kind, *_ in kinds if kind == "DOUBLE")
    same = f"SELECT {exact} FROM rollup_minute ORDER BY ALL"
    assert chain.execute(same).fetchall() == fast.execute(same).fetchall()
    assert _close(chain, fast, f"SELECT {floats} FROM rollup_minute ORDER BY {KEY}")
    # Their sum with a start time in microseconds since 1970 is a double with quarter-microsecond
    # steps: a rounding apart either side of one rounds a quarter of a microsecond apart.
    assert _close(chain, fast, LATENCY, atol=1e-3)


def _figures(result: RunResult) -> dict:
    """A run's figures, but for how long it took; quantiles to a rounding."""
    body = dataclasses.asdict(result)
    del body["seconds"]
    for name in ("latency_p50", "latency_p99"):
        if body[name] is not None:
            body[name] = {k: round(v, 6) for k, v in body[name].items()}
    return body


def _close(chain, fast, sql: str, atol: float = 1e-6) -> bool:
    mine, theirs = (np.array(c.execute(sql).fetchall(), dtype=float) for c in (chain, fast))
    return mine.shape == theirs.shape and np.allclose(mine, theirs, rtol=0, atol=atol)


@pytest.mark.parametrize("path", library(), ids=lambda p: p.stem)
def test_every_library_scenario_gives_the_same_results_fast_forwarded(path, tmp_path):
    scenario = load_scenario(path)
    scenario = scenario.scaled(SCALE.get(path.stem, 0.03))
    ways = _both_ways(scenario, tmp_path, no_margin=True)
    assert ways.requests > 100
    _same(ways)


def test_quiet_minutes_go_straight_into_the_rollups_with_the_same_results(tmp_path):
    """Most of a long scenario is quiet: its requests never become rows, and nothing changes,
    the incident's figures included (rows near its fault, as by default)."""
    scenario = load_scenario("week-with-a-tuesday-outage").scaled(0.004)
    ways = _both_ways(scenario, tmp_path)
    assert _same(ways) > 0.8 * ways.requests
    assert ways.results["fast"].incidents >= 1


def _generated(seed: int) -> dict:
    """A small random scenario: two routes sharing a target, faults of every kind, flapping,
    tight rate limits and sparse traffic (cache expiries)."""
    rng = random.Random(seed)
    kinds = ["overloaded", "server_error", "rate_limit", "auth", "timeout", "slow"]
    faults = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(kinds)
        start = rng.randint(0, 50)
        fault = {"target": rng.choice(["a/m1", "b/m2", "a"]), "kind": kind,
                 "start": f"{start}m", "end": f"{start + rng.randint(3, 30)}m",
                 "rate": rng.choice([1.0, 0.5, 0.2])}  # fmt: skip
        if kind == "slow":
            fault.update(median_ms=4000, p99_ms=20000)
        if kind == "rate_limit":
            fault["retry_after_s"] = rng.choice([5, 20])
        if rng.random() < 0.3:
            fault["flapping"] = {"period": "5m", "down": "2m"}
        faults.append(fault)
    return {
        "name": f"generated {seed}",
        "duration": "90m",
        "seed": seed,
        "providers": {"a": {"kind": "anthropic"}, "b": {"kind": "openai"}},
        "routes": {
            "chat": {"targets": ["a/claude-sonnet-4-5", "b/gpt-4.1-mini"], "budget_s": 15},
            "tags": {
                "targets": ["b/gpt-4.1-mini", "a/claude-haiku-4-5"],
                "budget_s": 4,
                "primary_retries": rng.choice([0, 1]),
            },
        },
        "traffic": {
            "rate_per_s": rng.choice([0.05, 0.5, 2.0]),
            "routes": {
                "chat": {
                    "share": 0.6,
                    "input_tokens": 1500,
                    "output_tokens": 200,
                    "cached_share": 0.7,
                },
                "tags": {"share": 0.4, "input_tokens": 100, "output_tokens": 4},
            },
        },
        "latency": {"median_ms": 800, "p99_ms": 6000},
        "faults": [
            {
                **f,
                "target": f["target"]
                .replace("m1", "claude-sonnet-4-5")
                .replace("m2", "gpt-4.1-mini"),
            }
            for f in faults
        ],
        "limits": {"b/gpt-4.1-mini": {"rpm": rng.choice([30, 120, 5000]), "tpm": 200_000}},
        "backups": ["b/gpt-4.1-mini"],
    }


@pytest.mark.parametrize("seed", [11, 23, 37, 41])
def test_generated_scenarios_give_the_same_results_fast_forwarded(seed, tmp_path):
    scenario = parse_scenario(_generated(seed), source=f"generated-{seed}")
    _same(_both_ways(scenario, tmp_path))


@pytest.mark.parametrize(
    ("provider", "kind", "model"),
    [
        ("claude", "anthropic", "claude-sonnet-4-5"),  # long-context tiers
        ("gpt", "openai", "gpt-4.1-mini"),
        ("claude", "anthropic", "claude-haiku-4-5"),
        ("gem", "google", "gemini-2.5-pro"),
    ],
)
def test_prices_as_arrays_are_the_recorders_prices(provider, kind, model):
    pricer = Pricer()
    rng = np.random.default_rng(3)
    counts = [rng.integers(0, 150_000, 500) for _ in range(4)]
    counts[0][:5] = counts[1][:5] = counts[2][:5] = counts[3][:5] = 0  # nothing used
    at = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)
    found = pricer.price_columns(provider, kind, model, at, counts)
    assert found is not None
    nano, source = found
    for i in range(500):
        attempt = Attempt(
            request_id="r", attempt_number=1, route="x", target=f"{provider}/{model}",
            provider=provider, provider_kind=kind, model=model, key_kind="own", process_id=1,
            started_at=at, latency_ms=1.0, ttft_ms=None, streamed=False, outcome="success",
            decision="served", error_class=None, fault_kind=None, http_status=200,
            error_type=None, error_code=None, error_message=None, retry_after_s=None,
            breaker_state="closed", served=True, fallback_depth=0,
            input_tokens=int(counts[0][i]), output_tokens=int(counts[1][i]),
            cache_read_tokens=int(counts[2][i]), cache_write_tokens=int(counts[3][i]),
        )  # fmt: skip
        cost, expected_source = pricer.price(attempt)
        assert source == expected_source
        expected = cost.quantize(Decimal("1e-9"), ROUND_HALF_EVEN).scaleb(9)
        assert Decimal(int(nano[i])) == expected, i


def _outage_behind_breakers() -> dict:
    """Sonnet down for 25 minutes at 5 requests/s: its breaker opens, the backup answers, and
    the backup's token limit is reached within most minutes (its cool-down to the minute's
    end: every target passed over, the request fails without a call)."""
    return {
        "name": "outage behind breakers",
        "duration": "40m",
        "seed": 5,
        "providers": {"a": {"kind": "anthropic"}, "b": {"kind": "openai"}},
        "routes": {"chat": {"targets": ["a/claude-sonnet-4-5", "b/gpt-4.1-mini"]}},
        "traffic": {
            "rate_per_s": 5,
            "routes": {
                "chat": {
                    "share": 1,
                    "input_tokens": 1500,
                    "output_tokens": 200,
                    "cached_share": 0.7,
                }
            },
        },
        "faults": [
            {"target": "a/claude-sonnet-4-5", "kind": "overloaded", "start": "5m", "end": "30m"}
        ],
        "limits": {"b/gpt-4.1-mini": {"tpm": 400_000}},
        "backups": ["b/gpt-4.1-mini"],
    }


def test_an_outage_behind_an_open_breaker_is_answered_at_once_with_the_chains_rows(tmp_path):
    """With the primary's breaker open, a request's pass is known on arrival: the primary
    passed over, the backup answers; while the backup cools down after its rate limit too,
    nothing does. Those requests are fast-forwarded as the quiet ones are (the chain runs
    around the breaker's probes and the limit's edges only), and every row is the chain's."""
    scenario = parse_scenario(_outage_behind_breakers(), source="outage")
    ways = _both_ways(scenario, tmp_path)
    _same(ways)
    fast = ways.stores["fast"]
    shares = dict(
        fast.execute(
            "SELECT outcome, avg((request_id LIKE 'ff-%')::INT) FROM attempts"
            " WHERE fallback_depth = 1 OR outcome = 'skipped' GROUP BY 1"
        ).fetchall()
    )
    assert shares["success"] > 0.9  # answered by the backup, past the open breaker
    assert shares["skipped"] > 0.9  # every target passed over: the backup cooling down
