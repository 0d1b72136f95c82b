"""Breaker-store fixtures: a real `redis-server` on a free loopback port, one per session.

The server keeps nothing on disk (`--save '' --appendonly no`). Without the binary the Redis
tests are skipped on a workstation, saying why, and fail in CI (CI=1), which must run them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from redis import Redis
from redis.exceptions import RedisError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_binary() -> str:
    """The redis-server binary; skips the test outside CI and fails it in CI when missing."""
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must run the Redis breaker-store tests", pytrace=False)
        pytest.skip(f"{reason}; CI=1 makes this a failure")
    return binary


class RedisServer:
    """A throwaway redis-server process that can be stopped and started again on its port."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = Redis.from_url(self.url, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return self
                except RedisError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not start on {self.port}") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(redis_binary()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, emptied for this test."""
    client = Redis.from_url(redis_server.url)
    try:
        client.flushdb()
    finally:
        client.close()
    return redis_server.url
