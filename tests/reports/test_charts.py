"""The report's charts carry their own look, whatever process draws them: the HTML made where
Streamlit has set plotly's default template to its theme (placeholder colours, 10 px margins)
is the same bytes as the one made without, but for the "Generated" line; and the colours are
the dashboard's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

from helpers.weeks import WEEK

from dashboard.charts import PALETTE, colour_of
from engine.published.read import PublishedData
from engine.reports import charts
from engine.reports.week import build_week

# Writes the report's HTML to argv[2] from the snapshots in argv[1]; with argv[3] == "streamlit"
# after importing Streamlit, as the dashboard's process has.
RENDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    if sys.argv[3] == "streamlit":
        import streamlit  # noqa: F401  (its plotly_chart module installs its theme)
    import plotly.io as pio
    from engine.reports import render
    from engine.reports.week import build_week
    from engine.published.read import PublishedData
    print(pio.templates.default)
    report = build_week(PublishedData(Path(sys.argv[1])), sys.argv[4])
    Path(sys.argv[2]).write_text(render.html(report), encoding="utf-8")
""")
GENERATED = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.")


def test_the_palette_and_colours_are_the_dashboards():
    assert list(charts.PALETTE) == PALETTE
    for name in ("support", "classify", "summarize", "claude/claude-sonnet-4-5"):
        assert charts.colour_of(name) == colour_of(name)


def test_no_two_routes_share_a_colour_even_when_their_names_hash_alike():
    assert colour_of("classify") == colour_of("summarize"), "the case this guards against"
    given = charts.colours(["classify", "summarize", "support"])
    assert len(set(given.values())) == 3
    assert given["classify"] == colour_of("classify")


def test_the_html_is_the_same_bytes_in_a_streamlit_process_but_for_its_generated_line(
    week, tmp_path
):
    pages = {}
    for kind in ("plain", "streamlit"):
        out = tmp_path / f"{kind}.html"
        done = subprocess.run(
            [sys.executable, "-c", RENDER, str(week.paths.published), str(out), kind, WEEK],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        default = done.stdout.split()[-1]
        assert default == ("streamlit" if kind == "streamlit" else "plotly"), done.stdout
        pages[kind] = out.read_text(encoding="utf-8")
    plain, themed = (GENERATED.sub("Generated …", pages[k]) for k in ("plain", "streamlit"))
    assert len(GENERATED.findall(pages["plain"])) == 1
    assert plain == themed
    assert "#000001" not in themed, "no Streamlit placeholder colour"


def test_the_figures_carry_the_product_colours_and_room_for_their_axis_labels(week):
    data = PublishedData(week.paths.published)
    try:
        report = build_week(data, WEEK)
    finally:
        data.close()
    figures = charts.charts(report)
    assert len(figures) == 2
    for figure in figures:
        layout = json.loads(figure.to_json())["layout"]
        assert layout["template"]["layout"]["colorway"] == PALETTE
        assert min(layout["margin"][side] for side in ("l", "b")) >= 60
    [bars] = figures[0].data  # one route, support
    assert bars.marker.color == colour_of("support")
