"""Evals of fallback readiness: a case set run through every target of a route, each target in
isolation, scored per target (pass rate, latency, cost) and handed to the scheduler.

    cases = load_cases("cases.toml")
    run = await run_eval(config, "support", cases)
    write_run(DataPaths.default(), run)
"""

from engine.evals.cases import Case, CaseSet, load_cases, parse_cases
from engine.evals.runner import (
    EvalResult,
    EvalRun,
    TargetSummary,
    run_eval,
    write_run,
)

__all__ = [
    "Case",
    "CaseSet",
    "EvalResult",
    "EvalRun",
    "TargetSummary",
    "load_cases",
    "parse_cases",
    "run_eval",
    "write_run",
]
