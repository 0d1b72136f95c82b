"""Readiness in the scheduler: eval runs and drill records taken in from the control folder
(once, a broken file set aside), published, and a backup below its route's minimum alerted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from engine.evals.runner import EvalResult, EvalRun, write_run
from engine.paths import DataPaths
from engine.scheduler import Pipeline
from engine.store.read import PublishedData

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
