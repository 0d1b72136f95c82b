"""A simulation's comparison in words: one sentence per candidate (the command line and the
What-if page say the same), the headroom warnings, what a scaled run cannot show, and the
command line's table. Money through engine.core.money; times in the zone asked for (UTC here)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from decimal import Decimal

from engine.core.formats import format_latency, format_latency_change
from engine.core.money import (
    column_digits,
    digits_for,
    format_parts,
    format_usd,
    read_usd,
    said_as_change,
)
from simulations.whatif.calibration import TRUSTED
from simulations.whatif.result_parts import CostParts
from simulations.whatif.results import (
    SUSTAINED_MINUTES,
    Cause,
    Comparison,
    Headroom,
    LatencyChange,
    RunResult,
)

# What a failed request's last attempt says, for a person; other classes are read as written.
_CLASS_WORDS = {"read_timeout": "timed out", "connect_timeout": "timed out connecting",
                "overloaded": "overloaded (529)", "server_error": "server errors (5xx)",
                "rate_limit": "rate limited (429)", "no_budget": "out of time budget",
                "auth": "its key refused", "invalid_key": "its key refused"}  # fmt: skip


def comparison_table(comparison: Comparison, tz: tzinfo = UTC) -> str:
    """The command line's text: the table (`table_rows`), then what a scaled run cannot show,
    the headroom warnings and a sentence per candidate."""
    rows = table_rows(comparison)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    notes = [calibration_text(comparison), scale_notice(comparison)]
    notes += headroom_warnings(comparison, tz)
    said = [n for n in notes if n] + [sentence(comparison, c, tz) for c in comparison.ranked()]
    return "\n".join(lines) + "\n\n" + "\n".join(said)


def table_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    """The comparison as cells, a figure a row: the measure, the baseline's, then each
    candidate's in `Comparison.ranked` order (failing ones first). The page shows the same
    cells, a run a row."""
    runs = comparison.ranked()
    base = comparison.baseline

    def row(name: str, of_base: str, cell: object) -> tuple[str, ...]:
        return (name, of_base, *(cell(c) for c in runs))  # type: ignore[operator]

    def money_row(name: str, figure: Callable[[RunResult], Decimal]) -> tuple[str, ...]:
        """A row of the runs' dollars at one precision, to be compared (column_digits)."""
        digits = column_digits(figure(r) for r in (base, *runs))
        return row(name, format_usd(figure(base), digits), lambda c: format_usd(figure(c), digits))

    digits = _money_digits(comparison)

    spent_more = comparison.cost_difference

    def part(name: str) -> object:
        return lambda c: _signed(_shown(comparison, c, digits)[1][name])

    rows: list[tuple[str, ...]] = [
        ("", "baseline", *(c.label for c in runs)),
        row("verdict", "", lambda c: _verdict(comparison, c)),
        row("requests", f"{base.requests:,}", lambda c: f"{c.requests:,}"),
        row("answered", f"{base.answered:,}", lambda c: f"{c.answered:,}"),
        row("failed", f"{base.failed:,}", lambda c: f"{c.failed:,}"),
        row("fallback rate", f"{base.fallback_rate:.1%}", lambda c: f"{c.fallback_rate:.1%}"),
        money_row("cost of answered requests", lambda r: r.answered_cost_usd),
        money_row("cost per answered request", lambda r: r.cost_per_answered_usd),
        row("cost vs baseline", "", lambda c: _signed(format_usd(spent_more(c), digits))),
        row("extra cost vs baseline", "", lambda c: _signed(_shown(comparison, c, digits)[0])),
        row("  price difference", "", part("price")),
        row("  cache loss", "", part("cache loss")),
        row("  re-warm", "", part("re-warm")),
        row("  wasted spend", "", part("wasted")),
        row("latency p50", _ms(base.latency_p50), lambda c: _added(comparison, c, "p50")),
        row("latency p99", _ms(base.latency_p99), lambda c: _added(comparison, c, "p99")),
        *(row(f"backup {measure}", "", lambda c, m=measure: _headroom_cell(comparison, c, m))
          for measure in ("requests/min", "input tokens/min", "output tokens/min",
                          "tokens/min")),
        row("simulated requests/s", _rate(base), _rate),
    ]  # fmt: skip
    return rows


