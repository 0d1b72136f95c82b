"""`switchover up --demo`: the product on the fake providers, with traffic and incidents.

Nothing here is a mock-up, and the demo is one system: the scheduler, the gateway and the
dashboard run as their own processes (engine.cli.supervisor), and the demo's traffic goes to the
gateway over HTTP in both dialects, as applications' traffic does (simulations.demo.client).
The gateway's chains call the fault-injecting fake server, which plays a repeating 15-minute
incident plan (the support primary answering 529 for 3 minutes, a 429 storm on the
classifier's primary, an expired key on the summariser's primary). So the breakers the demo's
traffic opens are the ones your own requests meet, and the gateway's recorder, `/metrics` and
the Live page count all of it; this process records nothing itself. The console says each
change of state once, and what the last seconds' traffic did (simulations.demo.console).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from engine.cli.supervisor import Stop, Supervisor, start_stack, switchover
from engine.config import Config, load_config, parse_config
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from simulations.demo.client import gateway_client, send_traffic, wait_until_ready
from simulations.demo.console import Console
from simulations.demo.history import HISTORY_MARKER
from simulations.demo.traffic import Traffic
from simulations.fakes import FakeProviders

DEMO_CONFIG = Path(__file__).parents[2] / "data" / "demo.toml"
DEMO_KEY_ENV = "SWITCHOVER_DEMO_KEY"
CONSOLE_STATE = "console.json"  # what the console said, so that a restart says only news
DEMO_MARKER = "DEMO"  # the dashboard labels a data folder holding it as demo data
CYCLE_S = 900.0
# (model, first start in s, duration in s, fault): one cycle of the incident plan.
INCIDENTS = (
    ("claude-sonnet-4-5", 20.0, 180.0, "overloaded"),
    ("gpt-4.1-mini", 300.0, 90.0, "rate_limit:retry_after=20"),
    ("claude-haiku-4-5", 600.0, 120.0, "auth"),
)

Say = Callable[[str], None]
Incident = tuple[str, float, float, str]


@dataclass(frozen=True, slots=True)
class Plan:
    """The faults the fake providers play: `incidents` (model, start in s, duration in s,
    fault) every `cycle_s`; `history`: seed the fortnight of demo history on a first start;
    `incident_settle_s`: the demo routes' `[alerting] incident_settle` when set (a rehearsal
    that should not wait out the default two minutes)."""

    incidents: tuple[Incident, ...] = INCIDENTS
    cycle_s: float = CYCLE_S
    history: bool = True
    incident_settle_s: float | None = None

    @classmethod
    def load(cls, path: Path) -> Plan:
        """A plan from TOML (`--demo-plan`, for tests and rehearsals): `cycle_s`, `history`,
        `incident_settle_s` and `[[incidents]]` of `model`, `start_s`, `duration_s`, `fault`."""
        try:
            data = tomllib.loads(path.read_text())
            incidents = tuple(
                (str(i["model"]), float(i["start_s"]), float(i["duration_s"]), str(i["fault"]))
                for i in data.get("incidents", [])
            )
            settle = data.get("incident_settle_s")
            plan = cls(
                incidents,
                float(data.get("cycle_s", CYCLE_S)),
                bool(data.get("history", True)),
                None if settle is None else float(settle),
            )
        except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{path}: not a demo plan ({error})") from error
        if plan.incident_settle_s is not None and plan.incident_settle_s <= 0:
            raise ConfigError(f"{path}: incident_settle_s must be above 0")
        if plan.cycle_s <= 0 or any(s < 0 or d <= 0 or s + d > plan.cycle_s
                                    for _, s, d, _ in plan.incidents):  # fmt: skip
            raise ConfigError(f"{path}: every incident must lie inside cycle_s")
        return plan

    def describe(self) -> str:
        return f"incidents every {self.cycle_s / 60:g} min: " + "; ".join(
            f"{model} {fault.split(':')[0]} at +{start:g}s for {duration:g}s"
            for model, start, duration, fault in self.incidents
        )


def wants_demo(config_path: Path) -> tuple[bool, str]:
    """Run the demo unless a configuration exists whose keys are all in the environment."""
    if not config_path.exists():
        return True, f"no {config_path}: starting the demo on the fake providers"
    try:
        config = load_config(config_path)
        for provider in config.providers.values():
            provider.api_key()
    except ConfigError as exc:
        return True, f"{exc}: starting the demo on the fake providers"
    return False, f"using {config_path} with keys from the environment"


def demo_text(port: int, incident_settle_s: float | None = None) -> str:
    """data/demo.toml on fake providers listening on `port`, with `[alerting]
    incident_settle` when given."""
    text = DEMO_CONFIG.read_text().replace("127.0.0.1:8700", f"127.0.0.1:{port}")
    if incident_settle_s is not None:
        text += f"\n[alerting]\nincident_settle = {incident_settle_s:g}\n"
    return text


def demo_config(port: int) -> Config:
    return parse_config(tomllib.loads(demo_text(port)), source=str(DEMO_CONFIG))


def plan_incidents(fake: FakeProviders, plan: Plan | None = None) -> None:
    plan = plan or Plan()
    flaps: dict[str, list[dict[str, object]]] = {}
    for model, start, duration, fault in plan.incidents:
        flaps.setdefault(model, []).append(
            {"period_s": plan.cycle_s, "down_s": duration, "offset_s": start, "fault": fault}
        )
    for model, flapping in flaps.items():
        fake.schedule(model, flapping=flapping)
    # Latency like a hosted model's: most answers in well under a second, a long tail.
    fake.latency(median_ms=350, p99_ms=2500, token_interval_ms=12)


async def run_demo(
    *,
    paths: DataPaths,
    port: int = 8700,
    gateway_port: int = 8787,
    dashboard_port: int | None = None,
    rate_per_s: float = 3.0,
    seed: int = 7,
    say: Say = print,
    plan: Plan | None = None,
    report_every_s: float = 10.0,
    stop: Stop | None = None,
) -> int:
    """The demo until `stop` (or a cancel), or until a process it runs exits; what `switchover
    up` exits with (0 after a stop, else that process's status). The fake providers run in
    this process; the scheduler, the gateway (on `gateway_port`) and the dashboard (given
    `dashboard_port`) as their own processes on the demo routes, as in production, all on the
    data folder `paths`. The traffic starts once the gateway is ready; at a stop it is
    cancelled before anything else."""
    os.environ.setdefault(DEMO_KEY_ENV, "demo-key-not-secret")  # the children inherit it
    began = datetime.now(UTC)
    async with (
        FakeProviders("127.0.0.1", port) as fake,  # stopped last: the gateway drains into it
        Supervisor(say, paths.logs, stop) as processes,
    ):
        plan = plan or Plan()
        plan_incidents(fake, plan)
        config = _demo_folder(paths, demo_text(fake.port, plan.incident_settle_s))
        say(f"fake providers on {fake.base_url} (control: {fake.base_url}/_fake/log)")
        say(plan.describe())
        await start_stack(
            processes, config, paths, gateway_port=gateway_port, dashboard_port=dashboard_port
        )
        if plan.history and not (paths.root / HISTORY_MARKER).exists():
            say("seeding 14 days of demo history in the background (about a minute)")
            history = switchover("demo-history", "--data-dir", str(paths.root))
            await processes.start("demo history", history, essential=False)
        say("Ctrl-C stops the demo")
        console = Console(
            say,
            window_s=report_every_s,
            published=paths.published,
            since=began,
            state=paths.root / "state" / CONSOLE_STATE,
        )
        async with gateway_client(f"http://127.0.0.1:{gateway_port}") as gateway:

            async def traffic() -> None:
                await wait_until_ready(gateway)
                say(f"sending about {rate_per_s:g} requests/s through the gateway")
                await send_traffic(gateway, Traffic(seed), rate_per_s, console.count)

            async def watch() -> None:
                await wait_until_ready(gateway)  # no summary of the seconds before traffic
                await console.run(gateway)

            return await processes.run(traffic(), watch())


def _demo_folder(paths: DataPaths, routes: str) -> Path:
    """The data folder marked as demo data, holding the demo routes `routes` (the text of
    their configuration); the path of that configuration."""
    paths.root.mkdir(parents=True, exist_ok=True)
    (paths.root / DEMO_MARKER).write_text(
        "This data folder holds demo data: fake providers and simulated history.\n"
    )
    paths.demo_config.write_text(routes)
    return paths.demo_config
