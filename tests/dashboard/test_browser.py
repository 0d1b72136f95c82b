"""The dashboard in a real browser: `switchover dashboard` as a process on the fixture data,
Debian's headless Chromium driven by Playwright through every page, a screenshot of each.
Fails on a Streamlit exception box or a chart drawn without data. Outside CI a machine
without Chromium skips it, saying why; `.ci/run` installs Chromium and sets CI=1, so there a
missing browser fails."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dashboard.screenshots import CHROMIUM, PAGES, browser, capture

# Where to keep the screenshots; a temporary folder otherwise.
SHOTS = os.environ.get("SWITCHOVER_SCREENSHOTS")

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
def chromium():
    with browser() as running:
        yield running


def test_a_page_opened_first_by_its_link_has_every_page_named_in_the_navigation(
    dashboard, chromium, tmp_path
):
    """The first visit to a fresh dashboard is a bookmark of Incidents: Streamlit must run
    app.py (the sidebar, the named pages), never a file of the page folder on its own, as it
    does for a folder called `pages/`. Runs first: the module's dashboard is fresh."""
    shot = capture(chromium, dashboard, "incidents", tmp_path)
    assert shot.exceptions == []
    assert shot.navigation == ["Live", "Costs", "Incidents & alerts", "Readiness", "Explorer",
                               "What-if", "Reports"]  # fmt: skip


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_without_an_exception_and_with_charts_that_have_data(
    dashboard, chromium, page, tmp_path
):
    shot = capture(chromium, dashboard, page, Path(SHOTS) if SHOTS else tmp_path)
    assert shot.exceptions == []
    expected = PAGES[page][1]
    assert len(shot.charts) >= expected, f"{page}: {len(shot.charts)} charts drawn"
    assert all(shot.charts), f"{page}: a chart has no data ({shot.charts})"
    assert shot.path.stat().st_size > 10_000
