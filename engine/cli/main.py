"""`switchover`: the command line. Each command parses its options and calls one module."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from engine.cli.alerts import alerts_app
from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.cli.drill import drill_command
from engine.cli.evals import eval_command
from engine.cli.simulate import simulate_command
from engine.cli.targets import targets_app
from engine.core.errors import ChainError, ConfigError

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


@app.command("check-config")
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


@app.command()
def ask(
    model: Annotated[str, typer.Argument(help="A route name, or provider/model.")],
    prompt: Annotated[str, typer.Argument(help="The user message.")],
    config: ConfigOption = Path("switchover.toml"),
    stream: Annotated[bool, typer.Option(help="Stream the answer as it arrives.")] = False,
    max_tokens: Annotated[int | None, typer.Option(help="Cap the answer's length.")] = None,
) -> None:
    """Send one prompt through a route and show who answered and every attempt."""
    from engine.core.messages import MessageEnd, StreamError, StreamStart, TextDelta
    from engine.runtime.switchover import Switchover

    try:
        sw = Switchover.from_file(config)
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
            f"{a.latency_ms:7.0f} ms {detail}",
            err=True,
            fg=typer.colors.GREEN if a.served else typer.colors.YELLOW,
        )


@app.command("fake-providers")
def fake_providers(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8700,
) -> None:
    """Run the fault-injecting fake Anthropic + OpenAI server (see /_fake/ endpoints)."""
    from simulations.fakes.server import serve_forever

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    serve_forever(host, port)  # until Ctrl-C


@app.command()
def scheduler(
    data_dir: DataDirOption = None,
    config: ConfigOption = Path("switchover.toml"),
    cycle_s: Annotated[float, typer.Option(help="Seconds between ingest cycles.")] = 5.0,
) -> None:
    """Ingest the spool, compute rollups, evaluate alerts and publish snapshots; the only
    process that opens the DuckDB file. Price overrides, alert rules and receivers come from
    the config, when the file exists, and so does [state] postgres_url: the attempts of
    gateways on several hosts, pulled every cycle."""
    from engine.core.paths import DataPaths
    from engine.core.pricing import Pricer
    from engine.scheduler.pipeline import run_scheduler

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # a line per job run is noise
    pricer, alerting, reports, postgres_url, store = Pricer(), None, None, None, None
    if config.exists():
        from engine.config import load_config

        try:
            loaded = load_config(config)
        except ConfigError as exc:
            raise _fail(str(exc)) from None
        pricer, alerting, reports = Pricer.from_config(loaded), loaded.alerting, loaded.reports
        postgres_url, store = loaded.state.postgres_url, loaded.store
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    try:
        run_scheduler(paths, pricer, cycle_s=cycle_s, alerting=alerting, reports=reports,
                      postgres_url=postgres_url, store=store)  # fmt: skip
    except RuntimeError as exc:  # another scheduler holds the database
        raise _fail(str(exc)) from None


@app.command()
def serve(
    config: ConfigOption = Path("switchover.toml"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8787,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Worker processes; they share breakers through the data folder (or Redis).",
        ),
    ] = 1,
    data_dir: DataDirOption = None,
    max_body_mb: Annotated[
        float, typer.Option(min=0.001, help="Largest request body accepted, in MB.")
    ] = 32.0,
) -> None:
    """Run the gateway: OpenAI (/v1/chat/completions) and Anthropic (/v1/messages) in,
    any provider out. Callers' keys come from SWITCHOVER_GATEWAY_KEYS (comma-separated)."""
    from engine.gateway.server import serve as run_gateway

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        run_gateway(
            config=config,
            host=host,
            port=port,
            workers=workers,
            data_dir=data_dir,
            max_body_mb=max_body_mb,
        )
    except ConfigError as exc:
        raise _fail(str(exc)) from None


@app.command()
def dashboard(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    data_dir: DataDirOption = None,
) -> None:
    """Run the dashboard (Streamlit) on the scheduler's published snapshots."""
    from engine.cli.dashboard_process import streamlit_command

    env = dict(os.environ)
    if data_dir is not None:
        env["SWITCHOVER_DATA_DIR"] = str(data_dir)
    command = streamlit_command(host=host, port=port)
    os.execve(command[0], command, env)  # Streamlit owns the process and its signals


@app.command()
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


@app.command("demo-history", hidden=True)
def demo_history(
    data_dir: DataDirOption = None,
    days: Annotated[int, typer.Option(min=1, max=35, help="Days of history.")] = 14,
) -> None:
    """Seed the demo's data folder with simulated history (the demo runs this once)."""
    from engine.core.paths import DataPaths
    from simulations.demo import DEMO_KEY_ENV, demo_config
    from simulations.history import seed_history

    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    sent = seed_history(
        paths, demo_config(8700), days=days, environ={DEMO_KEY_ENV: "demo"}, say=lambda _: None
    )
    typer.echo(f"demo history: {sent:,} requests over {days} days")


@app.command()
def up(
    config: ConfigOption = Path("switchover.toml"),
    demo: Annotated[
        bool | None,
        typer.Option(
            "--demo/--no-demo",
            help="Run on the fake providers with demo traffic (default: when no real "
            "configuration and keys are present).",
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="Port of the demo's fake providers.")] = 8700,
    gateway_port: Annotated[int, typer.Option(help="Port of the gateway.")] = 8787,
    dashboard_port: Annotated[
        int, typer.Option(help="Port of the dashboard (0: no dashboard).")
    ] = 8501,
    data_dir: DataDirOption = None,
) -> None:
    """Start Switchover on this machine (gateway, scheduler and dashboard; with --demo also
    the fake providers and traffic); Ctrl-C or SIGTERM stops everything. Exits with a child's
    status when one of them stops by itself."""
    from engine.cli.supervisor import Stop, run_stack
    from engine.core.paths import DataPaths
    from simulations.demo import run_demo, wants_demo

    if demo is None:
        demo, reason = wants_demo(config)
        typer.echo(reason)
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    board = dashboard_port or None
    stop = Stop()

    async def supervise() -> int:
        # A service manager stops with SIGTERM, a terminal with SIGINT: both start the same stop
        # (every child stopped in order, the spool flushed), and once is enough.
        with stop.on_signals():
            if demo:
                return await run_demo(port=port, paths=paths, gateway_port=gateway_port,
                                      dashboard_port=board, stop=stop)  # fmt: skip
            return await run_stack(config, paths, gateway_port=gateway_port, say=typer.echo,
                                   dashboard_port=board, stop=stop)  # fmt: skip

    code = 130  # interrupted before the event loop ran: nothing was started
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(supervise())
    typer.echo("stopped")
    raise typer.Exit(code)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
