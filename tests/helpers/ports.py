"""Free loopback ports and waiting for a local server, for tests that start real processes."""

from __future__ import annotations

import socket
import time

import httpx


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 right now."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def wait_for(url: str, deadline: float) -> None:
    """Until `url` answers 200, or AssertionError at `deadline` (time.monotonic)."""
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer")
