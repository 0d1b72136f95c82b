"""FakeTransport: the fakes in process, on a virtual clock, and the failures that only an
in-process peer can produce."""

from __future__ import annotations

import httpx
import pytest
from helpers.wire import AN_HEADERS, OA_HEADERS, an_body, oa_body

from engine.core.clock import VirtualClock
from simulations.fakes import FakeTransport


def test_a_scripted_transport_replays_an_outage_on_virtual_time():
    """A 30 s gateway timeout costs no real time when the loop's clock is virtual."""
    clock = VirtualClock()
    transport = FakeTransport(script=["529", "timeout_504", "ok"], clock=clock)

    async def main() -> list[int]:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://fake", timeout=60
        ) as client:
            return [
                (await client.post("/v1/messages", headers=AN_HEADERS, json=an_body())).status_code
                for _ in range(3)
            ]

    started = clock.now()
    assert clock.run(main()) == [529, 504, 200]
    assert clock.now() - started == pytest.approx(30.0)
    assert [c.fault for c in transport.calls()] == ["overloaded", "timeout_504", "ok"]


def test_the_read_timeout_fires_on_virtual_time():
    clock = VirtualClock()
    transport = FakeTransport(script=["read_timeout"], clock=clock)

    async def main() -> None:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://fake", timeout=10
        ) as client:
            await client.post("/v1/chat/completions", headers=OA_HEADERS, json=oa_body())

    started = clock.now()
    with pytest.raises(httpx.ReadTimeout):
        clock.run(main())
    assert clock.now() - started == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("connect_refused", httpx.ConnectError),
        ("dns_failure", httpx.ConnectError),
        ("tls_failure", httpx.ConnectError),
        ("connect_timeout", httpx.ConnectTimeout),
    ],
)
async def test_failures_before_the_connection_are_connect_errors(fault, error):
    transport = FakeTransport(script=[fault])
    async with httpx.AsyncClient(
        transport=transport, base_url="http://fake", timeout=httpx.Timeout(1, connect=0.01)
    ) as client:
        with pytest.raises(error):
            await client.post("/v1/messages", headers=AN_HEADERS, json=an_body())


async def test_a_transport_and_its_log_share_one_app_with_a_server():
    """Several clients (or a server and a transport) can serve from one FakeApp."""
    first = FakeTransport(script=["529"])
    second = FakeTransport(app=first.app)
    async with httpx.AsyncClient(transport=second, base_url="http://fake") as client:
        response = await client.post("/v1/messages", headers=AN_HEADERS, json=an_body())
    assert response.status_code == 529 and len(first.calls()) == 1
