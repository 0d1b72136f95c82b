"""The dashboard as a person waits for it, in headless Chromium (Playwright, Debian's browser):

- per page, from navigation in a new tab (a new Streamlit session) of a browser that has
  opened the dashboard before until the page's headline is visible: Live's six metrics, the
  Reports' "In short" (the week's figures in sentences), elsewhere the first metric, chart
  or table (What-if, which draws nothing until asked, its title); Live's first visit too,
  with the browser's cache empty;
- Live's 5 s refresh: from the browser's request to rerun its fragments until the server's
  last run of them finished (Streamlit's messages on the session's websocket);
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

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from dashboard.screenshots import browser, serving

METRIC = '[data-testid="stMetricValue"]'
FIGURE = f'{METRIC}, .js-plotly-plot, [data-testid="stDataFrame"], [data-testid="stTable"]'
# Each page's path, what shows its headline figures, and how many of them: Live's six; the
# Reports' "In short" sentences, which say the week's figures; elsewhere the first figure.
PAGES = {
    "live": ("", METRIC, 6),
    "costs": ("costs", FIGURE, 1),
    "incidents": ("incidents", FIGURE, 1),
    "readiness": ("readiness", FIGURE, 1),
    "explorer": ("explorer", FIGURE, 1),
    "whatif": ("whatif", '[data-testid="stMain"] h1', 1),
    "reports": ("reports", '.st-key-report_headline [data-testid="stMarkdown"]', 1),
}
# Gaps between Live's periodic reruns: its fragments rerun together every few seconds, so a
# pause longer than this ends one refresh.
REFRESH_GAP_S = 1.0
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
    """Wait until `count` elements of `selector` show something: text, a Plotly chart's
    drawing or a table's canvas (Streamlit's dataframe paints on a canvas, its text later)."""
    tab.wait_for_function(
        """([selector, count]) => Array.from(document.querySelectorAll(selector))
            .filter((e) => e.offsetParent !== null && (e.textContent.trim() !== ''
                    || e.querySelector('.main-svg, canvas') !== null)).length >= count""",
        arg=[selector, count],
        timeout=within_s * 1000,
        polling=20,
    )


@contextlib.contextmanager
def _tab(viewer: Any) -> Iterator[Any]:
    """A new tab of `viewer` (a browser context): a new Streamlit session."""
    tab = viewer.new_page()
    try:
        yield tab
    finally:
        tab.close()


def navigation(viewer: Any, url: str, page: str, within_s: float = 60) -> float:
    """Seconds from `goto` until `page`'s figures are visible, in a new tab of `viewer`."""
    path, selector, count = PAGES[page]
    with _tab(viewer) as tab:
        started = time.perf_counter()
        tab.goto(f"{url}/{path}", wait_until="commit")
        try:
            _visible(tab, selector, count, within_s)
        except Exception as error:  # Playwright's TimeoutError: say which page, and what it shows
            shown = tab.locator('[data-testid="stMain"]').inner_text(timeout=5000)[:2000]
            raise RuntimeError(f"{page}: no {selector!r} within {within_s:.0f} s; the page "
                               f"shows:\n{shown}") from error  # fmt: skip
        return time.perf_counter() - started


def live_refreshes(viewer: Any, url: str, count: int, within_s: float = 90) -> list[float]:
    """Seconds of each of Live's next `count` periodic refreshes after its first paint: from
    the browser's first fragment rerun request until the server's last run finished, read
    from the session's websocket (Streamlit's own messages), so that a refresh in which the
    sidebar's and the page's fragments queue behind each other counts whole."""
    events: list[tuple[float, str]] = []

    def sent(payload: bytes | str) -> None:
        message = BackMsg.FromString(_bytes(payload))
        if message.WhichOneof("type") == "rerun_script" and message.rerun_script.fragment_id:
            events.append((time.perf_counter(), "start"))

    def received(payload: bytes | str) -> None:
        if ForwardMsg.FromString(_bytes(payload)).WhichOneof("type") == "script_finished":
            events.append((time.perf_counter(), "end"))

    with _tab(viewer) as tab:
        tab.on("websocket", lambda ws: (ws.on("framesent", sent), ws.on("framereceived", received)))
        tab.goto(url, wait_until="commit")
        _visible(tab, METRIC, 6, within_s)
        deadline = time.perf_counter() + within_s
        while len(refreshes := _refreshes(events)) < count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"Live refreshed {len(refreshes)} times in {within_s:.0f} s")
            tab.wait_for_timeout(250)
        return refreshes[:count]


def _refreshes(events: list[tuple[float, str]]) -> list[float]:
    """The durations of the complete refreshes in `events`, the last (maybe unfinished) left
    out: a refresh runs from its first fragment request to its last run's end."""
    bursts: list[list[tuple[float, str]]] = []
    for at, kind in events:
        if kind == "start" and (not bursts or at - bursts[-1][-1][0] > REFRESH_GAP_S):
            bursts.append([])
        if bursts:
            bursts[-1].append((at, kind))
    done = [b for b in bursts[:-1] if b[-1][1] == "end"]
    return [b[-1][0] - b[0][0] for b in done]


def _bytes(payload: bytes | str) -> bytes:
    return payload if isinstance(payload, bytes) else payload.encode()


def explorer_lookup(viewer: Any, url: str, request_id: str, within_s: float = 60) -> float:
    """Seconds from a request id entered on Explorer until its story is shown."""
    with _tab(viewer) as tab:
        tab.goto(f"{url}/explorer", wait_until="commit")
        field = tab.get_by_label("Request id")
        field.wait_for(timeout=within_s * 1000)
        _visible(tab, FIGURE, 1, within_s)
        field.fill(request_id)
        started = time.perf_counter()
        field.press("Enter")
        tab.wait_for_selector('[data-testid="stTable"]', timeout=within_s * 1000)
        return time.perf_counter() - started


def measure(url: str, repeat: int = 5, request_id: str | None = None) -> list[Timing]:
    """Every page's navigation `repeat` times, Live's refreshes and, given an id, Explorer's
    lookup, as a returning viewer sees them: one browser profile, whose cache holds the
    dashboard's scripts, each navigation a new tab (a new Streamlit session). A first visit
    (an empty cache: the browser loads and compiles Streamlit's scripts) is timed apart, on
    Live. The server's first run of each page (its imports) is not timed."""
    with browser() as chromium:
        first_visits = []
        for _ in range(repeat):
            newcomer = chromium.new_context(viewport=VIEWPORT)
            first_visits.append(navigation(newcomer, url, "live"))
            newcomer.close()
        viewer = chromium.new_context(viewport=VIEWPORT)
        for page in PAGES:
            navigation(viewer, url, page)
        timings = [
            Timing(page, [navigation(viewer, url, page) for _ in range(repeat)]) for page in PAGES
        ]
        timings.append(Timing("live refresh", live_refreshes(viewer, url, repeat)))
        if request_id is not None:
            lookups = [explorer_lookup(viewer, url, request_id) for _ in range(repeat)]
            timings.append(Timing("explorer lookup", lookups))
        timings.append(Timing("live 1st visit", first_visits))
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
