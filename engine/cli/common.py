"""What the command line's modules share: the options every command spells the same way, how a
command fails (one red line on stderr, exit code 2), and which configuration a command run
beside the running processes reads (`running_config`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from engine.core.paths import DataPaths

DEFAULT_CONFIG = Path("switchover.toml")
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


def running_config(config: Path, data_dir: Path | None = None) -> Path:
    """The configuration of the processes running on this machine, for a command that works
    beside them (`switchover ask`, `switchover targets`): `config` when -c names it or
    ./switchover.toml exists; without either, the one the demo runs on, which `switchover up`
    writes into its data folder (DataPaths.demo_config). Failing both, a failure that names
    the -c to pass."""
    if config != DEFAULT_CONFIG or config.exists():
        return config
    paths = DataPaths(data_dir) if data_dir is not None else DataPaths.default()
    demo = paths.demo_config
    if not demo.exists():
        raise fail(
            f"no {config} here, and no demo running on {paths.root} (no {demo}): pass -c with "
            f"the configuration the gateway runs on (-c path/to/switchover.toml), or, while "
            f"`switchover up` runs the demo, -c {demo} from the folder it runs in"
        )
    from simulations.demo.up import DEMO_KEY_ENV

    # The demo's fake providers take any key; `switchover up` gives its processes this one.
    os.environ.setdefault(DEMO_KEY_ENV, "demo-key-not-secret")
    typer.echo(f"no {config}: using the running demo's configuration, {demo}", err=True)
    return demo
