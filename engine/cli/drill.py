"""`switchover drill --route R --target T --for 5m`: a fault drill on a running gateway.

The gateway first checks that another target of R is healthy now and refuses the drill,
saying why, when none is (`--force` starts it anyway). It then makes T fail on route R as if
its key were invalid (engine.state.drills) for the period, this command counts it down, ends it
(Ctrl-C ends it early; the drill ends itself at the first request of R that fails with every
provider unavailable), and then waits for the scheduler's report of what happened: whether the
backups served the traffic, how fast the breaker opened, the cost difference, the failed
requests the drill caused, whether it aborted itself, and whether T serves again. Exit code 0
when the drill passed, 1 when it failed, was refused by its pre-flight or no report came, 2 for
bad input.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from engine.cli.common import DataDirOption
from engine.cli.common import fail as _fail

ADMIN_KEY_ENV = "SWITCHOVER_ADMIN_KEY"  # one key of the gateway's SWITCHOVER_ADMIN_KEYS


def drill_command(
    route: Annotated[str, typer.Option("--route", help="The route to drill.")],
    target: Annotated[str, typer.Option("--target", help="The target to fail, provider/model.")],
    duration: Annotated[str, typer.Option("--for", help='How long: "90s", "5m" (at most 2h).')],
    gateway: Annotated[
        str, typer.Option("--gateway", help="The running gateway's URL.")
    ] = "http://127.0.0.1:8787",
    admin_key: Annotated[
        str | None,
        typer.Option(
            "--admin-key", help=f"An admin key (default: ${ADMIN_KEY_ENV}).", show_default=False
        ),
    ] = None,
    report_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the scheduler's report after the drill.")
    ] = 120.0,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Start even when no other target of the route is healthy now (the drill "
            "still ends itself at the first request that fails).",
        ),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Fail TARGET on ROUTE as if its key were invalid, then report the fallback it caused."""
    from engine.config.alerting import parse_duration
    from engine.core.paths import DataPaths

    seconds = parse_duration(duration)
    if not seconds:
        raise _fail(f'--for: {duration!r} is not a duration like "90s", "5m" or "1h"')
    key = admin_key or os.environ.get(ADMIN_KEY_ENV)
    headers = {"authorization": f"Bearer {key}"} if key else {}
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    with httpx.Client(base_url=gateway.rstrip("/"), headers=headers, timeout=10) as client:
        body = {"route": route, "target": target, "for_s": seconds, "force": force}
        drill_id = _drive(client, body)
    typer.echo(f"{target} restored on route {route}; waiting for the scheduler's report")
    report = _wait_for_report(paths.published, drill_id, report_timeout)
    if report is None:
        raise _fail(
            f"no report within {report_timeout:g} s: is `switchover scheduler` running on the "
            f"data folder {paths.root}? The drill will be reported when it is.",
            code=1,
        )
    _show(report, target)
    if report.get("verdict") != "passed":
        raise typer.Exit(1)


def _drive(client: httpx.Client, body: dict[str, Any]) -> str:
    """Start the drill, count it down, end it (early on Ctrl-C); its id."""
    started = _call(client, "/admin/drills/start", body)["drill"]
    drill_id, route, target = started["drill_id"], body["route"], body["target"]
    ends_at = datetime.fromisoformat(started["ends_at"])
    if started.get("forced"):
        typer.secho(f"started with --force: {started['preflight']}", fg="yellow", err=True)
    typer.echo(
        f"drill {drill_id}: {target} fails on route {route} as if its key were "
        f"invalid, until {ends_at:%H:%M:%S} UTC (Ctrl-C ends it early)"
    )
    try:
        ran_out = _count_down(ends_at, lambda: _running(client, drill_id))
    except KeyboardInterrupt:
        typer.echo("ending the drill early")
    else:
        if not ran_out:
            typer.secho(
                "the drill ended before its planned end: it ends itself when a request "
                f"of {route} fails with every provider unavailable (the report says "
                "why)",
                fg="yellow",
                err=True,
            )
    finally:
        _end(client, drill_id)
    return drill_id