def sentence(comparison: Comparison, run: RunResult, tz: tzinfo = UTC) -> str:
    """What `run`'s candidate would do, failures first: "claude/claude-haiku-4-5 would fail
    27,097 requests the baseline answers (27,453 in all): its 400 k tokens/min limit is reached
    at 13:00 UTC." or "gpt/gpt-4.1-mini answers every request the baseline answers: saved
    $229.38 over the scenario (price -$424.17, cache loss +$194.88, wasted -$0.08)."; a scaled
    run's candidate that would pass a limit at full traffic says so instead of its cost."""
    if comparison.fails_more(run):
        extra = comparison.extra_failed(run)
        return (
            f"{run.label} would fail {extra:,} requests the baseline answers "
            f"({run.failed:,} in all): {_cause(comparison, run, tz)}."
        )
    over = comparison.over_at_full_traffic(run)
    if over:
        h = max(over, key=lambda h: h.full_traffic / h.limit)
        return (
            f"{run.label} would pass its {_compact(h.limit)} {h.measure} limit at full "
            f"traffic (about {_compact(h.full_traffic)}): this {_pct(comparison.scale)} run "
            "cannot reach its limits, so it cannot count the requests that would fail; "
            "run it at 100 % to count them."
        )
    unenforced = [h for h in comparison.headroom(run) if h.over]
    if unenforced:
        h = unenforced[0]
        return (
            f"{run.label} goes over its {_compact(h.limit)} {h.measure} limit "
            f"({_compact(h.load)} at its busiest), which the simulation does not enforce: "
            "the requests a provider would refuse are not counted."
        )
    answers = _answers(comparison, run)
    cost = _cost(comparison, run)
    slower = _latency_clause(comparison, run)
    return f"{run.label} {answers}: {cost}{slower}."


def calibration_text(comparison: Comparison) -> str | None:
    """How far a replay is from what happened, run with the backups that really served: "This
    replay reproduces what happened within 4 % (…)", or, beyond TRUSTED on any measure, that
    it is not to be trusted and which measure is off; None for a run that is no replay."""
    c = comparison.calibration
    if c is None:
        return None
    each = ", ".join(f"{m.name} {_figure(m.replayed)} against {_figure(m.recorded)} recorded"
                     for m in c.measures)  # fmt: skip
    unmeasured = (
        " The store recorded no cache loss to compare with: it had no cache-hit baseline for "
        "these hours (the primary's answers of the day before)."
        if c.unmeasured
        else ""
    )
    if c.trusted:
        return (
            f"This replay reproduces what happened within {_whole_pct(c.within)}, run with the "
            f"backups that really served: {each}.{unmeasured}"
        )
    worst = c.worst
    return (
        f"Not to be trusted: run with the backups that really served, this replay is "
        f"{_whole_pct(worst.off)} off what happened on {worst.name} "
        f"({_figure(worst.replayed)} against {_figure(worst.recorded)} recorded), beyond the "
        f"{_whole_pct(TRUSTED)} it must be within, and every candidate's figures carry that "
        f"error ({each}).{unmeasured}"
    )


def _figure(value: object) -> str:
    return format_usd(value) if isinstance(value, Decimal) else f"{value:,}"  # type: ignore[arg-type]


def scale_notice(comparison: Comparison) -> str | None:
    """What a run of a share of the traffic cannot show, and what full traffic would put on
    each backup with limits; None for a full run."""
    scale = comparison.scale
    if scale >= 1:
        return None
    each = []
    for run in comparison.candidates:
        limited = comparison.headroom(run)
        if not limited:
            continue
        figures = ", ".join(
            f"{_compact(h.full_traffic)} of {_compact(h.limit)} {h.measure}" for h in limited
        )
        verdict = "over its limits" if any(h.over for h in limited) else "within its limits"
        each.append(f"{run.label} {verdict} ({figures})")
    full = "; ".join(each) if each else "no backup has limits in this scenario"
    return (
        f"This run sends {_pct(scale)} of the scenario's traffic, and limits are compared at "
        f"{_pct(scale)} of their value: it cannot reach the backups' rate limits, so it "
        "cannot show the requests they would refuse. At full traffic (its busiest "
        f"{SUSTAINED_MINUTES} minutes scaled up, which leans high): {full}."
    )


