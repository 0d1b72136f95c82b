"""`switchover eval CASES.toml [--route R]`: is every target of a route good enough to serve?

Runs the case file through each target of the route in isolation (engine.evals), prints a table
per target and the failed cases, and hands the run to the scheduler (`data/control/evals/`).
Exit code 0 when every target meets the minimum pass rate, 1 when one does not (CI gates on
it), 2 for a bad config or case file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError

FAILURES_SHOWN = 10  # per target; the rest are counted, and all are in the written run


def eval_command(
    cases: Annotated[
        Path,
        typer.Argument(
            help="The case file (TOML): [[cases]] with checks.", metavar="CASES", dir_okay=False
        ),
    ],
    route: Annotated[
        str | None,
        typer.Option("--route", help="The route to evaluate (default: the file's `route`)."),
    ] = None,
    config: ConfigOption = Path("switchover.toml"),
    data_dir: DataDirOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Calls in flight at most.")
    ] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run as JSON.")] = False,
) -> None:
    """Run CASES through every target of a route, each on its own (no fallback), and report
    pass rate, latency and cost per target. Exit 1 when a target is below the minimum."""
    from engine.config import load_config
    from engine.core.paths import DataPaths
    from engine.evals import load_cases, run_eval, write_run

    try:
        cfg = load_config(config)
        case_set = load_cases(cases)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    name = route or case_set.route
    if name is None:
        raise _fail(f'{cases}: name the route to evaluate: --route R, or route = "R" in the file')
    if name not in cfg.routes:
        raise _fail(f"unknown route {name!r} (routes: {', '.join(sorted(cfg.routes))})")

    def progress(done: int, total: int) -> None:
        typer.echo(f"\r{done}/{total} calls", nl=False, err=True)

    try:
        run = asyncio.run(run_eval(cfg, name, case_set, concurrency=concurrency, progress=progress))
    except ConfigError as exc:  # a provider key missing from the environment
        raise _fail(str(exc)) from None
    finally:
        typer.echo(err=True)
    written = write_run(DataPaths(data_dir) if data_dir else DataPaths.default(), run)
    if as_json:
        body = run.to_dict()
        body["targets"] = [_summary_json(s) for s in run.summaries()]
        body["written_to"] = str(written)
        typer.echo(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        _show(run)
        typer.echo(f"\nRun {run.run_id} written to {written} for the scheduler.")
    if not run.all_meet_minimum:
        raise typer.Exit(1)


def _show(run: Any) -> None:
    from engine.core.formats import format_latency
    from engine.core.money import column_digits, format_usd

    minimum = f"{run.min_pass_rate * 100:g} %"
    typer.echo(f"Route {run.route}: {run.cases} cases per target, minimum pass rate {minimum}\n")
    header = f"{'target':<40} {'passed':>8} {'pass rate':>9} {'p50':>9} {'p95':>9} {'cost':>10}"
    typer.echo(header)
    digits = column_digits(s.cost_usd for s in run.summaries() if s.cost_usd is not None)
    for s in run.summaries():
        cost = "unpriced" if s.cost_usd is None else format_usd(s.cost_usd, digits)
        line = (
            f"{s.target:<40} {f'{s.passed}/{s.cases}':>8} {f'{s.pass_rate * 100:.0f} %':>9} "
            f"{format_latency(s.p50_ms):>9} {format_latency(s.p95_ms):>9} {cost:>10}"
        )
        if not s.meets_minimum:
            typer.secho(f"{line}  BELOW {minimum}", fg=typer.colors.RED)
        else:
            typer.echo(line)
    for s in run.summaries():
        failed = [r for r in run.results if r.target == s.target and not r.passed]
        if not failed:
            continue
        typer.echo(f"\nFailed on {s.target}:")
        for r in failed[:FAILURES_SHOWN]:
            typer.echo(f"  {r.case_name}: {r.reason}")
        if len(failed) > FAILURES_SHOWN:
            typer.echo(f"  … and {len(failed) - FAILURES_SHOWN} more (all in the written run)")


def _summary_json(s: Any) -> dict[str, Any]:
    return {
        "target": s.target,
        "cases": s.cases,
        "passed": s.passed,
        "pass_rate": s.pass_rate,
        "p50_ms": s.p50_ms,
        "p95_ms": s.p95_ms,
        "cost_usd": None if s.cost_usd is None else f"{s.cost_usd:.9f}",
        "meets_minimum": s.meets_minimum,
    }
