"""`switchover alerts test | silence | list`: the alert receivers, silences, what is firing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError

alerts_app = typer.Typer(
    help="Alert receivers, silences and what is firing.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help texts name [sections] of switchover.toml: not markup
)


@alerts_app.command("test")
def alerts_test(config: ConfigOption = Path("switchover.toml")) -> None:
    """Send a test notification to every receiver in [alerting] and say what each answered."""
    from engine.alerts.delivery import post
    from engine.alerts.payloads import body_for
    from engine.config import load_config

    try:
        receivers = load_config(config).alerting.receivers
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if not receivers:
        raise _fail(f"{config}: no receivers: add [[alerting.receivers]] (see the README)")
    failed = 0
    for receiver in receivers:
        result = post(receiver, body_for(receiver, "test", _TEST_ALERT))
        if result.ok and receiver.kind == "pagerduty":  # close the test incident it opened
            result = post(receiver, body_for(receiver, "resolved", _TEST_ALERT))
        if result.ok:
            typer.secho(f"{receiver.name}: delivered (HTTP {result.http_status})", fg="green")
        else:
            failed += 1
            typer.secho(f"{receiver.name}: NOT delivered: {result.error}", fg="red", err=True)
    if failed:
        raise typer.Exit(1)


_TEST_ALERT = {
    "alert_id": "test",
    "rule": "test",
    "kind": "test",
    "severity": "warning",
    "subject": "switchover",
    "state": "firing",
    "summary": "A test notification from `switchover alerts test`: this receiver works.",
    "cost_usd": None,
}


@alerts_app.command("silence")
def alerts_silence(
    rule: Annotated[str, typer.Argument(help="The rule's name (see `switchover alerts list`).")],
    duration: Annotated[str, typer.Option("--for", help='How long: "30m", "2h", "1d".')] = "1h",
    subject: Annotated[
        str | None, typer.Option(help="Only this route, target or provider (default: all).")
    ] = None,
    reason: Annotated[str, typer.Option(help="Why, for whoever looks later.")] = "",
    data_dir: DataDirOption = None,
) -> None:
    """Stop notifications of a rule for a while (the scheduler takes the request in)."""
    import getpass
    from datetime import UTC, datetime, timedelta

    from engine.alerts.silences import request_silence
    from engine.config.alerting import parse_duration
    from engine.core.paths import DataPaths

    seconds = parse_duration(duration)
    if not seconds:
        raise _fail(f'--for: {duration!r} is not a duration like "30m", "2h" or "1d"')
    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    request_silence(
        paths,
        rule,
        duration=timedelta(seconds=seconds),
        now=datetime.now(UTC),
        subject=subject,
        reason=reason,
        created_by=f"cli ({getpass.getuser()})",  # as `switchover targets disable` says who
    )
    typer.echo(f"{rule}{f' ({subject})' if subject else ''} silenced for {duration}")


@alerts_app.command("list")
def alerts_list(
    data_dir: DataDirOption = None,
    days: Annotated[int, typer.Option(help="Also show alerts resolved in this many days.")] = 1,
) -> None:
    """What is firing, and what fired lately (from the published snapshots)."""
    from datetime import UTC, datetime, timedelta

    from engine.core.formats import format_moment
    from engine.core.paths import DataPaths
    from engine.published.read import PublishedData

    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    data = PublishedData(paths.published)
    since = datetime.now(UTC) - timedelta(days=days)
    alerts = data.query("alerts", since=since)
    undelivered = data.query("alert_notifications", since=since)
    undelivered = undelivered[undelivered["status"].isin(["failed", "retrying"])]
    for row in undelivered.itertuples():
        typer.secho(
            f"delivery {row.status} to {row.receiver} after {row.attempts} tries "
            f"({row.last_error}): {row.alert_id} {row.event}",
            fg="yellow",
            err=True,
        )
    if alerts.empty:
        typer.echo("no alerts")
        return
    for row in alerts.itertuples():
        when = format_moment(row.fired_at)
        if row.state == "resolved":
            when += f" → {row.resolved_at.astimezone(UTC):%H:%M}"
        when += " UTC"
        mute = " (silenced)" if row.silenced else ""
        color = "red" if row.state == "firing" else None
        typer.secho(f"{row.state:<8} {row.severity:<8} {when}  {row.summary}{mute}", fg=color)
