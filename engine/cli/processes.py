"""`switchover serve | scheduler | dashboard | fake-providers | up`: the product's long-running
processes, each started on its own, or all together on one machine by `up` (the supervisor,
engine.cli.supervisor); and `demo-history`, the simulated history the demo (`up --demo`) seeds
its data folder with, once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError


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
    any provider out. Callers' keys come from SWITCHOVER_GATEWAY_KEYS (comma-separated;
    `label:secret` labels a key, for attempts and [[budgets]] key = "label")."""
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
    from engine.scheduler.process import run_scheduler

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # a line per job run is noise
    pricer, alerting, reports, postgres_url, store = Pricer(), None, None, None, None
    if config.exists():
        from engine.config import load_config
        from engine.runtime.build import build_pricer

        try:
            loaded = load_config(config)
        except ConfigError as exc:
            raise _fail(str(exc)) from None
        pricer, alerting, reports = build_pricer(loaded), loaded.alerting, loaded.reports
        postgres_url, store = loaded.state.postgres_url, loaded.store
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    try:
        run_scheduler(
            paths,
            pricer,
            cycle_s=cycle_s,
            alerting=alerting,
            reports=reports,
            postgres_url=postgres_url,
            store=store,
        )
    except RuntimeError as exc:  # another scheduler holds the database
        raise _fail(str(exc)) from None


def dashboard(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    data_dir: DataDirOption = None,
    config: ConfigOption = Path("switchover.toml"),
) -> None:
    """Run the dashboard (Streamlit) on the scheduler's published snapshots. Beyond loopback
    only with a sign-in (SWITCHOVER_DASHBOARD_SECRET, or OIDC in .streamlit/secrets.toml);
    the config's routes and [state] are where its operator switches go."""
    from engine.cli.dashboard_process import launch

    try:
        command, env = launch(
            host=host, port=port, data_dir=data_dir, config=config, environ=os.environ
        )
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    os.execve(command[0], command, env)  # Streamlit owns the process and its signals


def fake_providers(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8700,
) -> None:
    """Run the fault-injecting fake Anthropic + OpenAI server (see /_fake/ endpoints)."""
    from simulations.fakes.server import serve_forever

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    serve_forever(host, port)  # until Ctrl-C


DashboardHostOption = Annotated[
    str, typer.Option(help="Address of the dashboard (beyond loopback: with a sign-in).")
]
DashboardPortOption = Annotated[int, typer.Option(help="Port of the dashboard (0: no dashboard).")]
DemoOption = Annotated[
    bool | None,
    typer.Option(
        "--demo/--no-demo",
        help="Run on the fake providers with demo traffic (default: when no real "
        "configuration and keys are present).",
    ),
]
DemoPlanOption = Annotated[
    Path | None,
    typer.Option(
        hidden=True,
        help="A TOML demo plan (cycle_s, history, [[incidents]]) instead of the 15-minute "
        "one: for tests and rehearsals.",
    ),
]


def up(
    config: ConfigOption = Path("switchover.toml"),
    demo: DemoOption = None,
    port: Annotated[int, typer.Option(help="Port of the demo's fake providers.")] = 8700,
    gateway_port: Annotated[int, typer.Option(help="Port of the gateway.")] = 8787,
    dashboard_port: DashboardPortOption = 8501,
    dashboard_host: DashboardHostOption = "127.0.0.1",
    data_dir: DataDirOption = None,
    demo_plan: DemoPlanOption = None,
) -> None:
    """Start Switchover on this machine (gateway, scheduler and dashboard; with --demo also
    the fake providers and traffic); Ctrl-C or SIGTERM stops everything. Exits with a child's
    status when one of them stops by itself."""
    from engine.cli.supervisor import Stop, run_stack
    from engine.core.paths import DataPaths
    from simulations.demo.up import Plan, run_demo, wants_demo

    if demo is None:
        demo, reason = wants_demo(config)
        typer.echo(reason)
    _dashboard_allowed(dashboard_host, dashboard_port, demo=demo)
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    plan = Plan.load(demo_plan) if demo_plan else None
    board = dashboard_port or None
    stop = Stop()

    async def supervise() -> int:
        # A service manager stops with SIGTERM, a terminal with SIGINT: both start the same stop
        # (every child stopped in order, the spool flushed), and once is enough.
        with stop.on_signals():
            if demo:
                return await run_demo(
                    port=port,
                    paths=paths,
                    gateway_port=gateway_port,
                    dashboard_port=board,
                    stop=stop,
                    plan=plan,
                )
            return await run_stack(
                config,
                paths,
                gateway_port=gateway_port,
                say=typer.echo,
                dashboard_port=board,
                dashboard_host=dashboard_host,
                stop=stop,
            )

    code = 130  # interrupted before the event loop ran: nothing was started
    with contextlib.suppress(KeyboardInterrupt):
        code = asyncio.run(supervise())
    typer.echo("stopped")
    raise typer.Exit(code)


def _dashboard_allowed(host: str, port: int, *, demo: bool) -> None:
    """Refuse, before anything starts, a dashboard `up` could not start: beyond loopback
    without a sign-in (dashboard.auth), or the demo's anywhere but loopback."""
    from dashboard.auth import configured, is_loopback, refusal

    if not port:
        return  # no dashboard
    if demo and not is_loopback(host):
        raise _fail("the demo's dashboard listens on 127.0.0.1 only: leave out --dashboard-host")
    refused = refusal(host, configured())
    if refused is not None:
        raise _fail(refused)


def demo_history(
    data_dir: DataDirOption = None,
    days: Annotated[int, typer.Option(min=1, max=35, help="Days of history.")] = 14,
) -> None:
    """Seed the demo's data folder with simulated history (the demo runs this once)."""
    from engine.core.paths import DataPaths
    from simulations.demo.history import seed_history
    from simulations.demo.up import DEMO_KEY_ENV, demo_config

    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    sent = seed_history(
        paths, demo_config(8700), days=days, environ={DEMO_KEY_ENV: "demo"}, say=lambda _: None
    )
    typer.echo(f"demo history: {sent:,} requests over {days} days")