def headroom_warnings(comparison: Comparison, tz: tzinfo = UTC) -> list[str]:
    """One line per backup whose rate limits refused requests, and one per limit its load
    passed."""
    said = []
    for run in comparison.candidates:
        load = run.load
        if load is not None and load.refused and load.first_refused_at is not None:
            cooling = sum(
                c.requests
                for c in run.causes
                if c.target == run.backup and c.error_class == "all_skipped" and c.rate_limited
            )
            more = f", and {cooling:,} more failed while it cooled down" if cooling else ""
            said.append(
                f"{run.label}: its rate limits refused {load.refused:,} requests from "
                f"{_at(load.first_refused_at, comparison, tz)}{more}."
            )
        for h in comparison.headroom(run):
            if h.over:
                said.append(
                    f"{run.label}: {h.load:,.0f} {h.measure} against a limit of "
                    f"{_limit(h)}: over it."
                )
    return said


def latency_text(change: LatencyChange | None) -> str:
    if change is None:
        return "—"
    return "≈ 0" if change.ms is None else format_latency_change(change.ms)


def headroom_text(h: Headroom) -> str:
    """ "207 / 4,000 (95 % free)", "4,100 / 4,000 (OVER)"; a scaled limit says so."""
    state = "OVER" if h.over else f"{1 - h.load / h.scaled_limit:.0%} free"
    return f"{h.load:,.0f} / {_limit(h)} ({state})"


def cause_text(cause: Cause) -> str:
    """A failed request's end, for a person: "claude/claude-haiku-4-5: timed out"."""
    if cause.error_class == "all_skipped" and cause.detail:
        return f"{cause.target}: skipped, {cause.detail}"
    return f"{cause.target}: {_CLASS_WORDS.get(cause.error_class, cause.error_class)}"


# --- parts -----------------------------------------------------------------------------------


def _verdict(comparison: Comparison, run: RunResult) -> str:
    if comparison.fails_more(run):
        return f"FAILS {comparison.extra_failed(run):,}"
    if any(h.over for h in comparison.headroom(run)):
        return "OVER LIMIT"
    return "answers all"


def _answers(comparison: Comparison, run: RunResult) -> str:
    extra = comparison.extra_failed(run)
    if extra == 0:
        return "answers every request the baseline answers"
    return (
        f"fails {extra:,} more requests than the baseline ({run.failed:,} against "
        f"{comparison.baseline.failed:,}), within the run's noise"
    )


def _money_digits(comparison: Comparison) -> int:
    """Decimals for every candidate's extra cost and its parts, so that the table's rows
    compare: what the largest of them needs (engine.core.money.digits_for)."""
    every = [comparison.parts(run) for run in comparison.candidates]
    figures = [abs(v) for parts in every for v in (parts.total, *_named(parts).values())]
    return digits_for(max(figures, default=0))


def _shown(comparison: Comparison, run: RunResult, digits: int) -> tuple[str, dict[str, str]]:
    """`run`'s extra cost and its parts as shown: at `digits`, the parts adding up to the
    extra cost as shown (engine.core.money.format_parts)."""
    parts = comparison.parts(run)
    return format_parts(parts.total, _named(parts), digits)


def _named(parts: CostParts) -> dict[str, Decimal]:
    return {"price": parts.price_difference_usd, "cache loss": parts.cache_loss_usd,
            "re-warm": parts.rewarm_usd, "wasted": parts.wasted_usd}  # fmt: skip


def _cost(comparison: Comparison, run: RunResult) -> str:
    whole, parts = _shown(comparison, run, _money_digits(comparison))
    total = said_as_change(whole)
    if total == "no difference":
        return "no difference in cost over the scenario"
    shown = [f"{name} {_signed(v)}" for name, v in parts.items() if read_usd(v)]
    return f"{total} over the scenario ({', '.join(shown)}){_unanswered(comparison, run)}"


