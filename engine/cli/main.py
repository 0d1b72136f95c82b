"""`switchover`: the command line. Each command parses its options and calls one module; the
commands live one group a module (engine.cli.*), and this one puts them together in the order
`switchover --help` lists them."""

from __future__ import annotations

import sys

import typer

from engine.cli.alerts import alerts_app
from engine.cli.ask import ask, check_config
from engine.cli.drill import drill_command
from engine.cli.evals import eval_command
from engine.cli.processes import dashboard, demo_history, fake_providers, scheduler, serve, up
from engine.cli.report import report
from engine.cli.simulate import simulate_command
from engine.cli.targets import targets_app

app = typer.Typer(
    help="Switchover keeps LLM features up when a provider fails, and shows what that costs.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # help texts name [sections] of switchover.toml: not markup
)
app.add_typer(alerts_app, name="alerts")
app.add_typer(targets_app, name="targets")
app.command("eval")(eval_command)
app.command("drill")(drill_command)
app.command("simulate")(simulate_command)
app.command("check-config")(check_config)
app.command()(ask)
app.command("fake-providers")(fake_providers)
app.command()(scheduler)
app.command()(serve)
app.command()(dashboard)
app.command()(report)
app.command("demo-history", hidden=True)(demo_history)
app.command()(up)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
