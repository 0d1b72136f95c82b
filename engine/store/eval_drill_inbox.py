"""Fallback readiness into the store: eval runs and drill records taken in from
`data/control/`. Runs in the scheduler, the only writer.

    control/evals/<run>.json    written by `switchover eval` (engine.evals.runner.write_run)
    control/drills/<id>.json    written by the gateway when a drill starts and ends
                                (engine.state.drills), so a drill is known even if nobody ends it

Their tables are engine.store.eval_drill_tables'; a drill's report, once it ended, is
engine.store.drill_reports'.
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb

from engine.core.paths import DataPaths
from engine.state.drills import Drill

log = logging.getLogger("switchover.scheduler")


def take_in(con: duckdb.DuckDBPyConnection, paths: DataPaths) -> int:
    """Eval runs and drill records waiting in the control folder, into their tables; the number
    taken in. A file that cannot be read is set aside (`.bad`), never retried forever."""
    taken = 0
    for folder, take in ((paths.evals_inbox, _take_eval), (paths.drills_inbox, _take_drill)):
        for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                body = json.loads(file.read_text())
                con.execute("BEGIN TRANSACTION")
                try:
                    take(con, body)
                    con.execute("COMMIT")
                except Exception:
                    con.execute("ROLLBACK")
                    raise
            except (ValueError, KeyError, TypeError, duckdb.Error) as exc:
                log.error("cannot take in %s (%s); moved aside as .bad", file, exc)
                with contextlib.suppress(OSError):
                    file.rename(file.with_suffix(".bad"))
                continue
            file.unlink(missing_ok=True)
            taken += 1
    return taken


_EVAL_RUN = """
    INSERT INTO eval_runs VALUES ($run_id, $route, $cases_file, $started_at, $finished_at, $cases,
        $min_pass_rate)
    ON CONFLICT DO NOTHING
"""
_EVAL_RESULT = """
    INSERT INTO eval_results VALUES ($run_id, $route, $target, $case_name, $passed, $reason,
        $latency_ms, $cost_usd, $input_tokens, $output_tokens, $error)
    ON CONFLICT DO NOTHING
"""


def _take_eval(con: duckdb.DuckDBPyConnection, body: dict[str, Any]) -> None:
    run = {k: body[k] for k in ("run_id", "route", "cases_file", "cases", "min_pass_rate")}
    run["started_at"] = datetime.fromisoformat(body["started_at"])
    run["finished_at"] = datetime.fromisoformat(body["finished_at"])
    con.execute(_EVAL_RUN, run)
    for r in body["results"]:
        cost = r.get("cost_usd")
        con.execute(
            _EVAL_RESULT,
            {
                "run_id": run["run_id"],
                "route": run["route"],
                "target": r["target"],
                "case_name": r["case_name"],
                "passed": bool(r["passed"]),
                "reason": r.get("reason"),
                "latency_ms": r.get("latency_ms"),
                "cost_usd": None if cost is None else Decimal(cost),
                "input_tokens": int(r.get("input_tokens") or 0),
                "output_tokens": int(r.get("output_tokens") or 0),
                "error": r.get("error"),
            },
        )


_DRILL = """
    INSERT INTO drills (drill_id, route, target, started_at, ends_at, ended_at, requested_by,
        status, report, forced, preflight, ended_reason, aborted_by_request)
    VALUES ($drill_id, $route, $target, $started_at, $ends_at, $ended_at, $requested_by,
        'running', NULL, $forced, $preflight, $ended_reason, $aborted_by_request)
    ON CONFLICT (drill_id) DO UPDATE SET ended_at = coalesce(excluded.ended_at, drills.ended_at),
        forced = coalesce(drills.forced, excluded.forced),
        preflight = coalesce(drills.preflight, excluded.preflight),
        ended_reason = coalesce(excluded.ended_reason, drills.ended_reason),
        aborted_by_request = coalesce(excluded.aborted_by_request, drills.aborted_by_request)
"""


def _take_drill(con: duckdb.DuckDBPyConnection, body: dict[str, Any]) -> None:
    drill = Drill.from_json(body)
    con.execute(
        _DRILL,
        {
            **drill.as_json(),
            "started_at": drill.started_at,
            "ends_at": drill.ends_at,
            "ended_at": drill.ended_at,
        },
    )
