"""The demo's seeded history: real chain traffic, dated in the past, with its incidents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from simulations.demo.history import HISTORY_MARKER, PAST_INCIDENTS, seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config

END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_three_days_of_history_land_in_the_spool_with_their_incident(tmp_path):
    paths = DataPaths(tmp_path / "data")
    sent = seed_history(paths, demo_config(8700), days=3, end=END,
                        environ={DEMO_KEY_ENV: "k"}, say=lambda _: None)  # fmt: skip
    assert (paths.root / HISTORY_MARKER).exists()
    assert not (paths.root / ".history").exists(), "the staging folder is gone"
    pipeline = Pipeline(paths, now=lambda: END)
    try:
        report = pipeline.cycle()
        first, last, requests = pipeline.con.execute(
            "SELECT min(started_at), max(started_at), count(DISTINCT request_id) FROM attempts"
        ).fetchone()
        incidents = pipeline.con.execute(
            "SELECT subject, started_at, ended_at FROM incidents ORDER BY started_at"
        ).fetchall()
        events = pipeline.con.execute("SELECT count(*) FROM breaker_events").fetchone()[0]
    finally:
        pipeline.close()
    assert report.rows >= sent and requests == sent
    assert END - timedelta(days=3) <= first < END - timedelta(days=3) + timedelta(minutes=5)
    assert END - timedelta(minutes=5) < last <= END
    # Three days back from noon: day 2 of the plan (the 14:30 outage of the support primary).
    outage = next(i for i in PAST_INCIDENTS if i.day == 2)
    begins = (END - timedelta(days=3)).replace(hour=0) + timedelta(days=2, hours=outage.hour)
    assert any(
        subject == f"claude/{outage.model}" and abs(start - begins) <= timedelta(minutes=2)
        and ended is not None and ended - start >= timedelta(minutes=outage.minutes - 2)
        for subject, start, ended in incidents
    ), incidents  # fmt: skip
    assert events > 0, "the breakers' transitions are part of the history"
