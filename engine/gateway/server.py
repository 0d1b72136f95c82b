"""Running the gateway: `switchover serve` → uvicorn → `app_from_env()` in each worker.

Workers are separate processes started by uvicorn, so everything a worker needs travels in the
environment, and the app is built by a factory from it:

    SWITCHOVER_CONFIG          path of switchover.toml
    SWITCHOVER_DATA_DIR        runtime folder; attempts spool to its spool/ (engine.paths), or
                               go to PostgreSQL when the config's [state] postgres_url is set
    SWITCHOVER_GATEWAY_KEYS    comma-separated keys callers must present (x-api-key or
                               Authorization: Bearer); none: any caller, loopback only
    SWITCHOVER_MAX_BODY_MB     request body limit (default 32)
    PROMETHEUS_MULTIPROC_DIR   set by `serve` when workers > 1 (see observability.py)

`serve` refuses to start on a non-loopback address without gateway keys, and checks the
configuration (and that every provider's key is set) once, before any worker starts. Workers
share their breakers only through Redis (`[state] redis_url`); `serve` says which it is, and a
Redis that does not answer yet is only a warning (each worker then falls back to its memory).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from starlette.applications import Starlette

from engine.config import load_config
from engine.errors import ConfigError
from engine.gateway.admin import ADMIN_KEYS_ENV
from engine.gateway.app import DEFAULT_MAX_BODY_BYTES, GatewaySettings, create_app
from engine.paths import DATA_DIR_ENV, DataPaths

log = logging.getLogger("switchover.gateway")

CONFIG_ENV = "SWITCHOVER_CONFIG"
KEYS_ENV = "SWITCHOVER_GATEWAY_KEYS"
MAX_BODY_ENV = "SWITCHOVER_MAX_BODY_MB"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
APP_FACTORY = "engine.gateway.server:app_from_env"


def gateway_keys(
    environ: Mapping[str, str] | None = None, variable: str = KEYS_ENV
) -> frozenset[str]:
    environ = os.environ if environ is None else environ
    return frozenset(k.strip() for k in environ.get(variable, "").split(",") if k.strip())


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, keys: frozenset[str]) -> None:
    """ConfigError (one line) when the gateway would listen beyond this machine unguarded."""
    if not keys and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve on {host} without gateway keys: set {KEYS_ENV} "
            "(comma-separated), or listen on 127.0.0.1"
        )


def settings_from_env(environ: Mapping[str, str] | None = None) -> GatewaySettings:
    environ = os.environ if environ is None else environ
    raw = environ.get(MAX_BODY_ENV, "").strip()
    try:
        limit = int(float(raw) * 1024 * 1024) if raw else DEFAULT_MAX_BODY_BYTES
    except ValueError:
        raise ConfigError(f"{MAX_BODY_ENV}: not a number: {raw!r}") from None
    if limit <= 0:
        raise ConfigError(f"{MAX_BODY_ENV}: must be positive")
    return GatewaySettings(
        keys=gateway_keys(environ),
        max_body_bytes=limit,
        admin_keys=gateway_keys(environ, ADMIN_KEYS_ENV),
    )


def app_from_env() -> Starlette:
    """uvicorn's factory: the whole gateway of one worker, from the environment."""
    from engine.switchover import Switchover

    if not logging.getLogger().handlers:  # a spawned worker starts with no logging set up
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per provider call is noise
    config = load_config(os.environ.get(CONFIG_ENV, "switchover.toml"))
    sw = Switchover(config, record_to=DataPaths.default())
    return create_app(sw, settings_from_env(), owns=True)


def serve(
    *,
    config: Path,
    host: str = "127.0.0.1",
    port: int = 8787,
    workers: int = 1,
    data_dir: Path | None = None,
    max_body_mb: float | None = None,
    log_level: str = "info",
) -> None:
    """Check everything that can be checked once, then run uvicorn until interrupted.
    Raises ConfigError for a bad configuration or an unguarded public address."""
    import uvicorn

    keys = gateway_keys()
    check_bind(host, keys)
    cfg = load_config(config)
    for provider in cfg.providers.values():
        provider.api_key()  # ConfigError naming the unset variable
    os.environ[CONFIG_ENV] = str(config.resolve())
    if data_dir is not None:
        os.environ[DATA_DIR_ENV] = str(data_dir.resolve())
    if max_body_mb is not None:
        os.environ[MAX_BODY_ENV] = str(max_body_mb)
    settings_from_env()  # a bad size fails here, not in every worker
    if not keys:
        log.warning("no %s set: any caller on this machine may use the gateway", KEYS_ENV)
    if not cfg.routes:
        log.warning("%s defines no routes: /readyz reports not ready", config)
    _say_where_breakers_live(cfg.state.redis_url, workers)
    metrics_dir = None
    if workers > 1 and not os.environ.get(MULTIPROC_ENV):
        metrics_dir = tempfile.mkdtemp(prefix="switchover-metrics-")
        os.environ[MULTIPROC_ENV] = metrics_dir
    try:
        uvicorn.run(
            APP_FACTORY,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            timeout_graceful_shutdown=30,
        )
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _say_where_breakers_live(redis_url: str | None, workers: int) -> None:
    if redis_url is None:
        if workers > 1:
            log.warning(
                "%d workers without [state] redis_url: each keeps its own breakers, so a failing "
                "provider is called and probed once per worker",
                workers,
            )
        return
    from engine.breaker_redis import check_reachable

    problem = check_reachable(redis_url)
    if problem is None:
        log.info("breakers shared through Redis ([state] redis_url)")
    else:
        log.warning("%s: workers keep breakers in memory until it answers", problem)
