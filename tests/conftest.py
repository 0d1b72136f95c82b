"""The suite's order on the workers: the modules whose fixtures take a minute or more start
first, so that on a few cores they run beside the many short modules instead of after them
(with `--dist loadscope` a module stays on one worker, and the last one to start sets the
suite's end). Their tests keep their order; so does everything else."""

from __future__ import annotations

import pytest

LONG_FIRST = (
    "reports/test_report_invariants.py",  # the demo's fortnight: ~80 s to build
    "simulations/test_from_store.py",
    "store/test_retention_history.py",
    "reports/test_reports_browser.py",
    "simulations/test_drill_demo.py",
    "dashboard/test_browser.py",
    "alerts/test_incidents.py",
    "dashboard/test_readiness_page.py",
    "dashboard/test_other_pages.py",
)


def _rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    return next((i for i, name in enumerate(LONG_FIRST) if path.endswith(name)), len(LONG_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: within a module, and among the rest, the order is kept
