"""`switchover report`: the weekly reliability report, written from the published snapshots (so
the scheduler may keep running) in every format the machine can make."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError


def report(
    week: Annotated[
        str | None, typer.Option(help="The ISO week, like 2026-W47 (default: last week).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder to write into (default: data/reports).")
    ] = None,
    config: ConfigOption = Path("switchover.toml"),
    data_dir: DataDirOption = None,
) -> None:
    """The weekly reliability report: HTML (self-contained), Markdown, CSV, and PDF where
    Chromium is installed; from the published snapshots, so the scheduler may keep running."""
    from datetime import UTC, datetime

    from engine.core.paths import DataPaths
    from engine.published.read import PublishedData
    from engine.reports import render
    from engine.reports.week import build_week, last_week, week_bounds

    target = 0.999
    if config.exists():
        from engine.config import load_config

        try:
            target = load_config(config).reports.availability_target
        except ConfigError as exc:
            raise _fail(str(exc)) from None
    week = week or last_week(datetime.now(UTC))
    try:
        week_bounds(week)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    steps = ["reading the week", "HTML", "Markdown", "CSV", "PDF"]
    with typer.progressbar(length=len(steps), label=f"report {week}") as bar:
        built = build_week(PublishedData(paths.published), week, target)
        bar.update(1)
        written = render.write(built, out or paths.reports, progress=lambda _: bar.update(1))
    for kind, path in written.items():
        typer.echo(f"{kind:<9} {path}")
    if "pdf" not in written:
        typer.echo("(no PDF: Chromium is not installed; apt-get install chromium)", err=True)
