"""The dashboard in a real browser: `switchover dashboard` as a process on the fixture data,
Debian's headless Chromium driven by Playwright through every page, a screenshot of each.
Fails on a Streamlit exception box or a chart drawn without data. Outside CI a machine
without Chromium skips it, saying why; `.ci/run` installs Chromium and sets CI=1, so there a
missing browser fails."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers.recorded_incident import recorded

from dashboard.screenshots import CHROMIUM, PAGES, browser, capture, serving

# Where to keep the screenshots; a temporary folder otherwise.
SHOTS = os.environ.get("SWITCHOVER_SCREENSHOTS")

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing in CI: .ci/run must install Debian's chromium")
    pytest.skip("no Chromium on this machine (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def dashboard(dataset):
    paths, _, _ = dataset
    yield from _serve(paths.root)


@pytest.fixture(scope="module")
def recorded_dashboard(tmp_path_factory):
    """A dashboard on recorded traffic with its outage (recorded.py), the routes in
    $SWITCHOVER_CONFIG: What-if's scenarios from the store have what they read."""
    folder = tmp_path_factory.mktemp("recorded")
    # In a thread of its own: Playwright's loop may already run in this one.
    with ThreadPoolExecutor(1) as worker:
        paths, routes = worker.submit(recorded, folder).result()
    yield from _serve(paths.root, {"SWITCHOVER_CONFIG": str(routes)})


def _serve(root: Path, env: dict[str, str] | None = None):
    """`switchover dashboard` on the data folder `root`, until the fixture's end."""
    with serving(root, env) as url:
        yield url


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


def _results_of_a_run(chromium, url: str, path: str, start, out: Path, name: str):
    """Open `path`, let `start` lead to What-if's scenario, press Run and wait for the results
    of the job it starts (in its own process); a full-page screenshot as `name`."""
    tab = chromium.new_page(viewport={"width": 1400, "height": 3000})
    try:
        tab.goto(f"{url}/{path}", wait_until="networkidle")
        tab.wait_for_selector('[data-testid="stMain"] h1', timeout=30_000)
        start(tab)
        tab.get_by_role("button", name="Run", exact=True).click()
        tab.get_by_text("Results:").wait_for(timeout=180_000)
        tab.wait_for_timeout(1_000)  # the charts' first draw
        exceptions = tab.locator('[data-testid="stException"]').all_inner_texts()
        out.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(out / f"{name}.png"), full_page=True)
        return tab.url, tab.locator('[data-testid="stAlert"]').all_inner_texts(), exceptions
    finally:
        tab.close()


def test_whatif_runs_a_scenario_from_our_traffic_in_the_browser(
    recorded_dashboard, chromium, tmp_path
):
    def from_our_traffic(tab) -> None:
        tab.get_by_text("our traffic", exact=True).click()
        tab.get_by_text("Recorded traffic").first.wait_for(timeout=30_000)

    address, alerts, exceptions = _results_of_a_run(
        chromium, recorded_dashboard, "whatif", from_our_traffic,
        Path(SHOTS) if SHOTS else tmp_path, "whatif-from-traffic",
    )  # fmt: skip
    assert exceptions == []
    assert "job=" in address, "a reload finds the run again"
    assert any("gpt/gpt-4.1-mini answers every request" in a for a in alerts), alerts


def test_an_incident_is_replayed_with_another_backup_in_the_browser(
    recorded_dashboard, chromium, tmp_path
):
    def replay(tab) -> None:
        tab.get_by_role("button", name="Replay with another backup").click()
        tab.wait_for_url("**/whatif?*incident=*", timeout=30_000)
        tab.get_by_text("Replay of claude/").first.wait_for(timeout=30_000)

    address, alerts, exceptions = _results_of_a_run(
        chromium, recorded_dashboard, "incidents", replay,
        Path(SHOTS) if SHOTS else tmp_path, "whatif-replay",
    )  # fmt: skip
    assert exceptions == []
    assert "incident=" in address and "job=" in address
    assert any("gpt/gpt-4.1-mini answers every request" in a for a in alerts), alerts
