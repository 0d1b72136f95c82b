"""The weekly report as files: a self-contained HTML page (styles and charts inline, plotly.js
embedded once: it opens offline), Markdown for a chat or a wiki, a CSV of every table, and a
PDF printed by headless Chromium where the machine has one.

All three formats come from `tables()`, so they cannot disagree. A few tables share a section
(SECTIONS: the drills and evals): one heading above them in Markdown and HTML, one CSV each.
"""

from __future__ import annotations

import html as html_escape
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.express as px

from engine.alerts.families import describe
from engine.money import format_usd
from engine.reports.week import WeekReport

Progress = Callable[[str], None]
# Tables under a heading of their own (stem → the section's title); the others are sections.
SECTIONS = {"drills": "Drills and evals", "evals": "Drills and evals"}


def _shown_usd(value: Decimal | float) -> str:
    return format_usd(value)


def _shown_pct(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}%}"


def _raw_usd(value: Decimal | float) -> str:
    return str(Decimal(str(value)).quantize(Decimal("1e-9")))


def _raw_share(value: float | None, digits: int = 0) -> float | None:
    return value


def _missing(value: Any) -> bool:
    return value is None or bool(pd.isna(value))


def _small_usd(value: Any, raw: bool) -> str | None:
    """A drill's or an eval run's money (cents): to the hundredth of a cent when shown."""
    if _missing(value):
        return None
    return _raw_usd(value) if raw else format_usd(Decimal(str(value)), 4)


def tables(report: WeekReport, *, raw: bool = False) -> dict[str, tuple[str, pd.DataFrame]]:
    """Every table of the report: file stem → (title, frame). Display-ready values ("$12.57",
    "99.95%"), or with `raw` the numbers themselves (money as exact decimal strings, shares as
    fractions) for the CSV files."""
    _usd, _pct = (_raw_usd, _raw_share) if raw else (_shown_usd, _shown_pct)
    routes = pd.DataFrame(
        [
            {
                "route": r.route,
                "requests": r.requests,
                "answered": r.answered,
                "availability": _pct(r.availability),
                "error budget burned": _pct(r.budget_burned, 0),
                "fallback rate": _pct(r.fallback_rate, 1),
                "answered by fallback": r.by_fallback,
                "failed, every provider unavailable": r.unavailable,
                "cost": _usd(r.cost_usd),
            }
            for r in report.routes
        ]
    )
    money = pd.DataFrame(
        [
            ("spend", _usd(report.total_cost)),
            ("spend the week before", _usd(report.previous_cost)),
            ("fallback premium", _usd(report.fallback_premium)),
            ("  of which price difference", _usd(report.price_difference)),
            ("  of which cache loss", _usd(report.cache_loss)),
            ("re-warm after fallbacks", _usd(report.rewarm)),
            ("wasted spend", _usd(report.wasted)),
        ],
        columns=["figure", "USD"],
    )
    found = {
        "availability": (f"Availability (target {report.target:.1%})", routes),
        "money": ("Spend and what fallbacks cost", money),
    }
    for dimension, lines in report.cost_by.items():
        found[f"cost_by_{dimension}"] = (f"Cost by {dimension}", pd.DataFrame(
            [{dimension: line.name, "cost": _usd(line.cost_usd),
              "week before": _usd(line.previous_usd),
              "change": _pct(line.change, 0)}
             for line in lines]))  # fmt: skip
    incidents = report.incidents
    found["incidents"] = ("Incidents", pd.DataFrame(
        [{"start (UTC)": f"{i.started_at:%a %Y-%m-%d %H:%M}",
          "duration": _duration(i.started_at, i.ended_at, report.end),
          "what": describe(i.subject, getattr(i, "family", None)), "routes": i.routes,
          "requests affected": int(i.requests_affected),
          "answered by fallback": int(i.answered_by_fallback), "failed": int(i.failed),
          "extra cost": _usd(i.extra_cost_usd), "wasted": _usd(i.wasted_usd),
          "top error": i.top_error or ""}
         for i in incidents.itertuples()]))  # fmt: skip
    found["drills"] = ("Drills started in the week", _drills(report, raw))
    found["evals"] = ("Eval pass rates: each target's latest run of the week", _evals(report, raw))
    found["failures"] = ("Top failure classes per provider", report.failures)
    found["breaker_openings"] = ("Breaker openings", report.breaker_openings)
    found["alerts"] = ("Alerts fired", report.alerts)
    found["unpriced"] = ("Models without a known price", report.unpriced)
    return found


