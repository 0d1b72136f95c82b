"""The weekly report as files: a self-contained HTML page (styles and charts inline, plotly.js
embedded once: it opens offline), Markdown for a chat or a wiki, a CSV of every table, and a
PDF printed by headless Chromium where the machine has one.

Every format comes from the same parts (engine.reports.tables, .headline, .summary, .charts),
so they cannot disagree. A few tables share a section (SECTIONS: the drills and evals): one
heading above them in Markdown and HTML, one CSV each. The only thing that differs between two
renderings of one report is the "Generated" line: the HTML the Reports page offers and the one
`switchover report` writes are otherwise the same bytes.
"""

from __future__ import annotations

import html as html_escape
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from engine.reports import charts as report_charts
from engine.reports.content import Headline, WeekReport
from engine.reports.headline import headline, period
from engine.reports.tables import empty_text, missing, tables

__all__ = ["NOTHING_TO_LOOK_AT", "charts", "csv_tables", "empty_text", "generated", "html",
           "markdown", "period", "print_pdf", "tables", "write"]  # fmt: skip

Progress = Callable[[str], None]
# Tables under a heading of their own (stem → the section's title); the others are sections.
SECTIONS = {"drills": "Drills and evals", "evals": "Drills and evals"}
# Tables with long text (what, summary): the page's whole width, so that it does not wrap.
WIDE = {"availability", "incidents", "alerts", "drills", "evals", "failures"}
NOTHING_TO_LOOK_AT = "Nothing else needs a look."
charts = report_charts.charts


def generated(at: datetime | None = None) -> str:
    """The one line two renderings of a report differ by."""
    return f"Generated {(at or datetime.now(UTC)).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC."


def _said(report: WeekReport) -> Headline:
    return report.headline or headline(report)


def markdown(report: WeekReport, *, generated_at: datetime | None = None) -> str:
    said = _said(report)
    lines = [f"# Reliability report {report.week}", "", period(report), "",
             generated(generated_at), "", "## In short", ""]  # fmt: skip
    for sentence in said.sentences():
        lines += [sentence, ""]
    lines += ["**What to look at**", ""]
    lines += [f"- {item}" for item in said.look_at] or [NOTHING_TO_LOOK_AT]
    lines += ["", "## What changed", ""]
    lines += [f"- {sentence}" for sentence in report.summary]
    for section, level, stem, title, frame in _sectioned(report):
        if section:
            lines += ["", f"## {section}"]
        lines += ["", f"{'#' * level} {title}", ""]
        lines.append(_md_table(frame) if len(frame) else empty_text(report, stem))
    return "\n".join(lines) + "\n"


def _sectioned(report: WeekReport) -> list[tuple[str | None, int, str, str, pd.DataFrame]]:
    """Each displayed table as (the section heading it opens or None, the level of its own
    heading: 2, or 3 inside a section, its stem, its title, the frame)."""
    out: list[tuple[str | None, int, str, str, pd.DataFrame]] = []
    opened = None
    for stem, (title, frame) in tables(report).items():
        section = SECTIONS.get(stem)
        out.append(
            (section if section != opened else None, 3 if section else 2, stem, title, frame)
        )
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
    return "—" if missing(value) else str(value).replace("|", "\\|")


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1150px; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0; } .period { color: #555; margin: .2rem 0; }
.generated { color: #888; font-size: .85rem; margin-top: 0; }
.headline { background: #f4f7fb; border-left: 4px solid #2E91E5; padding: .6rem 1.2rem; }
.headline p { margin: .5rem 0; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; font-size: .85rem; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .6rem; text-align: left;
         vertical-align: top; }
th { background: #f5f5f5; } .summary li { margin: .3rem 0; }
td:first-child { white-space: nowrap; } table.wide { width: 100%; }
.chart { margin: 1rem 0; }
@page { size: A4 landscape; margin: 12mm; }
@media print { body { max-width: none; margin: 0; } table { font-size: .75rem; }
               .chart { break-inside: avoid; } }
"""


def html(report: WeekReport, *, generated_at: datetime | None = None) -> str:
    """One file with everything in it: styles, tables and charts (plotly.js inlined once)."""
    said = _said(report)
    esc = html_escape.escape
    look_at = "".join(f"<li>{esc(item)}</li>" for item in said.look_at)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Reliability report "
        f"{report.week}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Reliability report {report.week}</h1>",
        f"<p class='period'>{esc(period(report))}</p>",
        f"<p class='generated'>{esc(generated(generated_at))}</p>",
        "<div class='headline'><h2>In short</h2>",
        *(f"<p>{esc(sentence)}</p>" for sentence in said.sentences()),
        "<p><strong>What to look at</strong></p>",
        f"<ul>{look_at}</ul>" if look_at else f"<p>{NOTHING_TO_LOOK_AT}</p>",
        "</div>",
        "<h2>What changed</h2><ul class='summary'>",
        *(f"<li>{esc(s)}</li>" for s in report.summary),
        "</ul>",
        *(f"<div class='chart'>{fragment}</div>"
          for fragment in report_charts.html(charts(report))),
    ]  # fmt: skip
    for section, level, stem, title, frame in _sectioned(report):
        if section:
            parts.append(f"<h2>{esc(section)}</h2>")
        parts.append(f"<h{level}>{esc(title)}</h{level}>")
        parts.append(
            frame.to_html(
                index=False, border=0, na_rep="—", classes="wide" if stem in WIDE else None
            )
            if len(frame)
            else f"<p>{esc(empty_text(report, stem))}</p>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write(
    report: WeekReport, out_dir: Path, progress: Progress = lambda _: None
) -> dict[str, Path]:
    """Write every format under `out_dir/<week>/`; the files written, by format."""
    folder = Path(out_dir) / report.week
    folder.mkdir(parents=True, exist_ok=True)
    at = datetime.now(UTC)
    written: dict[str, Path] = {}
    progress("HTML")
    written["html"] = folder / f"reliability-{report.week}.html"
    written["html"].write_text(html(report, generated_at=at), encoding="utf-8")
    progress("Markdown")
    written["markdown"] = folder / f"reliability-{report.week}.md"
    written["markdown"].write_text(markdown(report, generated_at=at), encoding="utf-8")
    progress("CSV")
    csv_dir = folder / "csv"
    csv_dir.mkdir(exist_ok=True)
    for stem, (_, frame) in csv_tables(report).items():
        frame.to_csv(csv_dir / f"{stem}.csv", index=False)
    written["csv"] = csv_dir
    pdf = folder / f"reliability-{report.week}.pdf"
    progress("PDF")
    if print_pdf(written["html"], pdf):
        written["pdf"] = pdf
    return written


def csv_tables(report: WeekReport) -> dict[str, tuple[str, pd.DataFrame]]:
    """What the CSV files hold, by file stem: every table with raw values, the headline and
    what changed."""
    said = _said(report)
    found = dict(tables(report, raw=True))
    found["headline"] = ("In short", pd.DataFrame(
        {"in short": [period(report), *said.sentences(), *said.look_at]}))  # fmt: skip
    found["summary"] = ("What changed", pd.DataFrame({"what changed": report.summary}))
    return found


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
