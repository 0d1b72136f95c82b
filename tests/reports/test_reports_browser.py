"""The Reports page in a real browser: `switchover dashboard` as a process on the fixture week,
Debian's headless Chromium driven by Playwright. The HTML downloaded from the page is the one
`switchover report` writes, byte for byte but for its "Generated" line, and its charts, opened
offline, are drawn in the product's colours (by pixel), not Streamlit's black placeholders.
Outside CI a machine without Chromium skips it, saying why; in CI a missing browser fails."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.weeks import WEEK
from PIL import Image

from dashboard.screenshots import _CHARTS_WITH_DATA, CHROMIUM, browser, serving
from engine.reports.charts import colour_of

SHOTS = os.environ.get("SWITCHOVER_SCREENSHOTS")  # where to keep the screenshots
GENERATED = re.compile(rb"Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.")
ROUTE_COLOUR = colour_of("support")  # the fixture week's one route

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing in CI: .ci/run must install Debian's chromium")
    pytest.skip("no Chromium on this machine (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def dashboard(week):
    with serving(week.paths.root) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return Path(SHOTS) if SHOTS else tmp_path_factory.mktemp("shots")


@pytest.fixture(scope="module")
def downloaded(dashboard, shots, tmp_path_factory) -> Path:
    """The week's report page, its screenshot, and the HTML its button downloads."""
    folder = tmp_path_factory.mktemp("download")
    with browser() as chromium:
        tab = chromium.new_page(viewport={"width": 1400, "height": 5000}, accept_downloads=True)
        tab.goto(f"{dashboard}/reports", wait_until="networkidle")
        tab.wait_for_selector('[data-testid="stMain"] h1', timeout=30_000)
        tab.get_by_test_id("stMainBlockContainer").get_by_test_id("stSelectbox").click()
        tab.get_by_role("option", name=f"{WEEK} (week to date)").click()
        tab.get_by_text("Week to date: Mon 16 Nov 2026").wait_for(timeout=30_000)
        tab.wait_for_function(
            f"() => {{ const c = ({_CHARTS_WITH_DATA})(); return c.length == 2 && "
            "c.every(Boolean); }", timeout=30_000)  # fmt: skip
        tab.wait_for_timeout(500)
        assert tab.locator('[data-testid="stException"]').all_inner_texts() == []
        tab.screenshot(path=str(shots / "reports-page.png"), full_page=True)
        (folder / "page-chart.png").write_bytes(tab.locator(".js-plotly-plot").first.screenshot())
        with tab.expect_download() as download:
            tab.get_by_role("button", name="HTML (self-contained)").click()
        download.value.save_as(folder / "page.html")
    return folder


def test_the_page_and_switchover_report_make_the_same_html_but_for_its_generated_line(
    week, downloaded, tmp_path
):
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "report", "--week", WEEK, "--data-dir",
         str(week.paths.root), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cli = (tmp_path / WEEK / f"reliability-{WEEK}.html").read_bytes()
    page = (downloaded / "page.html").read_bytes()
    assert len(GENERATED.findall(page)) == len(GENERATED.findall(cli)) == 1
    assert GENERATED.sub(b"", page) == GENERATED.sub(b"", cli)


def test_the_pages_chart_is_drawn_in_the_routes_colour(downloaded):
    assert _pixels(downloaded / "page-chart.png", ROUTE_COLOUR) > 500


def test_the_downloaded_html_opened_offline_draws_its_bars_in_the_product_colours(
    downloaded, shots
):
    with browser() as chromium:
        context = chromium.new_context(offline=True, viewport={"width": 1200, "height": 900})
        tab = context.new_page()
        tab.goto((downloaded / "page.html").as_uri())
        tab.wait_for_function(f"() => ({_CHARTS_WITH_DATA})().every(Boolean)", timeout=30_000)
        tab.wait_for_timeout(500)
        spend, availability = tab.locator(".js-plotly-plot").all()
        (downloaded / "spend.png").write_bytes(spend.screenshot())
        (downloaded / "availability.png").write_bytes(availability.screenshot())
        tab.screenshot(path=str(shots / "report-html.png"), full_page=True)
    for chart in ("spend.png", "availability.png"):
        assert _pixels(downloaded / chart, ROUTE_COLOUR) > 100, chart
        assert _darkest(downloaded / chart) > 20, f"{chart}: black, Streamlit's placeholders"


def _image(png: Path) -> np.ndarray:
    """Height × width × (red, green, blue), as signed numbers (they are subtracted)."""
    return np.asarray(Image.open(io.BytesIO(png.read_bytes())).convert("RGB"), dtype=int)


def _pixels(png: Path, colour: str) -> int:
    """How many pixels of `png` are `colour` (within 8 per channel: antialiasing)."""
    want = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(_image(png) - want) <= 8).all(axis=2).sum())


def _darkest(png: Path) -> int:
    """The brightest channel of the darkest pixel: text is #222 at its darkest."""
    return int(_image(png).max(axis=2).min())
