"""The OpenTelemetry export over real OTLP/HTTP to a receiver started by the test, configured as
an operator would ([telemetry] otlp_endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT); an unreachable
collector and a missing SDK never fail a request."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
from helpers.otlp_receiver import OtlpReceiver

from engine.config import parse_config
from engine.core.clock import SystemClock
from engine.runtime.switchover import Switchover
from engine.telemetry import otel_names as n
from simulations.fakes import FakeTransport

KEYS = {"CLAUDE_KEY": "sk-ant-K3Y-secret", "GPT_KEY": "sk-proj-K3Y-secret"}
CONFIG = """
[providers.claude]
kind = "anthropic"
base_url = "http://anthropic.fake"
api_key_env = "CLAUDE_KEY"
[providers.gpt]
kind = "openai"
base_url = "http://openai.fake/v1"
api_key_env = "GPT_KEY"
[routes.support]
targets = ["claude/claude-sonnet-4-5", "gpt/gpt-4o"]
[policy]
primary_retries = 0
"""
TELEMETRY_OFF_HOST = '[telemetry]\notlp_endpoint = "http://127.0.0.1:9"\n'  # nobody listens


def switchover(telemetry: str = "", **environ: str) -> tuple[Switchover, FakeTransport]:
    fake = FakeTransport(clock=SystemClock())
    config = parse_config(tomllib.loads(CONFIG + telemetry))
    return Switchover(config, transport=fake, environ={**KEYS, **environ}), fake


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_spans_and_metrics_reach_a_collector_named_in_the_file():
    with OtlpReceiver() as receiver:
        sw, fake = switchover(
            f'[telemetry]\notlp_endpoint = "{receiver.url}"\nservice_name = "checkout"\n'
            'headers_env = "OTLP_HEADERS"\n',
            OTLP_HEADERS="authorization=Bearer%20t0ken",
        )
        fake.script("claude-sonnet-4-5", ["529"])
        with sw:
            assert sw.complete_sync("support", "Where is my order?").provider == "gpt"
            assert sw.otel is not None and sw.otel.force_flush()
        spans = {name: attributes for name, attributes, _ in receiver.spans()}
        assert set(spans) == {"chat support", "chat claude-sonnet-4-5", "chat gpt-4o"}
        assert spans["chat support"][n.RESPONSE_MODEL] == "gpt-4o"
        assert spans["chat claude-sonnet-4-5"][n.ERROR_TYPE] == "overloaded"
        assert spans["chat gpt-4o"][n.PROVIDER_NAME] == "openai"
        assert spans["chat gpt-4o"][n.COST_USD] > 0
        metrics = receiver.metric_names()
        assert metrics[n.TOKEN_USAGE].unit == "{token}"
        assert metrics[n.OPERATION_DURATION].unit == "s"
        assert {"service.name": "checkout"}.items() <= receiver.resource_attributes()[0].items()
        assert all(h["authorization"] == "Bearer t0ken" for h in receiver.headers)
        sent = b"".join(m.SerializeToString() for m in [*receiver.traces, *receiver.metrics])
        assert b"Where is my order" not in sent and b"K3Y" not in sent


def test_the_standard_endpoint_variable_turns_the_export_on():
    with OtlpReceiver() as receiver:
        sw, _ = switchover(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="from-env")
        with sw:
            sw.complete_sync("support", "hello")
            assert sw.otel is not None and sw.otel.force_flush()
        assert [name for name, _, _ in receiver.spans()].count("chat support") == 1
        assert receiver.resource_attributes()[0]["service.name"] == "from-env"


def test_the_files_endpoint_wins_over_the_variable_and_sdk_disabled_turns_it_off():
    with OtlpReceiver() as chosen, OtlpReceiver() as other:
        sw, _ = switchover(
            f'[telemetry]\notlp_endpoint = "{chosen.url}"\n',
            OTEL_EXPORTER_OTLP_ENDPOINT=other.url,
        )
        with sw:
            sw.complete_sync("support", "hello")
            assert sw.otel is not None and sw.otel.force_flush()
        assert chosen.spans() and not other.traces
    sw, _ = switchover(
        '[telemetry]\notlp_endpoint = "http://127.0.0.1:9"\n', OTEL_SDK_DISABLED="true"
    )
    with sw:
        assert sw.otel is None


def test_an_unreachable_collector_never_fails_or_holds_up_a_request():
    sw, fake = switchover(
        f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{closed_port()}"\nexport_timeout_s = 0.5\n'
    )
    fake.script("claude-sonnet-4-5", ["529"])
    with sw:
        assert sw.otel is not None
        for _ in range(20):
            assert sw.complete_sync("support", "hello").provider in ("claude", "gpt")
        began = time.monotonic()
        sw.otel.force_flush()  # fails to export; bounded by the timeout and the retries' end
    assert time.monotonic() - began < 30  # a safety net only: the bound is the timeout


def test_a_missing_sdk_never_fails_a_start_or_a_request(tmp_path: Path):
    """In a fresh interpreter where `import opentelemetry` fails: one warning, and answers."""
    script = tmp_path / "no_sdk.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, tomllib
            for name in list(sys.modules):
                if name.startswith("opentelemetry"):
                    del sys.modules[name]
            sys.modules["opentelemetry"] = None
            from engine.config import parse_config
            from engine.core.clock import SystemClock
            from engine.runtime.switchover import Switchover
            from simulations.fakes import FakeTransport
            text = {CONFIG + TELEMETRY_OFF_HOST!r}
            fake = FakeTransport(clock=SystemClock())
            config = parse_config(tomllib.loads(text))
            with Switchover(config, transport=fake, environ={KEYS!r}) as sw:
                assert sw.otel is None
                print("served by", sw.complete_sync("support", "hello").provider)
            """
        )
    )
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "served by claude" in done.stdout
    assert done.stderr.count("OpenTelemetry export is configured but its SDK is missing") == 1


@pytest.mark.parametrize(
    ("telemetry", "key"),
    [
        ('otlp_endpoint = "grpc://collector:4317"', "telemetry.otlp_endpoint"),
        ("otlp_endpoint = 4318", "telemetry.otlp_endpoint"),
        ('service_name = "has spaces"', "telemetry.service_name"),
        ('headers_env = "not-a-variable"', "telemetry.headers_env"),
        ("export_timeout_s = 0", "telemetry.export_timeout_s"),
        ("export_timeout_s = true", "telemetry.export_timeout_s"),
        ('headers = "authorization=secret"', "telemetry.headers"),
    ],
)
def test_a_bad_telemetry_key_fails_in_one_line_naming_it(telemetry: str, key: str):
    from engine.core.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        parse_config(tomllib.loads(CONFIG + "[telemetry]\n" + telemetry + "\n"))
    message = str(caught.value)
    assert f": {key}:" in message and "\n" not in message
