"""The what-if's figures, from runs of the real chain on the simulated providers: an extra cost
that is its parts on every run, failed requests that never read as a saving, headroom against
each limit at the run's scale, latency within its noise as ≈ 0, and the words people read."""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal

import duckdb
import pytest

from simulations.whatif.arrivals import arrivals
from simulations.whatif.report import (
    comparison_table,
    headroom_warnings,
    latency_text,
    scale_notice,
    sentence,
    table_rows,
)
from simulations.whatif.results import (
    Comparison,
    LatencyChange,
    Quantile,
    as_json,
    from_json,
)
from simulations.whatif.scenario import library, load_scenario, parse_scenario, slug
from simulations.whatif.simulate import simulate

SMALL = {
    "name": "small outage",
    "duration": "40m",
    "start": "2026-11-23T12:00:00Z",
    "seed": 3,
    "backups": ["gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"],
    "providers": {"claude": {"kind": "anthropic"}, "gpt": {"kind": "openai"}},
    "routes": {"support": {"targets": ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"]}},
    "traffic": {"rate_per_s": 2, "routes": {"support": {
        "share": 1, "input_tokens": 1500, "output_tokens": 200, "cached_share": 0.8}}},
    "latency": {"median_ms": 500, "p99_ms": 3000},
    "faults": [{"target": "claude/claude-sonnet-4-5", "kind": "overloaded",
                "start": "10m", "end": "25m"}],
}  # fmt: skip
# gpt/gpt-4.1-mini, the cheaper backup, cannot take the outage's 120 requests a minute.
TIGHT = {**SMALL, "limits": {"gpt/gpt-4.1-mini": {"rpm": 60}}}
PARTS = ("fallback_premium_usd", "cache_loss_usd", "rewarm_usd", "wasted_usd")
NOT_FOR_PEOPLE = re.compile(r"\bNone\b|\bnan\b|<NA>|0E-9")


def _rollups(path) -> dict[str, Decimal]:
    """The run's rollup sums, read straight from its store."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        row = con.execute(
            "SELECT " + ", ".join(f"coalesce(sum({p}), 0)" for p in PARTS) + " FROM rollup_minute"
        ).fetchone()
    finally:
        con.close()
    return dict(zip(PARTS, (Decimal(v) for v in row), strict=True))


def _small_scale(scenario, requests: int = 800):
    """`scenario` at a share of its traffic that sends about `requests` requests a run."""
    full = len(arrivals(scenario.scaled(0.01))) * 100
    return scenario.scaled(min(1.0, requests / max(full, 1)))


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    root = tmp_path_factory.mktemp("tight")
    return simulate(parse_scenario(TIGHT), results_dir=root), root


@pytest.mark.parametrize("path", library(), ids=lambda p: p.stem)
def test_extra_cost_is_the_sum_of_its_parts_on_every_run_of_every_library_scenario(path, tmp_path):
    """Extra cost is cost − baseline cost whenever no more requests fail; cache loss, re-warm and
    wasted spend are the candidate's rollup sums minus the baseline's; the failed requests add
    up to their causes; and a failing candidate never ranks among the ones that answer,
    however cheap."""
    scenario = _small_scale(load_scenario(path))
    comparison = simulate(scenario, results_dir=tmp_path)
    stores = tmp_path / slug(scenario.name)
    base = _rollups(stores / "baseline" / "switchover.duckdb")
    for run in [comparison.baseline, *comparison.candidates]:
        assert run.requests == run.answered + run.failed, run.label  # no request faults here
        assert sum(c.requests for c in run.causes) == run.failed, run.label
    for run in comparison.candidates:
        parts, mine = (
            comparison.parts(run),
            _rollups(stores / slug(run.label) / "switchover.duckdb"),
        )
        assert comparison.extra_cost(run) == (parts.price_difference_usd + parts.cache_loss_usd
                                              + parts.rewarm_usd + parts.wasted_usd)  # fmt: skip
        spent = run.cost_usd - comparison.baseline.cost_usd
        if comparison.extra_failed(run) == 0:
            assert comparison.extra_cost(run) == spent, "extra cost is what it spent more"
        assert comparison.extra_cost(run) >= spent, "a failed request is never a saving"
        assert comparison.extra_cost(run) >= -comparison.baseline.cost_usd, "no saving beyond all"
        assert parts.cache_loss_usd == mine["cache_loss_usd"] - base["cache_loss_usd"]
        assert parts.rewarm_usd == mine["rewarm_usd"] - base["rewarm_usd"]
        assert parts.wasted_usd == mine["wasted_usd"] - base["wasted_usd"]
    ranked = comparison.ranked()
    failing = [comparison.failing(run) for run in ranked]
    assert failing == sorted(failing, reverse=True), "failing candidates first"
    answering = [run for run in ranked if not comparison.failing(run)]
    costs = [comparison.extra_cost(run) for run in answering]
    assert costs == sorted(costs), "the ones that answer, cheapest first"
    for run in ranked:
        said = sentence(comparison, run)
        assert not NOT_FOR_PEOPLE.search(said), said
        if comparison.failing(run):
            assert "saved" not in said, said
    _shown_parts_add_up(comparison)


def _shown_parts_add_up(comparison) -> None:
    """As printed, the parts add up to the extra cost beside them, to the last digit shown."""
    rows = {row[0].strip(): row[2:] for row in table_rows(comparison)}
    names = ("price difference", "cache loss", "re-warm", "wasted spend")
    for i, total in enumerate(rows["extra cost vs baseline"]):
        shown = [Decimal(rows[name][i].replace("$", "").replace(",", "")) for name in names]
        assert sum(shown) == Decimal(total.replace("$", "").replace(",", "")), (total, shown)


def test_a_backup_that_cannot_take_the_load_fails_first_with_its_limit_and_when(tight):
    comparison, _ = tight
    mini, haiku = (next(c for c in comparison.candidates if c.label == name)
                   for name in ("gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"))  # fmt: skip
    assert mini.cost_usd < haiku.cost_usd, "it charges the least: its failures cost nothing"
    assert comparison.ranked() == [mini, haiku], "yet it fails, so it comes first"
    assert comparison.failing(mini) and not comparison.failing(haiku)
    assert mini.load is not None and mini.load.refused > 0
    said = sentence(comparison, mini)
    # The outage starts at 12:10; at 2 requests/s the backup passes 60 a minute at once.
    assert said.startswith(
        f"gpt/gpt-4.1-mini would fail {comparison.extra_failed(mini):,} requests the baseline "
        f"answers ({mini.failed:,} in all): its 60 requests/min limit is reached at 12:10 UTC."
    ), said
    assert re.match(
        r"claude/claude-haiku-4-5 answers every request the baseline answers: "
        r"(saved \$[\d.,]+|cost \$[\d.,]+ more) over the scenario \(price -?\$",
        sentence(comparison, haiku),
    ), sentence(comparison, haiku)
    [warning] = [w for w in headroom_warnings(comparison) if "refused" in w]
    assert warning.startswith(f"gpt/gpt-4.1-mini: its rate limits refused {mini.load.refused:,}")


def test_the_command_line_text_warns_on_headroom_and_says_a_sentence_per_candidate(tight):
    comparison, _ = tight
    text = comparison_table(comparison)
    table, _, words = text.partition("\n\n")
    header = table.splitlines()[0]
    assert header.index("gpt/gpt-4.1-mini") < header.index("claude/claude-haiku-4-5")
    for measure in ("requests/min", "input tokens/min", "output tokens/min", "tokens/min"):
        assert f"backup {measure}" in table
    assert "FAILS" in table and "answers all" in table
    assert "OVER" in next(line for line in table.splitlines() if "requests/min" in line)
    for run in comparison.candidates:
        assert sentence(comparison, run) in words
    assert not NOT_FOR_PEOPLE.search(text), text


def test_input_and_output_token_limits_are_each_held_against_their_own_load(tmp_path):
    """`tpm` stays input plus output; `input_tpm` and `output_tpm` are held apart, and the one
    the load meets is the one named."""
    limits = {"gpt/gpt-4.1-mini": {"input_tpm": 5_000_000, "output_tpm": 2_000,
                                   "tpm": 9_000_000}}  # fmt: skip
    scenario = parse_scenario({**SMALL, "limits": limits})
    assert scenario.limits["gpt/gpt-4.1-mini"].output_tpm == 2_000
    comparison = simulate(scenario, ["gpt/gpt-4.1-mini"], results_dir=tmp_path)
    [run] = comparison.candidates
    room = {h.measure: h for h in comparison.headroom(run)}
    assert set(room) == {"input tokens/min", "output tokens/min", "tokens/min"}
    # ~120 answers a minute of ~200 tokens each: at (or, where not enforced, over) the limit
    assert room["output tokens/min"].load >= 0.9 * 2_000
    assert not room["input tokens/min"].over and not room["tokens/min"].over
    assert run.load.nearest_limit().measure == "output tokens/min"
    loads = {load.measure: load for load in run.load.loads}
    con = duckdb.connect(str(tmp_path / "small-outage" / "gpt-gpt-4-1-mini" / "switchover.duckdb"),
                         read_only=True)  # fmt: skip
    peak_in, peak_out, peak_all = con.execute(
        "SELECT max(i), max(o), max(i + o) FROM (SELECT sum(input_tokens + cache_read_tokens "
        "+ cache_write_tokens) AS i, sum(output_tokens) AS o FROM attempts "
        "WHERE target = 'gpt/gpt-4.1-mini' GROUP BY time_bucket(INTERVAL 1 MINUTE, started_at))"
    ).fetchone()
    con.close()
    assert (loads["input tokens/min"].peak, loads["output tokens/min"].peak,
            loads["tokens/min"].peak) == (peak_in, peak_out, peak_all)  # fmt: skip
    assert comparison.failing(run)
    assert "its 2,000 output tokens/min limit" in sentence(comparison, run)
    assert any(w.startswith("gpt/gpt-4.1-mini: ") for w in headroom_warnings(comparison))


def test_a_quick_run_keeps_the_full_runs_verdict_and_says_what_it_cannot_show(tight, tmp_path):
    full, _ = tight
    quick = simulate(parse_scenario(TIGHT).scaled(0.1), results_dir=tmp_path)
    assert quick.scale == 0.1
    mini = next(c for c in quick.candidates if c.label == "gpt/gpt-4.1-mini")
    assert mini.load is not None and mini.load.refused == 0, "at 10 % it never meets its limit"
    [rpm] = quick.headroom(mini)
    assert rpm.scaled_limit == pytest.approx(6.0), "60 a minute × 10 %"
    assert rpm.full_traffic > 60
    verdicts = {c.label: quick.failing(c) for c in quick.candidates}
    assert verdicts == {c.label: full.failing(c) for c in full.candidates}
    assert quick.ranked()[0].label == full.ranked()[0].label == "gpt/gpt-4.1-mini"
    notice = scale_notice(quick)
    assert notice is not None and "cannot show the requests they would refuse" in notice
    assert "gpt/gpt-4.1-mini over its limits" in notice
    assert sentence(quick, mini).startswith(
        "gpt/gpt-4.1-mini would pass its 60 requests/min limit at full traffic"
    )
    assert "6 (60 × 10 %)" in comparison_table(quick), "the table says the limit is scaled"
    assert scale_notice(full) is None


def test_the_quick_run_of_the_anthropic_outage_never_reads_haiku_as_the_cheapest(tmp_path):
    """Issue 21's case: at 1 % Haiku fails next to nothing, yet at 100 % its 400 k tokens a
    minute fail tens of thousands of requests."""
    comparison = simulate(load_scenario("anthropic-529-peak").scaled(0.01), results_dir=tmp_path)
    haiku = comparison.ranked()[0]
    assert haiku.label == "claude/claude-haiku-4-5" and comparison.failing(haiku)
    assert sentence(comparison, haiku).startswith(
        "claude/claude-haiku-4-5 would pass its 400 k tokens/min limit at full traffic"
    )
    assert "claude/claude-haiku-4-5 over its limits" in scale_notice(comparison)


def test_latency_within_the_noise_reads_as_no_difference_and_beyond_it_is_rounded():
    same = LatencyChange.between(Quantile(705, 695, 715), Quantile(700, 690, 710))
    assert same.ms is None and latency_text(same) == "≈ 0"
    slower = LatencyChange.between(Quantile(923.4, 873.4, 973.4), Quantile(700, 690, 710))
    assert same.noise_ms == pytest.approx(14.14, abs=0.01)
    assert slower.ms == 220, "noise of 51 ms: rounded to tens"
    assert latency_text(slower) == "+220 ms"


def test_another_seed_moves_latency_only_within_the_noise(tmp_path):
    """The same traffic and providers drawn with other seeds: the quantiles' differences stay
    inside twice their stated noise (at 95 % each, twice is broken about once in 10,000)."""
    quiet = {**SMALL, "faults": []}
    runs = [simulate(parse_scenario({**quiet, "seed": seed}), ["gpt/gpt-4.1-mini"],
                     results_dir=tmp_path / str(seed)).baseline for seed in (3, 4, 5)]  # fmt: skip
    for a, b in ((runs[0], runs[1]), (runs[1], runs[2])):
        comparison = Comparison("seeds", a, [b])
        for which in ("p50", "p99"):
            mine, base = getattr(b, f"latency_{which}"), getattr(a, f"latency_{which}")
            change = comparison.latency_change(b, which)
            assert abs(mine.ms - base.ms) <= 2 * change.noise_ms, (which, mine, base)


def test_a_slower_backup_shows_as_added_latency_rounded_to_what_the_run_resolves(tmp_path):
    slow = {"target": "gpt/gpt-4.1-mini", "kind": "slow", "start": "10m", "end": "25m",
            "median_ms": 2500, "p99_ms": 6000}  # fmt: skip
    scenario = parse_scenario({**SMALL, "faults": [*SMALL["faults"], slow]})
    comparison = simulate(scenario, ["gpt/gpt-4.1-mini"], results_dir=tmp_path)
    [run] = comparison.candidates
    change = comparison.latency_change(run, "p50")
    assert change is not None and change.ms is not None and change.ms > 0
    step = 10 ** int(f"{change.noise_ms:e}".split("e")[1])
    assert change.ms % step == 0, (change, step)
    assert f"p50 latency +{change.ms:,.0f} ms" in sentence(comparison, run)


def test_a_comparison_reads_back_from_its_json_as_it_was_written(tight):
    comparison, _ = tight
    again = from_json(as_json(comparison))
    assert as_json(again) == as_json(comparison)
    assert comparison_table(again) == comparison_table(comparison)
    assert dataclasses.asdict(again.baseline) == dataclasses.asdict(comparison.baseline)