def _unanswered(comparison: Comparison, run: RunResult) -> str:
    """Why the extra cost is not cost − baseline cost, when it is not: requests left
    unanswered were never charged, and count at the baseline's cost per answered request."""
    if not comparison.unanswered_usd(run):
        return ""
    n, base = comparison.extra_failed(run), comparison.baseline
    spent = format_usd(comparison.cost_difference(run))
    return (
        f"; its spend differs from the baseline's by {_signed(spent)}, since the {n:,} "
        f"requests it left unanswered were never charged: they count at the baseline's "
        f"{format_usd(base.cost_per_answered_usd)} a request"
    )


def _cause(comparison: Comparison, run: RunResult, tz: tzinfo) -> str:
    """Why most of `run`'s failed requests failed: its backup's limit, where the backup's own
    limits refused them, else the commonest last attempt's target and class."""
    load = run.load
    causes = sorted(run.causes, key=lambda c: -c.requests)
    top = causes[0] if causes else None
    limited = load is not None and load.refused and load.first_refused_at is not None
    if top is not None and top.rate_limited and top.target == run.backup and limited:
        nearest = load.nearest_limit()  # type: ignore[union-attr]
        when = _at(load.first_refused_at, comparison, tz)  # type: ignore[union-attr,arg-type]
        if nearest is not None:
            return f"its {_compact(nearest.limit)} {nearest.measure} limit is reached at {when}"
        return f"its rate limits refuse requests from {when}"
    if top is None:
        return "no failed request was recorded"
    return f"{top.requests:,} of them end at {cause_text(top)}"


def _latency_clause(comparison: Comparison, run: RunResult) -> str:
    changes = [(which, comparison.latency_change(run, which)) for which in ("p50", "p99")]
    said = [
        f"{which} latency {latency_text(c)}"
        for which, c in changes
        if c is not None and c.ms is not None
    ]
    return f"; {' and '.join(said)}" if said else ""


def _headroom_cell(comparison: Comparison, run: RunResult, measure: str) -> str:
    for h in comparison.headroom(run):
        if h.measure == measure:
            return headroom_text(h)
    if run.load is None:
        return ""
    [load] = [x for x in run.load.loads if x.measure == measure]
    value = load.peak if comparison.scale >= 1 else load.sustained
    return f"{value:,.0f} (no limit given)"


def _limit(h: Headroom) -> str:
    if h.scale >= 1:
        return f"{h.limit:,}"
    return f"{h.scaled_limit:,.0f} ({h.limit:,} × {_pct(h.scale)})"


def _added(comparison: Comparison, run: RunResult, which: str) -> str:
    return latency_text(comparison.latency_change(run, which))


def _ms(q: object) -> str:
    return format_latency(None if q is None else q.ms)  # type: ignore[attr-defined]


def _rate(run: RunResult) -> str:
    return f"{run.requests_per_s:,.0f}"


def _signed(shown: str) -> str:
    """ "+$9.10", "-$172.55", "$0.00": a figure as shown that goes either way, signed."""
    return f"+{shown}" if read_usd(shown) > 0 else shown


def _whole_pct(share: float) -> str:
    """A share off, to the whole percent: "4 %"; below one, "< 1 %"."""
    return "< 1 %" if 0 < share < 0.005 else f"{share * 100:.0f} %"


def _pct(share: float) -> str:
    """A traffic scale as the page's choices say it: "1 %", "100 %"."""
    return f"{share * 100:g} %"


def _compact(value: float) -> str:
    """400000 → "400 k", 1283790 → "1.28 M", 4000 → "4,000": limits and loads at a glance."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g} M"
    if value >= 100_000:
        return f"{value / 1_000:.3g} k"
    return f"{value:,.0f}"


def _at(when: datetime, comparison: Comparison, tz: tzinfo) -> str:
    """The time of day in `tz`, with the day when the scenario is longer than one."""
    local = when.astimezone(tz)
    long = comparison.baseline.duration_s > 86_400
    return local.strftime("%a %H:%M %Z" if long else "%H:%M %Z")