def _call(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        reply = client.post(path, json=body)
    except httpx.HTTPError as exc:
        raise _fail(f"cannot reach the gateway at {client.base_url}: {exc}") from None
    if reply.status_code != 200:
        try:
            error = reply.json()["error"]
            message, kind = str(error["message"]), error.get("type")
        except (ValueError, KeyError, TypeError):
            message, kind = reply.text[:200], None
        if kind == "drill_refused":  # the drill could run, just not now: not bad input
            raise _fail(f"drill refused: {message}", code=1)
        raise _fail(f"the gateway refused ({reply.status_code}): {message}")
    return reply.json()


def _running(client: httpx.Client, drill_id: str) -> bool:
    """Whether the gateway still runs the drill; True when it cannot say (the drill then stops
    at its planned end, as it would anyway)."""
    try:
        reply = client.get("/admin/drills")
        drills = reply.json()["drills"] if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return True
    return drills is None or any(d.get("drill_id") == drill_id for d in drills)


def _end(client: httpx.Client, drill_id: str) -> None:
    try:
        reply = client.post("/admin/drills/end", json={"drill_id": drill_id})
    except httpx.HTTPError as exc:
        typer.secho(f"could not end the drill ({exc}); it stops at its planned end", err=True)
        return
    if reply.status_code not in (200, 404):  # 404: it reached its end already
        typer.secho(
            f"could not end the drill ({reply.status_code}); it stops at its planned end", err=True
        )


def _count_down(ends_at: datetime, running: Callable[[], bool]) -> bool:
    """Count down to `ends_at`, asking every second whether the drill still runs; False when
    it ended before (it aborted itself, or another operator ended it)."""
    total = max(1, round((ends_at - datetime.now(UTC)).total_seconds()))
    with typer.progressbar(length=total, label="drill", show_eta=False, file=None) as bar:
        done = 0
        while (left := (ends_at - datetime.now(UTC)).total_seconds()) > 0:
            if not running():
                return False
            time.sleep(min(1.0, left))
            step = min(total, total - max(0, round(left))) - done
            if step > 0:
                bar.update(step)
                done += step
    return True


def _wait_for_report(published: Path, drill_id: str, timeout_s: float) -> dict[str, Any] | None:
    from engine.published.read import PublishedData

    data = PublishedData(published)
    deadline = time.monotonic() + timeout_s
    since = datetime.now(UTC) - timedelta(days=1)
    while time.monotonic() < deadline:
        drills = data.query("drills", since=since)
        row = drills[drills["drill_id"] == drill_id]
        if not row.empty and row.iloc[0]["status"] == "reported":
            return json.loads(row.iloc[0]["report"])
        time.sleep(1.0)
    return None


def _show(report: dict[str, Any], target: str) -> None:
    from decimal import Decimal

    from engine.core.money import format_parts, said_as_change

    color = "green" if report["verdict"] == "passed" else "red"
    typer.secho(f"verdict: {report['verdict']}", fg=color, bold=True)
    for why in report.get("why", []):  # reports from before the self-abort have none
        typer.secho(f"  {why}", fg=color)
    typer.echo(f"  requests during the drill: {report['requests']}")
    for served, n in sorted(report["served_by"].items(), key=lambda item: -item[1]):
        typer.echo(f"    served by {served}: {n}")
    caused = " (every provider unavailable: caused by the drill)" if report["failed"] else ""
    typer.echo(f"  failed requests: {report['failed']}{caused}")
    typer.echo(f"  calls refused by the drill: {report['drill_faults']}")
    opened = report["breaker_opened_after_s"]
    typer.echo(
        "  breaker of "
        + target
        + (f" opened after {opened:.1f} s" if opened is not None else " never opened")
    )
    # cost = the primary's estimate + the difference, at one precision and adding up as shown
    cost, shown = format_parts(Decimal(report["cost_usd"]), {
        "primary": Decimal(report["primary_estimate_usd"]),
        "difference": Decimal(report["cost_difference_usd"]),
    })  # fmt: skip
    change = said_as_change(shown["difference"])  # "saved $x", "cost $x more"
    change = change if change == "no difference" else f"the backups {change}"
    typer.echo(f"  cost {cost}, on the primary it would have been {shown['primary']} ({change})")
    back = report["restored_after_s"]
    typer.echo(
        f"  {target} "
        + (
            f"served again {back:.1f} s after the drill"
            if back is not None
            else "not seen serving since the drill"
        )
    )
