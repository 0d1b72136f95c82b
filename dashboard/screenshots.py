"""Screenshots of a running dashboard in headless Chromium (Debian's), one per page: the
browser test's eyes, and how the README's pictures are made:

    python -m dashboard.screenshots http://127.0.0.1:8501 docs/screenshots

Needs Playwright (a dev dependency) and Chromium at /usr/bin/chromium; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Path of each page, and how many charts it draws once it has data.
PAGES = {"live": ("", 4), "costs": ("costs", 2), "incidents": ("incidents", 2),
         "readiness": ("readiness", 2), "explorer": ("explorer", 0),
         "whatif": ("whatif", 0)}  # fmt: skip  # What-if draws its charts after a run
# Without these Chromium keeps reaching for the network, which this machine closes.
FLAGS = [
    *("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]
# Plotly.js's own count of the points it drew in each trace (a trace's arrays may arrive
# binary-encoded, so their .length says nothing).
_CHARTS_WITH_DATA = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    (plot) => (plot._fullData || []).some((trace) => (trace._length || 0) > 0))
"""


@dataclass(frozen=True, slots=True)
class Shot:
    page: str
    path: Path
    charts: list[bool]  # per chart: whether it drew any point
    exceptions: list[str]  # the text of any Streamlit exception box
    navigation: list[str]  # the sidebar's page links, as a person reads them


@contextlib.contextmanager
def serving(root: Path, env: dict[str, str] | None = None, timeout_s: float = 60) -> Iterator[str]:
    """`switchover dashboard` on the data folder `root`, as a process of its own on a free
    port; its URL once it answers its health check, until the block ends."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "dashboard", "--port", str(port),
         "--data-dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"the dashboard did not start: {process.communicate()[1][-2000:]}")
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def capture(
    chromium: object, url: str, page: str, out_dir: Path, wait_s: float = 20, height: int = 1000
) -> Shot:
    """Open `page` of the dashboard at `url`, wait until its charts have drawn their points
    (or `wait_s` passed), and save a full-page screenshot under `out_dir`. Streamlit scrolls
    its main area inside the window, so what lies below `height` pixels is not in the picture:
    a taller window shows the whole page."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    path, charts_expected = PAGES[page]
    tab = chromium.new_page(viewport={"width": 1400, "height": height})  # type: ignore[attr-defined]
    try:
        tab.goto(f"{url}/{path}", wait_until="networkidle")
        tab.wait_for_selector('[data-testid="stMain"] h1', timeout=wait_s * 1000)
        with contextlib.suppress(PlaywrightTimeout):
            tab.wait_for_function(
                f"() => {{ const c = ({_CHARTS_WITH_DATA})();"
                f" return c.length >= {charts_expected} && c.every(Boolean); }}",
                timeout=wait_s * 1000,
            )
        tab.wait_for_timeout(500)
        charts = tab.evaluate(_CHARTS_WITH_DATA)
        exceptions = tab.locator('[data-testid="stException"]').all_inner_texts()
        links = tab.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
        navigation = [link.strip().splitlines()[-1].strip() for link in links]  # no icon
        out_dir.mkdir(parents=True, exist_ok=True)
        shot = out_dir / f"{page}.png"
        tab.screenshot(path=str(shot), full_page=True)
    finally:
        tab.close()
    return Shot(page, shot, charts, exceptions, navigation)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dashboard.screenshots", description=__doc__)
    parser.add_argument("url", help="the running dashboard, e.g. http://127.0.0.1:8501")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--height", type=int, default=1000, help="the window's height, in px")
    parser.add_argument("--page", choices=list(PAGES), action="append", help="only these pages")
    args = parser.parse_args()
    with browser() as chromium:
        for page in args.page or PAGES:
            shot = capture(chromium, args.url, page, args.out_dir, height=args.height)
            print(f"{shot.path}: {len(shot.charts)} charts, {len(shot.exceptions)} exceptions")


if __name__ == "__main__":
    main()
