"""The gateway's requests, streamed and not, in both dialects, reach a real OTLP receiver as
request spans: the chain's request hook serves the gateway as it serves the library."""

from __future__ import annotations

import httpx
from gateway.conftest import PROVIDER_KEYS, ServerThread, config_for
from helpers.otlp_receiver import OtlpReceiver

from engine.gateway.app import GatewaySettings, create_app
from engine.runtime.switchover import Switchover
from engine.telemetry import otel_names as n
from simulations.fakes import FakeProviders


def test_gateway_requests_in_both_dialects_are_exported_as_request_spans():
    fake = FakeProviders.start_in_thread(valid_keys=list(PROVIDER_KEYS.values()))
    try:
        with OtlpReceiver() as receiver:
            config = config_for(
                fake,
                {"support": ["claude/claude-sonnet-4-5", "gpt/gpt-4o"]},
                telemetry={"otlp_endpoint": receiver.url},
            )
            sw = Switchover(config, environ=PROVIDER_KEYS)
            server = ServerThread(create_app(sw, GatewaySettings(), owns=True))
            try:
                ask = {"messages": [{"role": "user", "content": "Where is my order?"}]}
                with httpx.Client(base_url=server.url, timeout=30) as client:
                    openai = client.post(
                        "/v1/chat/completions", json={"model": "support", "stream": True, **ask}
                    )
                    anthropic = client.post(
                        "/v1/messages", json={"model": "support", "max_tokens": 64, **ask}
                    )
                assert openai.status_code == anthropic.status_code == 200
                assert sw.otel is not None and sw.otel.force_flush()
            finally:
                server.stop()
            requests = [a for name, a, _ in receiver.spans() if name == "chat support"]
            assert sorted(a[n.REQUEST_STREAM] for a in requests) == [False, True]
            assert all(a[n.SERVED_BY] == "claude/claude-sonnet-4-5" for a in requests)
            assert n.TIME_TO_FIRST_CHUNK in receiver.metric_names()
    finally:
        fake.close()
