"""`switchover simulate`: what would an incident cost with another backup?

Three ways to say what to simulate, exactly one a run:

    switchover simulate SCENARIO                      a scenario file, or a library name
    switchover simulate --from-traffic FROM..TO --outage TARGET,START,LENGTH,KIND[,RATE]
    switchover simulate --replay-incident ID          a recorded incident, as it happened

The last two build the scenario from the team's own traffic (simulations.whatif.from_store), read
from the published snapshots, so the scheduler may keep running. Then the simulator runs it through
the real chain on a virtual clock, once without the incident and once per backup candidate, and
prints the comparison (simulations.whatif.report). `--save` keeps the scenario built as TOML, to run
again or to grow the library.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.common import ConfigOption, DataDirOption
from engine.cli.common import fail as _fail
from engine.core.errors import ConfigError

if TYPE_CHECKING:
    from engine.config import Config
    from engine.core.paths import DataPaths
    from simulations.whatif.from_store import Outage
    from simulations.whatif.scenario import Limits, Scenario

SCENARIO_HELP = "A scenario file, or a library name; or --from-traffic, or --replay-incident."
REPLAY_HELP = "Replay a recorded incident (its id, as the Incidents page shows it)."
SCALE_HELP = "Simulate this share of the traffic (0.01: 1 %); the rate limits stay as given."
SAVE_HELP = "Write the scenario run as TOML here (data/scenarios/ is the page's library)."
WINDOW_HELP = (
    "Simulate the traffic recorded in FROM..TO (UTC, TO excluded; dates or date and time): "
    "2026-11-24..2026-11-25 is the 24th, 2026-11-24T14:00..2026-11-24T16:30 two and a half "
    "hours; FROM.. runs to now. Needs --outage."
)
OUTAGE_HELP = (
    "With --from-traffic: the outage to inject, as TARGET,START,LENGTH,KIND[,RATE]: a target "
    "(provider/model, or a provider), when it starts (a duration after FROM like 2h or 90m, or "
    "a UTC time like 2026-11-24T14:30 or 14:30 on FROM's day), how long (45m), the fault "
    "(overloaded, server_error, rate_limit, auth, timeout), and the share of calls that fail "
    "(default 1)."
)
LIMIT_HELP = (
    "A backup's rate limits on your account, as TARGET=RPM,TPM (either may be empty: "
    "gpt/gpt-4.1-mini=5000,2000000 or claude/claude-haiku-4-5=,400000); repeat for several."
)


def simulate_command(
    scenario: Annotated[str | None, typer.Argument(help=SCENARIO_HELP)] = None,
    backup: Annotated[
        list[str] | None,
        typer.Option(help="A backup candidate provider/model; repeat to compare several."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the results as JSON here.")] = None,
    from_traffic: Annotated[
        str | None, typer.Option("--from-traffic", metavar="FROM..TO", help=WINDOW_HELP)
    ] = None,
    outage: Annotated[
        str | None, typer.Option(metavar="TARGET,START,LENGTH,KIND[,RATE]", help=OUTAGE_HELP)
    ] = None,
    replay_incident: Annotated[
        str | None, typer.Option("--replay-incident", metavar="ID", help=REPLAY_HELP)
    ] = None,
    scale: Annotated[float, typer.Option(min=0.0001, max=100.0, help=SCALE_HELP)] = 1.0,
    save: Annotated[Path | None, typer.Option(help=SAVE_HELP)] = None,
    limit: Annotated[
        list[str] | None, typer.Option(metavar="TARGET=RPM,TPM", help=LIMIT_HELP)
    ] = None,
    config: ConfigOption = Path("switchover.toml"),
    data_dir: DataDirOption = None,
) -> None:
    """What would this incident cost with that backup? Replays a scenario (a file, a date range
    of your recorded traffic with an outage, or a recorded incident) through the real chain on
    a virtual clock, once without the incident and once per backup."""
    from engine.core.paths import DataPaths

    paths = DataPaths(data_dir) if data_dir else DataPaths.default()
    try:
        built = _scenario(
            scenario,
            from_traffic,
            outage,
            replay_incident,
            backup or (),
            parse_limits(limit or ()),
            config,
            paths,
        )
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if scale != 1:
        built = built.scaled(scale)
    if save is not None:
        from simulations.whatif.scenario_toml import to_toml

        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(to_toml(built))
        typer.echo(f"scenario written to {save}")
    _run(built, backup or None, out, paths)


def _scenario(
    scenario: str | None,
    from_traffic: str | None,
    outage: str | None,
    replay_incident: str | None,
    backups: Sequence[str],
    limits: dict[str, Limits],
    config: Path,
    paths: DataPaths,
) -> Scenario:
    """The scenario the options describe."""
    given = [
        name
        for name, value in (
            ("SCENARIO", scenario),
            ("--from-traffic", from_traffic),
            ("--replay-incident", replay_incident),
        )
        if value
    ]
    if len(given) != 1:
        raise ConfigError(
            "give exactly one of SCENARIO, --from-traffic or --replay-incident"
            + (f" (got {' and '.join(given)})" if given else "")
        )
    if outage is not None and from_traffic is None:
        raise ConfigError("--outage goes with --from-traffic (a scenario has its own faults)")
    if scenario is not None:
        from simulations.whatif.scenario import load_scenario

        loaded = load_scenario(scenario)
        return dataclasses.replace(loaded, limits={**loaded.limits, **limits}) if limits else loaded
    from engine.published.read import PublishedData
    from simulations.whatif import from_store

    chain = _config(config, paths)
    published = PublishedData(paths.published)
    try:
        if replay_incident is not None:
            return from_store.scenario_from_incident(
                published, chain, replay_incident, backups=tuple(backups), limits=limits
            )
        if outage is None:
            raise ConfigError("--from-traffic needs --outage TARGET,START,LENGTH,KIND: what fails")
        start, end = parse_window(from_traffic, datetime.now(UTC))
        return from_store.scenario_from_traffic(
            published,
            chain,
            start,
            end,
            outage=parse_outage(outage, start),
            backups=tuple(backups),
            limits=limits,
        )
    finally:
        published.close()


def _config(path: Path, paths: DataPaths) -> Config:
    """The routes to simulate: `path`; without it, on the demo's data folder, the demo's."""
    from engine.config import load_config

    if not path.exists() and path == Path("switchover.toml"):
        from simulations.demo.up import DEMO_CONFIG, DEMO_MARKER

        if (paths.root / DEMO_MARKER).exists():
            typer.echo(
                f"no {path}: the demo's routes ({DEMO_CONFIG.name}), as {paths.root} holds "
                "demo data"
            )
            return load_config(DEMO_CONFIG)
    return load_config(path)


def _run(scenario: Scenario, backups: list[str] | None, out: Path | None, paths: DataPaths) -> None:
    from simulations.whatif.arrivals import arrivals
    from simulations.whatif.report import comparison_table
    from simulations.whatif.results import as_json
    from simulations.whatif.simulate import simulate as run

    runs = 1 + len(backups or scenario.backups or [None]) + (scenario.recorded is not None)
    traffic = arrivals(scenario)
    typer.echo(f"{scenario.name}: {len(traffic):,} requests, {runs} runs")
    if scenario.description:
        typer.echo(scenario.description)
    with typer.progressbar(length=1000, label="simulating") as bar:
        done: dict[str, float] = {}

        def progress(label: str, share: float) -> None:
            done[label] = share
            bar.update(int(1000 * sum(done.values()) / runs) - bar.pos)

        try:
            # Large comparisons run side by side, a process per core (this is a guarded main).
            comparison = run(
                scenario,
                backups,
                results_dir=paths.root / "simulations",
                progress=progress,
                processes=None,
                traffic=traffic,
            )
        except ConfigError as exc:
            raise _fail(str(exc)) from None
    typer.echo(comparison_table(comparison))
    if out is not None:
        out.write_text(json.dumps(as_json(comparison), indent=2) + "\n")
        typer.echo(f"results written to {out}")


# --- the options' syntax ----------------------------------------------------------------


def parse_window(text: str, now: datetime) -> tuple[datetime, datetime]:
    """FROM..TO (UTC; TO excluded, a date meaning its midnight; no TO: until `now`)."""
    lo, sep, hi = text.partition("..")
    if not sep or not lo.strip():
        raise ConfigError(f"--from-traffic {text!r}: write FROM..TO, like 2026-11-24..2026-11-25")
    start = _when(lo, "FROM")
    end = _when(hi, "TO") if hi.strip() else now
    if end <= start:
        raise ConfigError(f"--from-traffic {text!r}: TO must come after FROM")
    return start, end


def parse_outage(text: str, start: datetime) -> Outage:
    """TARGET,START,LENGTH,KIND[,RATE] as a `simulations.whatif.from_store.Outage`."""
    from engine.config.alerting import parse_duration
    from simulations.whatif.from_store import Outage

    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (4, 5):
        raise ConfigError(
            f"--outage {text!r}: write TARGET,START,LENGTH,KIND[,RATE], like "
            "claude/claude-sonnet-4-5,2h,45m,overloaded"
        )
    target, begins, length, kind = parts[:4]
    offset = parse_duration(begins)
    if offset is None:
        at = _when(begins, "START", day=start.date())
        offset = (at - start).total_seconds()
    seconds = parse_duration(length)
    if not seconds:
        raise ConfigError(f"--outage: LENGTH {length!r} is not a duration like 45m or 2h")
    try:
        rate = float(parts[4]) if len(parts) == 5 else 1.0
    except ValueError:
        raise ConfigError(f"--outage: RATE {parts[4]!r} is not a number") from None
    return Outage(target, offset, seconds, kind, rate)


def parse_limits(texts: Sequence[str]) -> dict[str, Limits]:
    """TARGET=RPM,TPM options as `simulations.whatif.scenario.Limits` by target."""
    from simulations.whatif.scenario import Limits

    limits = {}
    for text in texts:
        match = re.fullmatch(r"\s*([^=\s]+/[^=\s]+)\s*=\s*(\d*)\s*(?:,\s*(\d*))?\s*", text)
        if match is None or not (match[2] or match[3]):
            raise ConfigError(
                f"--limit {text!r}: write TARGET=RPM,TPM, like gpt/gpt-4.1-mini=5000,2000000"
            )
        limits[match[1]] = Limits(
            int(match[2]) if match[2] else None, int(match[3]) if match[3] else None
        )
    return limits


def _when(text: str, what: str, day: date | None = None) -> datetime:
    """A date (its midnight), a date and time, or (with `day`) a time of that day; UTC."""
    text = text.strip()
    try:
        if day is not None and re.fullmatch(r"\d{1,2}:\d{2}", text):
            return datetime.combine(day, time.fromisoformat(text.zfill(5)), UTC)
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return datetime.combine(date.fromisoformat(text), time(0), UTC)
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{what} {text!r}: not a date (2026-11-24) or a UTC time (2026-11-24T14:30)"
        ) from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
