"""`switchover targets disable | enable | list`: an operator turns a target off during an
incident, for every route or one, and back on.

The switch goes where the gateways read it: Redis when `[state] redis_url` is set (every host),
else the data folder's `control/targets.json` (every process of this machine). The same switches
as the gateway's `POST /admin/targets/disable`. Without -c and ./switchover.toml, on the routes
of the demo running on the data folder (engine.cli.common.running_config).
"""

from __future__ import annotations

import asyncio
import getpass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from engine.cli.common import ConfigOption, DataDirOption, running_config
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError
from engine.core.formats import format_moment

targets_app = typer.Typer(
    help="Turn targets off and on by hand (operator switches).",
    no_args_is_help=True,
    rich_markup_mode=None,  # help texts name [sections] of switchover.toml: not markup
)

TargetArgument = Annotated[str, typer.Argument(help="The target, as provider/model.")]
RouteOption = Annotated[
    str | None, typer.Option("--route", help="Only for this route (default: every route).")
]


@targets_app.command("disable")
def targets_disable(
    target: TargetArgument,
    route: RouteOption = None,
    reason: Annotated[str, typer.Option("--reason", help="Why, shown with the switch.")] = "",
    config: ConfigOption = Path("switchover.toml"),
    data_dir: DataDirOption = None,
) -> None:
    """Skip TARGET (for one route or all) in every gateway process until it is enabled."""
    switches, routes = _open(config, data_dir, target, route)
    by = f"cli ({getpass.getuser()})"
    _run(switches, switches.disable(target, route=route, reason=reason, by=by))
    where = f"route {route}" if route else f"every route ({', '.join(routes)})"
    typer.echo(
        f"{target} disabled for {where}. Undo: switchover targets enable {target}"
        + (f" --route {route}" if route else "")
    )


@targets_app.command("enable")
def targets_enable(
    target: TargetArgument,
    route: RouteOption = None,
    config: ConfigOption = Path("switchover.toml"),
    data_dir: DataDirOption = None,
) -> None:
    """Undo `disable` for TARGET (for the same --route, or for every route)."""
    switches, _ = _open(config, data_dir, target, route)
    _run(switches, switches.enable(target, route=route))
    typer.echo(f"{target} enabled" + (f" for route {route}." if route else "."))


@targets_app.command("list")
def targets_list(
    config: ConfigOption = Path("switchover.toml"), data_dir: DataDirOption = None
) -> None:
    """The switches in force: target, route, since, by and why."""
    switches, _ = _open(config, data_dir, None, None)
    entries = _run(switches, switches.entries())
    if not entries:
        typer.echo("No target is disabled.")
        return
    for e in entries:
        where = f"route {e['route']}" if e["route"] else "every route"
        why = f": {e['reason']}" if e["reason"] else ""
        since = _moment(e["since"])
        if e.get("kind") == "drill":
            typer.echo(
                f"{e['target']}  under drill {e['drill_id']} on {where} since "
                f"{since} until {_moment(e['until'])} by {e['by']}"
            )
        else:
            typer.echo(f"{e['target']}  disabled for {where} since {since} by {e['by']}{why}")


def _moment(stamp: str) -> str:
    """A switch's time (ISO, as stored) as people read it: "Wed 2 Dec 18:53 UTC"."""
    return format_moment(datetime.fromisoformat(stamp), named=True)


def _open(
    config_path: Path, data_dir: Path | None, target: str | None, route: str | None
) -> tuple[Any, list[str]]:
    from engine.config import load_config
    from engine.core.clock import SystemClock
    from engine.core.paths import DataPaths
    from engine.runtime.build import build_switches

    try:
        config = load_config(running_config(config_path, data_dir))
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if route is not None and route not in config.routes:
        raise _fail(f"unknown route {route!r} (routes: {', '.join(sorted(config.routes))})")
    scope = [config.routes[route]] if route else list(config.routes.values())
    known = {t.name for r in scope for t in r.targets}
    if target is not None and target not in known:
        raise _fail(f"unknown target {target!r} (targets: {', '.join(sorted(known))})")
    routes = [r.name for r in scope if target is None or target in {t.name for t in r.targets}]
    paths = DataPaths(data_dir) if data_dir is not None else DataPaths.default()
    return build_switches(config, paths, SystemClock()), routes


def _run(switches: Any, work: Any) -> Any:
    async def run() -> Any:
        try:
            return await work
        finally:
            close = getattr(switches, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(run())
