"""`python -m engine.cli`: the same as the `switchover` command."""

from engine.cli.main import app

app()