def _drills(report: WeekReport, raw: bool) -> pd.DataFrame:
    """One row a drill with its report's figures: display text or, with `raw`, the numbers;
    empty (None) where the report has no such figure, or no report yet."""

    def count(value: Any) -> int | None:
        return None if _missing(value) else int(value)

    def seconds(value: Any) -> float | str | None:
        if _missing(value):
            return None
        return float(value) if raw else f"{float(value):.1f} s"

    def restored(value: Any, reported: bool) -> bool | str | None:
        """The report says true once the target served again, null until then."""
        if _missing(value):
            return "not seen" if reported and not raw else None
        return bool(value) if raw else ("yes" if value else "no")

    return pd.DataFrame(
        [{"start (UTC)": f"{d.started_at:%a %Y-%m-%d %H:%M}", "route": d.route,
          "target": d.target, "duration": _duration(d.started_at, d.ended_at, report.end),
          "status": d.status, "verdict": None if _missing(d.verdict) else d.verdict,
          "requests": count(d.requests), "served by backups": count(d.served_by_backups),
          "failed": count(d.failed), "breaker opened after": seconds(d.breaker_opened_after_s),
          "cost difference": _small_usd(d.cost_difference_usd, raw),
          "restored": restored(d.restored, d.status == "reported"),
          "restored after": seconds(d.restored_after_s),
          "summary": None if _missing(d.summary) else d.summary}
         for d in report.drills.itertuples()],
        columns=["start (UTC)", "route", "target", "duration", "status", "verdict", "requests",
                 "served by backups", "failed", "breaker opened after", "cost difference",
                 "restored", "restored after", "summary"],
    )  # fmt: skip


def _evals(report: WeekReport, raw: bool) -> pd.DataFrame:
    pct = _raw_share if raw else _shown_pct
    return pd.DataFrame(
        [{"route": e.route, "target": e.target, "run (UTC)": f"{e.started_at:%a %Y-%m-%d %H:%M}",
          "cases file": e.cases_file, "cases": int(e.cases), "passed": int(e.passed),
          "pass rate": pct(e.pass_rate, 1), "minimum": pct(e.min_pass_rate, 0),
          "below minimum": bool(e.below_minimum) if raw else ("yes" if e.below_minimum else "no"),
          "p50 latency (ms)": None if _missing(e.latency_p50_ms) else round(e.latency_p50_ms),
          "cost": _small_usd(e.cost_usd, raw)}
         for e in report.evals.itertuples()],
        columns=["route", "target", "run (UTC)", "cases file", "cases", "passed", "pass rate",
                 "minimum", "below minimum", "p50 latency (ms)", "cost"],
    )  # fmt: skip


