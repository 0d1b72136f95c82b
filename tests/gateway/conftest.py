"""Gateway fixtures: the fake providers on loopback, and a real uvicorn server running the
gateway app on a free port in a background thread, so the official SDKs talk real HTTP.

Each test gets its own gateway (own Switchover, breakers and metrics) over one shared fake,
whose scripts and call log are reset between tests. Routes name fake models; a `#fault`
suffix on a model makes the fake answer with that fault (see simulations.fakes.faults).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from engine.config import GatewayConfig, parse_config
from engine.core.attempt import Attempt
from engine.core.clock import Clock
from engine.core.paths import DataPaths
from engine.gateway.app import GatewaySettings, create_app
from engine.gateway.server import descriptor_limit, uvicorn_options
from engine.runtime.switchover import Switchover
from simulations.fakes import FakeProviders

# Fake provider keys: no response body, header or log line may ever contain them.
PROVIDER_KEYS = {
    "FAKE_ANTHROPIC_KEY": "sk-ant-fake-SECRET-anthropic-0001",
    "FAKE_OPENAI_KEY": "sk-fake-SECRET-openai-0002",
}
GATEWAY_KEY = "gw-test-key-1"

# Short limits so that failing paths cost milliseconds (as in tests/system).
FAST_POLICY: dict[str, Any] = {
    "budget_s": 10,
    "attempt_timeout_s": 2.0,
    "first_token_timeout_s": 2.0,
    "idle_timeout_s": 2.0,
    "backoff_base_s": 0.01,
    "backoff_max_s": 0.02,
    "overload_backoff_s": 0.01,
    "min_attempt_budget_s": 0.1,
}


def config_for(
    fake: FakeProviders,
    routes: Mapping[str, Sequence[str] | Mapping[str, Any]],
    **sections: Mapping[str, Any],
) -> Any:
    """A Config whose providers are the fake: `claude` (Anthropic) and `gpt` (OpenAI).
    A route is a list of targets, or a table with `targets` and policy overrides; `sections`
    are further tables of switchover.toml (`gateway={"allow_direct_targets": True}`)."""
    tables = {
        name: dict(spec) if isinstance(spec, Mapping) else {"targets": list(spec)}
        for name, spec in routes.items()
    }
    return parse_config(
        {
            "providers": {
                "claude": {
                    "kind": "anthropic",
                    "base_url": fake.anthropic_url,
                    "api_key_env": "FAKE_ANTHROPIC_KEY",
                },
                "gpt": {
                    "kind": "openai",
                    "base_url": fake.openai_url,
                    "api_key_env": "FAKE_OPENAI_KEY",
                },
            },
            "routes": tables,
            "policy": FAST_POLICY,
            **sections,
        },
        source="test",
    )


class ServerThread:
    """A uvicorn server for `app` on 127.0.0.1 and a free port, on its own thread and loop,
    configured as `switchover serve` configures it (the guarded protocol and its limits) from
    `limits`, by default the [gateway] of the app's own configuration."""

    def __init__(self, app: Any, limits: GatewayConfig | None = None) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        if limits is None:
            gateway = getattr(app.state, "gateway", None)
            limits = gateway.sw.config.gateway if gateway is not None else GatewayConfig()
        options = uvicorn_options(limits, descriptors=descriptor_limit(raise_soft=False))
        options["timeout_graceful_shutdown"] = 1
        config = uvicorn.Config(app, log_level="warning", lifespan="on", **options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.005)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class Gateway:
    """A running gateway, its engine and every attempt it made."""

    server: ServerThread
    sw: Switchover
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def openai_url(self) -> str:
        return self.server.url + "/v1"

    def stop_and_ingest(self, paths: DataPaths) -> None:
        """Stop serving, write what the recorder holds, and run one real scheduler cycle: the
        attempts are in `paths.database`, rolled up, as the dashboard and reports read them."""
        from engine.scheduler.pipeline import Pipeline

        self.server.stop()
        assert self.sw.recorder is not None
        self.sw.recorder.flush()
        pipeline = Pipeline(paths)
        try:
            pipeline.cycle()
        finally:
            pipeline.close()


GatewayFactory = Callable[..., Gateway]


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeProviders]:
    fake = FakeProviders.start_in_thread(valid_keys=list(PROVIDER_KEYS.values()))
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def gateway(fake: FakeProviders) -> Iterator[GatewayFactory]:
    """`gateway(routes, keys=..., max_body_mb=..., gateway={...})` starts a gateway for this
    test (`key_labels`: labelled keys; `clock`: the engine's clock); further keywords are
    tables of switchover.toml."""
    fake.reset()
    running: list[Gateway] = []

    def start(
        routes: Mapping[str, Sequence[str] | Mapping[str, Any]],
        *,
        keys: Sequence[str] = (),
        max_body_mb: float = 32,
        admin_keys: Sequence[str] = (),
        record_to: DataPaths | None = None,
        key_labels: Mapping[str, str] | None = None,  # key → label, as `label:key` gives it
        clock: Clock | None = None,
        **sections: Mapping[str, Any],
    ) -> Gateway:
        attempts: list[Attempt] = []
        sw = Switchover(
            config_for(fake, routes, **sections),
            environ=PROVIDER_KEYS,
            hooks=[attempts.append],
            record_to=record_to,
            clock=clock,
        )
        settings = GatewaySettings(
            keys=frozenset(keys) | frozenset(key_labels or {}),
            labels=dict(key_labels or {}),
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            admin_keys=frozenset(admin_keys),
        )
        app = create_app(sw, settings, owns=True)
        gw = Gateway(ServerThread(app), sw, attempts)
        running.append(gw)
        return gw

    yield start
    for gw in running:
        gw.server.stop()


def paid_calls(fake: FakeProviders, model: str) -> int:
    return len(fake.calls(model))


def user(text: str = "Where is my order?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


WEATHER_TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_TOOL_ANTHROPIC = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": WEATHER_TOOL_OPENAI["function"]["parameters"],  # type: ignore[index]
}
