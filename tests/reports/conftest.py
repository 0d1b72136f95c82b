"""The data the report tests share: the fixture week (weeks.py, ~20 s) and the demo's
fortnight (fortnight.py, about a minute and a half of CPU), each built once per test run
(helpers.built_once), each worker reading its own copy.

Both are session-scoped although only this package uses them: a worker runs modules of
several packages in turn, and pytest tears a package's fixture down each time the worker
leaves the package, so a package-scoped one was set up again for every return."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.built_once import built_once
from helpers.fortnight import Fortnight, demo_fortnight
from helpers.weeks import FixtureWeek, fixture_week

from engine.core.paths import DataPaths


@pytest.fixture(scope="session")
def week(tmp_path_factory) -> FixtureWeek:
    folder, built = built_once(tmp_path_factory, "week", fixture_week)
    return dataclasses.replace(built, paths=DataPaths(folder / "data"))


@pytest.fixture(scope="session")
def fortnight(tmp_path_factory) -> Fortnight:
    folder, built = built_once(tmp_path_factory, "fortnight", demo_fortnight)
    return dataclasses.replace(built, paths=DataPaths(folder / "data"))
