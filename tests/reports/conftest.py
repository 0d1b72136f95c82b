"""The data the report tests share: the fixture week (weeks.py, ~20 s) and the demo's
fortnight (fortnight.py, about a minute and a half of CPU), each built once per worker."""

from __future__ import annotations

import pytest
from helpers.fortnight import Fortnight, demo_fortnight
from helpers.weeks import FixtureWeek, fixture_week


@pytest.fixture(scope="package")
def week(tmp_path_factory) -> FixtureWeek:
    return fixture_week(tmp_path_factory.mktemp("week"))


@pytest.fixture(scope="package")
def fortnight(tmp_path_factory) -> Fortnight:
    return demo_fortnight(tmp_path_factory.mktemp("fortnight"))
