"""What the whole suite shares.

- The backends' servers (a real redis-server, a real PostgreSQL), as fixtures any test may ask
  for (tests/helpers/redis_server.py, tests/helpers/postgres_server.py).
- Markers that say what a test needs, set from what it uses: `redis` and `postgres` (it asks
  for that server), `browser` (it drives Chromium), `system` (tests/system/: real processes end
  to end). `pytest -m "not postgres"` leaves that backend out.
- The order on the workers: the modules whose fixtures take a minute or more start first, so
  that on a few cores they run beside the many short modules instead of after them (with
  `--dist loadscope` a module stays on one worker, and the last one to start sets the suite's
  end). Their tests keep their order; so does everything else.
- `__main__` put back after every test: Streamlit's script runner (AppTest) makes the page it
  ran the interpreter's `__main__` and leaves it there, and a process started with "spawn"
  afterwards on the same worker would run that page first and die before its target.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

pytest_plugins = ["helpers.redis_server", "helpers.postgres_server"]

# A test that asks for one of these fixtures, or whose module starts that server itself, needs
# the backend.
BACKENDS = {
    "redis": ({"redis_server", "redis_url"}, "helpers.redis_server"),
    "postgres": ({"postgres_server", "postgres_url"}, "helpers.postgres_server"),
}

LONG_FIRST = (
    "system/test_demo_plan_processes.py",  # two demo starts in real time: ~2 min, mostly waiting
    "reports/test_report_invariants.py",  # the demo's fortnight: ~80 s to build
    "alerts/test_plan_soak.py",  # the plan's cycles on a virtual clock: ~1 min
    "simulations/test_from_store.py",
    "store/test_retention_history.py",
    "reports/test_reports_browser.py",
    "simulations/test_drill_demo.py",
    "dashboard/test_browser.py",
    "alerts/test_incidents.py",
    "dashboard/test_readiness_page.py",
    "dashboard/test_other_pages.py",
)


@pytest.fixture(autouse=True)
def _main_module_kept() -> Iterator[None]:
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core. About a third of the suite's time is tests waiting (on
    processes they started, on a browser, on real seconds), and a second worker on the core
    runs meanwhile; the expensive datasets are built once per run however many workers ask
    (helpers.built_once). On this 2-core machine: 2 workers 11 min 50 s, 4 workers 10 min 9 s
    before the datasets were shared (docs/benchmarks.md)."""
    return 2 * (os.cpu_count() or 1)


def _rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    return next((i for i, name in enumerate(LONG_FIRST) if path.endswith(name)), len(LONG_FIRST))


def _mark(item: pytest.Item) -> None:
    used = set(getattr(item, "fixturenames", ()))
    module = getattr(item, "module", None)
    imported = {getattr(v, "__module__", None) for v in vars(module).values()} if module else set()
    for marker, (fixtures, helper) in BACKENDS.items():
        if used & fixtures or helper in imported:
            item.add_marker(marker)
    path = item.path.as_posix()
    if "/tests/system/" in path:
        item.add_marker("system")
    if path.endswith("_browser.py"):
        item.add_marker("browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _mark(item)
    items.sort(key=_rank)  # stable: within a module, and among the rest, the order is kept
