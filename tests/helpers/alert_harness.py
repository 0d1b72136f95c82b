"""A world for alert tests: real chains on the in-process fake providers, driven minute by
minute on a virtual clock, every attempt through the real recorder, and the real scheduler
pass (ingest, rollups, alerts, incidents, outbox) run at the end of each minute; plus a local
HTTP receiver standing in for Slack."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.alerts.watch import Watch
from engine.config import parse_config
from engine.config.alerting import AlertingConfig
from engine.core.clock import VirtualClock
from engine.core.errors import ChainError
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.runtime.build import build_pricer
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.fakes import FakeTransport

PRIMARY = "claude-sonnet-4-5"
START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
SYSTEM = "You are the support agent of an online shop. " * 120  # ~1,400 tokens, cached


@dataclass
class Delivery:
    body: dict[str, Any]
    status: int


@dataclass
class SlackStandIn:
    """Answers each POST with the next scripted status (then 200) and keeps what it got.
    `hold` (when set) is waited on before answering: a receiver that hangs."""

    statuses: list[int] = field(default_factory=list)
    got: list[Delivery] = field(default_factory=list)
    hold: threading.Event | None = None
    entered: threading.Event = field(default_factory=threading.Event)

    def start(self) -> str:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stand_in.entered.set()
                if stand_in.hold is not None:
                    stand_in.hold.wait(30)
                status = stand_in.statuses.pop(0) if stand_in.statuses else 200
                stand_in.got.append(Delivery(body, status))
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def delivered(self) -> list[tuple[str, str, str]]:
        """(event, rule, subject) of each accepted generic-JSON delivery, in order."""
        return [
            (d.body["event"], d.body["alert"]["rule"], d.body["alert"]["subject"])
            for d in self.got
            if d.status < 300
        ]


def config(
    receivers: list[dict[str, Any]],
    rules: list[dict[str, Any]] | None,
    *,
    routes: dict[str, list[str]] | None = None,
    keys: tuple[str, str] = ("K", "K"),
) -> dict:
    """Two providers (claude, gpt) whose keys are in the variables `keys`; `routes`: route →
    targets (support on Sonnet, then GPT-4.1 mini, when not given)."""
    routes = routes or {"support": [f"claude/{PRIMARY}", "gpt/gpt-4.1-mini"]}
    data: dict[str, Any] = {
        "providers": {
            "claude": {"kind": "anthropic", "base_url": "http://fake", "api_key_env": keys[0]},
            "gpt": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": keys[1]},
        },
        "routes": {name: {"targets": targets} for name, targets in routes.items()},
        "alerting": {"receivers": receivers, "builtin_rules": rules is None},
    }
    if rules is not None:
        data["alerts"] = rules
    return data


class World:
    """`per_minute` requests a minute, on each route of `routes` in turn."""

    def __init__(
        self,
        tmp_path,
        data: dict,
        *,
        per_minute: int = 10,
        start: datetime = START,
        routes: tuple[str, ...] = ("support",),
    ) -> None:
        self.clock = VirtualClock(wall_start=start)
        self.transport = FakeTransport(clock=self.clock)
        self.paths = DataPaths(tmp_path / "data")
        self.config = parse_config(data)
        self.per_minute = per_minute
        self.routes = routes
        keys = {p.api_key_env for p in self.config.providers.values() if p.api_key_env}
        self.sw = Switchover(
            self.config,
            clock=self.clock,
            transport=self.transport,
            record_to=self.paths,
            environ={key: "test-key" for key in keys},
        )
        self.watch = Watch(self.config.alerting, self.paths)
        # Priced as production prices: the config's price providers and overrides.
        self.pipeline = Pipeline(
            self.paths, build_pricer(self.config), now=self.clock.wall, watch=self.watch
        )
        self.failed_requests = 0

    @property
    def now(self) -> datetime:
        return self.clock.wall()

    def primary_fails(self, fault: str, minutes: float) -> None:
        """From now on, the primary answers `fault` for `minutes` (virtual)."""
        self.fails(PRIMARY, fault, minutes)

    def fails(self, model: str, fault: str, minutes: float) -> None:
        """From now on, `model` answers `fault` for `minutes` (virtual)."""
        self.transport.schedule(
            model, windows=[{"start_s": 0, "end_s": minutes * 60, "fault": fault}]
        )

    def minutes(self, count: int) -> None:
        """`count` minutes of traffic, each ended by a scheduler cycle."""
        for _ in range(count):
            self.clock.run(self._one_minute())
            self.cycle()

    def cycle(self) -> None:
        assert self.sw.recorder is not None
        self.sw.recorder.flush()
        self.pipeline.cycle()
        if self.watch.outbox._sender is not None:  # let this pass's deliveries finish
            assert self.watch.outbox.sender.wait_idle(10)

    async def _one_minute(self) -> None:
        """Requests evenly spread over the minute; a slow one delays the next, never the
        minute's end beyond what it took."""
        began = self.clock.now()
        for i in range(self.per_minute):
            await self.clock.sleep(began + i * 60.0 / self.per_minute - self.clock.now())
            request = Request(
                messages=(Message.user(f"Where is order {i}?"),),
                system=SYSTEM,
                cache_system=True,
                max_tokens=200,
            )
            try:
                await self.sw.chain(self.routes[i % len(self.routes)]).complete(request)
            except ChainError:
                self.failed_requests += 1
        await self.clock.sleep(began + 60.0 - self.clock.now())

    def query(self, sql: str, params: dict | None = None) -> list[tuple]:
        return self.pipeline.con.execute(sql, params or {}).fetchall()

    def close(self) -> None:
        self.clock.run(self.sw.aclose())
        self.pipeline.close()


def at(minute: float) -> datetime:
    return START + timedelta(minutes=minute)


__all__ = ["AlertingConfig", "SlackStandIn", "World", "at", "config"]
