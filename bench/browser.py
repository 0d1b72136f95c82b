"""The dashboard as a person waits for it, in headless Chromium (Playwright, Debian's browser):

- per page, from navigation in a new browser context (a new Streamlit session) until its
  first figures are visible: Live's six headline metrics, elsewhere the first metric, chart
  or table (What-if, which draws nothing until asked, its title);
- Live's 5 s refresh: from each rerun's start (Streamlit's running indicator appears) until
  its end (the indicator gone), as a page observer in the browser records them;
- Explorer's lookup by id: from the id entered until the request's story is shown.

    python -m bench.browser URL [--repeat 5] [--request-id ID]   # a dashboard serving
    python -m bench.browser --data-dir DIR [--request-id ID]     # serves DIR itself

`bench.scheduler` calls `measure` on the store it builds (20 M attempts a day).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.screenshots import browser, serving

METRIC = '[data-testid="stMetricValue"]'
FIGURE = f'{METRIC}, .js-plotly-plot, [data-testid="stDataFrame"], [data-testid="stTable"]'
# Each page's path, what shows its figures, and how many of them.
PAGES = {
    "live": ("", METRIC, 6),
    "costs": ("costs", FIGURE, 1),
    "incidents": ("incidents", FIGURE, 1),
    "readiness": ("readiness", FIGURE, 1),
    "explorer": ("explorer", FIGURE, 1),
    "whatif": ("whatif", '[data-testid="stMain"] h1', 1),
    "reports": ("reports", FIGURE, 1),
}
RUNNING = '[data-testid="stStatusWidget"]'
# Records, in the page, when the running indicator comes and goes (ms, performance.now()).
RERUNS = """
window.__reruns = [];
new MutationObserver(() => {
  const running = document.querySelector('[data-testid="stStatusWidget"]') !== null;
  const last = window.__reruns[window.__reruns.length - 1];
  if (running && (!last || last.end !== null))
    window.__reruns.push({start: performance.now(), end: null});
  if (!running && last && last.end === null) last.end = performance.now();
}).observe(document, {childList: true, subtree: true});
"""
VIEWPORT = {"width": 1400, "height": 1000}


@dataclass(frozen=True, slots=True)
class Timing:
    what: str
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def _visible(tab: Any, selector: str, count: int, within_s: float) -> None:
    tab.wait_for_function(
        """([selector, count]) => Array.from(document.querySelectorAll(selector))
            .filter((e) => e.offsetParent !== null && (e.textContent.trim() !== ''
                    || e.classList.contains('js-plotly-plot'))).length >= count""",
        arg=[selector, count],
        timeout=within_s * 1000,
        polling=20,
    )


@contextlib.contextmanager
def _tab(chromium: Any, init_script: str | None = None) -> Iterator[Any]:
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        if init_script:
            context.add_init_script(init_script)
        yield context.new_page()
    finally:
        context.close()


def navigation(chromium: Any, url: str, page: str, within_s: float = 60) -> float:
    """Seconds from `goto` until `page`'s figures are visible, in a fresh session."""
    path, selector, count = PAGES[page]
    with _tab(chromium) as tab:
        started = time.perf_counter()
        tab.goto(f"{url}/{path}", wait_until="commit")
        _visible(tab, selector, count, within_s)
        return time.perf_counter() - started


def live_refreshes(chromium: Any, url: str, count: int, within_s: float = 90) -> list[float]:
    """Seconds of each of Live's next `count` periodic reruns after its first paint."""
    with _tab(chromium, RERUNS) as tab:
        tab.goto(url, wait_until="commit")
        _visible(tab, METRIC, 6, within_s)
        tab.wait_for_function(
            f"""() => window.__reruns.filter((r) => r.end !== null).length >= {count + 1}""",
            timeout=within_s * 1000,
            polling=100,
        )
        reruns = tab.evaluate("window.__reruns")
        done = [r for r in reruns if r["end"] is not None][1 : count + 1]  # the first: the paint
        return [(r["end"] - r["start"]) / 1000 for r in done]


def explorer_lookup(chromium: Any, url: str, request_id: str, within_s: float = 60) -> float:
    """Seconds from a request id entered on Explorer until its story is shown."""
    with _tab(chromium) as tab:
        tab.goto(f"{url}/explorer", wait_until="commit")
        field = tab.get_by_label("Request id")
        field.wait_for(timeout=within_s * 1000)
        _visible(tab, FIGURE, 1, within_s)
        tab.wait_for_selector(RUNNING, state="detached", timeout=within_s * 1000)
        field.fill(request_id)
        started = time.perf_counter()
        field.press("Enter")
        tab.wait_for_selector('[data-testid="stTable"]', timeout=within_s * 1000)
        return time.perf_counter() - started


def measure(url: str, repeat: int = 5, request_id: str | None = None) -> list[Timing]:
    """Every page's navigation `repeat` times, Live's refreshes and, given an id, Explorer's
    lookup. The server's first run of each page (its imports) is not timed."""
    with browser() as chromium:
        for page in PAGES:
            navigation(chromium, url, page)
        timings = [
            Timing(page, [navigation(chromium, url, page) for _ in range(repeat)]) for page in PAGES
        ]
        timings.append(Timing("live refresh", live_refreshes(chromium, url, repeat)))
        if request_id is not None:
            lookups = [explorer_lookup(chromium, url, request_id) for _ in range(repeat)]
            timings.append(Timing("explorer lookup", lookups))
    return timings


def describe(timings: list[Timing]) -> str:
    return "\n".join(
        f"{t.what:16} median {t.median:5.2f} s  worst {t.worst:5.2f} s  "
        f"({', '.join(f'{s:.2f}' for s in t.seconds)})"
        for t in timings
    )


@contextlib.contextmanager
def _dashboard(args: argparse.Namespace) -> Iterator[str]:
    if args.url:
        yield args.url.rstrip("/")
        return
    with serving(Path(args.data_dir)) as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__)
    parser.add_argument("url", nargs="?")
    parser.add_argument("--data-dir")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--request-id")
    args = parser.parse_args(argv)
    if not (args.url or args.data_dir):
        parser.error("give the dashboard's URL or --data-dir")
    with _dashboard(args) as url:
        print(describe(measure(url, args.repeat, args.request_id)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
