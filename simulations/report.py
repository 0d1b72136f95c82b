"""A simulation's comparison as a plain-text table, for the command line."""

from __future__ import annotations

from engine.money import format_usd as _usd
from simulations.results import Comparison, RunResult


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:+,.0f} ms"


def _headroom(peak: int, limit: int | None) -> str:
    if limit is None:
        return f"{peak:,} (no limit given)"
    return f"{peak:,} / {limit:,} ({'OVER' if peak > limit else f'{1 - peak / limit:.0%} free'})"


def comparison_table(comparison: Comparison) -> str:
    base = comparison.baseline
    rows: list[tuple[str, ...]] = [
        ("", "baseline", *(c.label for c in comparison.candidates)),
        ("requests", f"{base.requests:,}", *(f"{c.requests:,}" for c in comparison.candidates)),
        ("failed", f"{base.failed:,}", *(f"{c.failed:,}" for c in comparison.candidates)),
        ("fallback rate", f"{base.fallback_rate:.1%}",
         *(f"{c.fallback_rate:.1%}" for c in comparison.candidates)),
        ("cost", _usd(base.cost_usd), *(_usd(c.cost_usd) for c in comparison.candidates)),
        ("extra cost vs baseline", "", *(_usd(comparison.extra_cost(c))
                                         for c in comparison.candidates)),
        ("fallback premium", "", *(_usd(c.fallback_premium_usd) for c in comparison.candidates)),
        ("  price difference", "", *(_usd(c.price_difference_usd)
                                     for c in comparison.candidates)),
        ("  cache loss", "", *(_usd(c.cache_loss_usd) for c in comparison.candidates)),
        ("re-warm", "", *(_usd(c.rewarm_usd) for c in comparison.candidates)),
        ("wasted spend", _usd(base.wasted_usd), *(_usd(c.wasted_usd)
                                                   for c in comparison.candidates)),
        ("added latency p50", "", *(_ms(comparison.added_latency_ms(c, "p50"))
                                    for c in comparison.candidates)),
        ("added latency p99", "", *(_ms(comparison.added_latency_ms(c, "p99"))
                                    for c in comparison.candidates)),
        ("backup peak requests/min", "", *(_headroom(c.backup_peak_rpm, c.backup_rpm_limit)
                                           for c in comparison.candidates)),
        ("backup peak tokens/min", "", *(_headroom(c.backup_peak_tpm, c.backup_tpm_limit)
                                         for c in comparison.candidates)),
        ("simulated requests/s", _rate(base), *(_rate(c) for c in comparison.candidates)),
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]  # fmt: skip
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _rate(run: RunResult) -> str:
    return f"{run.requests_per_s:,.0f}"
