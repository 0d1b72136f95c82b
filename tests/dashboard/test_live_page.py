"""The Live page on the fixture dataset, through Streamlit's AppTest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from .pages import metric as _metric
from .pages import open_page


def _app():
    return open_page()


def _requests(attempts: pd.DataFrame, since: datetime) -> pd.DataFrame:
    """One row a request (its first attempt's time, whether a backup served it)."""
    first = attempts.groupby("request_id").agg(
        started=("started_at", "min"),
        by_fallback=("fallback_depth", lambda d: False),
    )
    served = attempts[attempts["served"] & (attempts["outcome"] == "success")]
    first["by_fallback"] = served.set_index("request_id")["fallback_depth"].reindex(first.index) > 0
    return first[first["started"] >= since]


def test_live_shows_the_windows_figures_computed_from_the_attempts(app_env):
    _, attempts, _ = app_env
    at = _app()
    since = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)
    requests = _requests(attempts, pd.Timestamp(since))
    assert _metric(at, "Requests/min") == f"{len(requests) / 60:,.1f}"
    assert _metric(at, "Fallback rate") == f"{requests['by_fallback'].mean():.1%}"
    assert _metric(at, "Availability") == "100.0%"


def test_choosing_another_window_changes_the_figures(app_env):
    _, attempts, _ = app_env
    at = _app()
    at.sidebar.selectbox(key="window").set_value("15 min").run()
    assert not at.exception
    since = (datetime.now(UTC) - timedelta(minutes=15)).replace(second=0, microsecond=0)
    requests = _requests(attempts, pd.Timestamp(since))
    assert _metric(at, "Requests/min") == f"{len(requests) / 15:,.1f}"
    assert _metric(at, "Fallback rate") == f"{requests['by_fallback'].mean():.1%}"


def test_the_outage_shows_as_an_incident_with_every_chart_drawn(app_env):
    at = _app()
    assert len(at.get("plotly_chart")) == 4
    text = " ".join(m.value for m in at.markdown)
    assert "claude" in text and "support" in text
