"""Readiness in the scheduler: eval runs and drill records taken in from the control folder
(once, a broken file set aside), published, and a backup below its route's minimum alerted; a
drill's pre-flight and self-abort kept from its records into its report."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from engine.core.paths import DataPaths
from engine.evals.runner import EvalResult, EvalRun, write_run
from engine.published.read import PublishedData
from engine.scheduler.pipeline import Pipeline
from engine.state.drills import Drill, write_drill

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PRIMARY, BACKUP, SPARE = "claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"


def run_of(passes: dict[str, int], cases: int = 4, minimum: float = 0.9) -> EvalRun:
    results = [
        EvalResult(target, f"case {i}", i < passed, None if i < passed else "regex 'x' not found",
                   100.0 + i, Decimal("0.001"), 10, 5)
        for target, passed in passes.items()
        for i in range(cases)
    ]  # fmt: skip
    return EvalRun("run1", "support", "cases.toml", NOW - timedelta(minutes=2),
                   NOW - timedelta(minutes=1), cases, minimum, results)  # fmt: skip


def cycle(paths: DataPaths) -> Pipeline:
    pipeline = Pipeline(paths, now=lambda: NOW)
    pipeline.cycle()
    return pipeline


def test_an_eval_run_is_taken_in_once_and_published(tmp_path):
    paths = DataPaths(tmp_path)
    write_run(paths, run_of({PRIMARY: 4, BACKUP: 4}))
    pipeline = cycle(paths)
    try:
        assert pipeline.con.execute("SELECT count(*) FROM eval_results").fetchone() == (8,)
        assert list(paths.evals_inbox.glob("*.json")) == []  # taken in: gone from the inbox
        write_run(paths, run_of({PRIMARY: 4, BACKUP: 4}))  # the same run again: no duplicate
        pipeline.cycle()
        assert pipeline.con.execute("SELECT count(*) FROM eval_runs").fetchone() == (1,)
    finally:
        pipeline.close()
    published = PublishedData(paths.published)
    assert len(published.query("eval_results")) == 8


def test_a_backup_below_the_routes_minimum_is_alerted_and_the_others_are_not(tmp_path):
    paths = DataPaths(tmp_path)
    write_run(paths, run_of({PRIMARY: 4, BACKUP: 3, SPARE: 4}))  # 75 % < 90 %
    pipeline = cycle(paths)
    try:
        alerts = pipeline.con.execute("SELECT rule, subject, value, summary FROM alerts").fetchall()
    finally:
        pipeline.close()
    assert [(r, s, v) for r, s, v, _ in alerts] == [
        ("eval-below-minimum", f"support: {BACKUP}", 75.0)
    ]
    assert "passed 3 of 4 eval cases (75 %, minimum 90 %)" in alerts[0][3]


def test_an_unreadable_inbox_file_is_set_aside_not_retried_forever(tmp_path):
    paths = DataPaths(tmp_path)
    paths.evals_inbox.mkdir(parents=True)
    (paths.evals_inbox / "broken.json").write_text('{"run_id": ')
    pipeline = cycle(paths)
    pipeline.close()
    assert (paths.evals_inbox / "broken.bad").exists()
    assert not (paths.evals_inbox / "broken.json").exists()


def drill_row(pipeline: Pipeline, drill_id: str) -> dict:
    cursor = pipeline.con.execute(
        "SELECT forced, preflight, ended_reason, aborted_by_request, status, report FROM drills "
        "WHERE drill_id = $id",
        {"id": drill_id},
    )
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchone(), strict=True))


def test_a_drill_record_from_before_the_pre_flight_is_taken_in_and_reported(tmp_path):
    paths = DataPaths(tmp_path)
    paths.drills_inbox.mkdir(parents=True)
    started = NOW - timedelta(minutes=10)
    ends = started + timedelta(minutes=5)
    old = {"drill_id": "old1", "route": "support", "target": PRIMARY, "requested_by": "ops",
           "started_at": started.isoformat(), "ends_at": ends.isoformat(),
           "ended_at": None}  # fmt: skip
    (paths.drills_inbox / "old1.json").write_text(json.dumps(old))
    pipeline = cycle(paths)
    try:
        row = drill_row(pipeline, "old1")
    finally:
        pipeline.close()
    assert (row["forced"], row["preflight"], row["ended_reason"]) == (False, None, None)
    report = json.loads(row["report"])
    assert (row["status"], report["verdict"]) == ("reported", "no traffic")
    assert (report["aborted"], report["why"]) == (False, [])


def test_the_end_of_an_aborted_drill_keeps_what_its_start_recorded(tmp_path):
    """The start and the end come as two records of one drill; the end, written by whichever
    process aborted it, neither loses the pre-flight nor is lost itself."""
    paths = DataPaths(tmp_path)
    found = f"backup {BACKUP}: breaker open (account)"
    begun = Drill("d1", "support", PRIMARY, NOW - timedelta(minutes=10),
                  NOW + timedelta(minutes=20), "ops", forced=True, preflight=found)  # fmt: skip
    write_drill(paths, begun)
    pipeline = cycle(paths)
    try:
        assert drill_row(pipeline, "d1")["status"] == "running"
        reason = "aborted: request r1 failed with every provider unavailable"
        write_drill(paths, replace(begun, ended_at=NOW - timedelta(minutes=9), forced=False,
                                   preflight=None, ended_reason=reason,
                                   aborted_by_request="r1"))  # fmt: skip
        pipeline.cycle()
        row = drill_row(pipeline, "d1")
    finally:
        pipeline.close()
    assert (row["forced"], row["preflight"]) == (True, found)
    assert (row["ended_reason"], row["aborted_by_request"]) == (reason, "r1")
    report = json.loads(row["report"])
    assert (report["verdict"], report["aborted"], report["forced"]) == ("failed", True, True)
    assert report["why"] == [
        "aborted after request r1 failed: every provider unavailable",
        f"started with --force although no other target was healthy: {found}",
    ]
