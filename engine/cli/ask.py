"""`switchover check-config` and `switchover ask`: try a configuration before serving it, its
routes as the file says them, then one prompt through one of them with every attempt shown."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from engine.cli.common import ConfigOption, DataDirOption, running_config
from engine.cli.common import fail as _fail
from engine.core.errors import ChainError, ConfigError
from engine.core.formats import format_latency


def check_config(config: ConfigOption = Path("switchover.toml")) -> None:
    """Validate a configuration file and show its routes."""
    from engine.config import load_config

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    for name, route in cfg.routes.items():
        chain = " → ".join(t.name for t in route.targets)
        typer.echo(f"{name}: {chain} (budget {route.policy.budget_s:g} s)")
    missing = []
    for provider in cfg.providers.values():
        try:
            provider.api_key()
        except ConfigError as exc:
            missing.append(str(exc))
    for line in missing:
        typer.secho(f"warning: {line}", fg=typer.colors.YELLOW, err=True)


def ask(
    model: Annotated[str, typer.Argument(help="A route name, or provider/model.")],
    prompt: Annotated[str, typer.Argument(help="The user message.")],
    config: ConfigOption = Path("switchover.toml"),
    stream: Annotated[bool, typer.Option(help="Stream the answer as it arrives.")] = False,
    max_tokens: Annotated[int | None, typer.Option(help="Cap the answer's length.")] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Send one prompt through a route and show who answered and every attempt (without -c
    and ./switchover.toml: through the routes of the demo running on the data folder)."""
    from engine.core.messages import MessageEnd, StreamError, StreamStart, TextDelta
    from engine.runtime.switchover import Switchover

    try:
        sw = Switchover.from_file(running_config(config, data_dir))
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    async def run() -> None:
        async with sw:
            if not stream:
                reply = await sw.complete(model, prompt, max_tokens=max_tokens)
                typer.echo(reply.text)
                _show_attempts(reply.attempts)
                return
            async for event in sw.stream(model, prompt, max_tokens=max_tokens):
                if isinstance(event, StreamStart):
                    typer.secho(f"[{event.provider}/{event.model}]", fg=typer.colors.CYAN, err=True)
                elif isinstance(event, TextDelta):
                    typer.echo(event.text, nl=False)
                elif isinstance(event, MessageEnd):
                    typer.echo()
                    _show_attempts(event.attempts)
                elif isinstance(event, StreamError):
                    typer.echo()
                    _show_attempts(event.attempts)
                    raise _fail(f"stream failed after it began: {event.message}", 1)

    try:
        asyncio.run(run())
    except ChainError as exc:
        _show_attempts(exc.attempts)
        raise _fail(str(exc), 1) from None


def _show_attempts(attempts: tuple) -> None:
    for a in attempts:
        detail = a.error_class or ""
        if a.http_status:
            detail += f" ({a.http_status})"
        typer.secho(
            f"  #{a.attempt_number} {a.target:<40} {a.outcome:<9} {a.decision:<14} "
            f"{format_latency(a.latency_ms):>9} {detail}",
            err=True,
            fg=typer.colors.GREEN if a.served else typer.colors.YELLOW,
        )
