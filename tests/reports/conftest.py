"""The data the report tests share: the fixture week (weeks.py, ~20 s) and the demo's
fortnight (fortnight.py, about a minute and a half of CPU), each built once per worker.

The week is session-scoped although only this package uses it: a worker runs modules of
several packages in turn, and pytest tears a package's fixture down each time the worker
leaves the package, so a package-scoped week was built again for every return."""

from __future__ import annotations

import pytest
from helpers.fortnight import Fortnight, demo_fortnight
from helpers.weeks import FixtureWeek, fixture_week


@pytest.fixture(scope="session")
def week(tmp_path_factory) -> FixtureWeek:
    return fixture_week(tmp_path_factory.mktemp("week"))


@pytest.fixture(scope="package")
def fortnight(tmp_path_factory) -> Fortnight:
    return demo_fortnight(tmp_path_factory.mktemp("fortnight"))
