"""The dashboard in a real browser: `switchover dashboard` as a process on the fixture data,
Debian's headless Chromium driven by Playwright through every page, a screenshot of each.
Fails on a Streamlit exception box or a chart drawn without data. Outside CI a machine
without Chromium skips it, saying why; `.ci/run` installs Chromium and sets CI=1, so there a
missing browser fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PAGES = {"live": "", "costs": "costs", "incidents": "incidents", "explorer": "explorer"}
CHARTS = {"live": 4, "costs": 2, "incidents": 2, "explorer": 0}  # on the fixture data
# Where to keep the screenshots (the README's come from here); a temporary folder otherwise.
SHOTS = (
    Path(os.environ["SWITCHOVER_SCREENSHOTS"]) if os.environ.get("SWITCHOVER_SCREENSHOTS") else None
)
# As the machine notes say: without these Chromium keeps trying the network, which is closed.
FLAGS = [
    *("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing in CI: .ci/run must install Debian's chromium")
    pytest.skip("no Chromium on this machine (apt-get install chromium)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard(dataset):
    paths, _, _ = dataset
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "dashboard", "--port", str(port),
         "--data-dir", str(paths.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail(f"the dashboard did not start: {process.communicate()[1][-2000:]}")
    yield url
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


# Plotly.js's own count of the points it drew in each trace (the traces' arrays may arrive
# binary-encoded, so their .length says nothing).
_CHARTS_WITH_DATA = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    (plot) => (plot._fullData || []).some((trace) => (trace._length || 0) > 0))
"""


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_without_an_exception_and_with_charts_that_have_data(
    dashboard, browser, page, tmp_path
):
    tab = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        tab.goto(f"{dashboard}/{PAGES[page]}", wait_until="networkidle")
        tab.wait_for_selector('[data-testid="stMain"] h1', timeout=30_000)
        # Charts are drawn after the page's first paint (and redrawn by the 5 s refresh):
        # wait until each has its points, then look.
        with contextlib.suppress(PlaywrightTimeout):
            tab.wait_for_function(
                f"() => {{ const c = ({_CHARTS_WITH_DATA})();"
                f" return c.length >= {CHARTS[page]} && c.every(Boolean); }}",
                timeout=20_000,
            )
        tab.wait_for_timeout(500)
        charts = tab.evaluate(_CHARTS_WITH_DATA)
        exceptions = tab.locator('[data-testid="stException"]').all_inner_texts()
        shot = (SHOTS or tmp_path) / f"{page}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(shot), full_page=True)
    finally:
        tab.close()
    assert exceptions == []
    assert len(charts) >= CHARTS[page], f"{page}: {len(charts)} charts drawn"
    assert all(charts), f"{page}: a chart has no data ({charts})"
    assert shot.stat().st_size > 10_000
