"""What the command line's modules share: the options every command spells the same way, and
how a command fails (one red line on stderr, exit code 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="Path of switchover.toml.", dir_okay=False)
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="Runtime data folder (default: $SWITCHOVER_DATA_DIR or data/)."
    ),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.secho(message, fg=typer.colors.RED, err=True)
    return typer.Exit(code)