def _duration(start: pd.Timestamp, end: pd.Timestamp | None, week_end: object) -> str:
    if end is None or pd.isna(end):
        return "ongoing"
    minutes = int((end - start).total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def markdown(report: WeekReport) -> str:
    period = f"{report.start:%Y-%m-%d} to {report.end:%Y-%m-%d} (UTC)"
    lines = [f"# Reliability report {report.week}", "", period, "", "## What changed", ""]
    lines += [f"- {sentence}" for sentence in report.summary]
    for section, level, title, frame in _sectioned(report):
        if section:
            lines += ["", f"## {section}"]
        lines += ["", f"{'#' * level} {title}", ""]
        lines.append(_md_table(frame) if len(frame) else "None.")
    return "\n".join(lines) + "\n"


def _sectioned(report: WeekReport) -> list[tuple[str | None, int, str, pd.DataFrame]]:
    """Each displayed table as (the section heading it opens or None, the level of its own
    heading: 2, or 3 inside a section, its title, the frame)."""
    out: list[tuple[str | None, int, str, pd.DataFrame]] = []
    opened = None
    for stem, (title, frame) in tables(report).items():
        section = SECTIONS.get(stem)
        out.append((section if section != opened else None, 3 if section else 2, title, frame))
        opened = section
    return out


def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [
        [_cell(v) for v in row] for row in frame.itertuples(index=False)
    ]
    out = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    out += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(out)


def _cell(value: object) -> str:
    return (
        ""
        if value is None or (isinstance(value, float) and pd.isna(value))
        else str(value).replace("|", "\\|")
    )


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0; } .period { color: #666; margin-top: .2rem; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; font-size: .9rem; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .7rem; text-align: left; }
th { background: #f5f5f5; } .summary li { margin: .3rem 0; }
"""


def html(report: WeekReport) -> str:
    """One file with everything in it: styles, tables and charts (plotly.js inlined once)."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Reliability report "
             f"{report.week}</title><style>{_STYLE}</style></head><body>",
             f"<h1>Reliability report {report.week}</h1>",
             f"<p class='period'>{report.start:%Y-%m-%d} to {report.end:%Y-%m-%d} (UTC)</p>",
             "<h2>What changed</h2><ul class='summary'>",
             *(f"<li>{html_escape.escape(s)}</li>" for s in report.summary), "</ul>"]  # fmt: skip
    for i, figure in enumerate(charts(report)):
        parts.append(figure.to_html(full_html=False, include_plotlyjs=i == 0,
                                    config={"displayModeBar": False}))  # fmt: skip
    for section, level, title, frame in _sectioned(report):
        if section:
            parts.append(f"<h2>{html_escape.escape(section)}</h2>")
        parts.append(f"<h{level}>{html_escape.escape(title)}</h{level}>")
        parts.append(
            frame.to_html(index=False, border=0, na_rep="") if len(frame) else "<p>None.</p>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def charts(report: WeekReport) -> list:
    daily = report.daily
    if daily.empty:
        return []
    cost = px.bar(daily, x="day", y="cost_usd", color="route", title="Spend per day (USD)")
    share = daily.assign(
        availability=daily["answered"] / daily["counted"].where(daily["counted"] > 0)
    )
    availability = px.line(share, x="day", y="availability", color="route", markers=True,
                           title="Availability per day")  # fmt: skip
    availability.add_hline(y=report.target, line_dash="dot", annotation_text="target")
    for figure in (cost, availability):
        figure.update_layout(height=320, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return [cost, availability]


def write(
    report: WeekReport, out_dir: Path, progress: Progress = lambda _: None
) -> dict[str, Path]:
    """Write every format under `out_dir/<week>/`; the files written, by format."""
    folder = Path(out_dir) / report.week
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    progress("HTML")
    written["html"] = folder / f"reliability-{report.week}.html"
    written["html"].write_text(html(report), encoding="utf-8")
    progress("Markdown")
    written["markdown"] = folder / f"reliability-{report.week}.md"
    written["markdown"].write_text(markdown(report), encoding="utf-8")
    progress("CSV")
    csv_dir = folder / "csv"
    csv_dir.mkdir(exist_ok=True)
    for stem, (_, frame) in tables(report, raw=True).items():
        frame.to_csv(csv_dir / f"{stem}.csv", index=False)
    pd.DataFrame({"what changed": report.summary}).to_csv(csv_dir / "summary.csv", index=False)
    written["csv"] = csv_dir
    pdf = folder / f"reliability-{report.week}.pdf"
    progress("PDF")
    if print_pdf(written["html"], pdf):
        written["pdf"] = pdf
    return written


def print_pdf(page: Path, pdf: Path) -> bool:
    """Print `page` to `pdf` with headless Chromium when the machine has it; False otherwise."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return False
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--no-pdf-header-footer",
             "--virtual-time-budget=5000", f"--print-to-pdf={pdf}", page.resolve().as_uri()],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    return done.returncode == 0 and pdf.exists() and pdf.stat().st_size > 0
