"""Running the gateway: `switchover serve` → uvicorn → `app_from_env()` in each worker.

Workers are separate processes started by uvicorn, so everything a worker needs travels in the
environment, and the app is built by a factory from it:

    SWITCHOVER_CONFIG          path of switchover.toml
    SWITCHOVER_DATA_DIR        runtime folder; attempts spool to its spool/ (engine.core.paths), or
                               go to PostgreSQL when the config's [state] postgres_url is set
    SWITCHOVER_GATEWAY_KEYS    comma-separated keys callers must present (x-api-key or
                               Authorization: Bearer); none: any caller, loopback only. An
                               entry `label:secret` labels its key (attempts record the
                               label, [[budgets]] key = "label" caps it); a bare `secret` has
                               no label (so a key holding ':' needs a label)
    SWITCHOVER_MAX_BODY_MB     request body limit (default 32)
    PROMETHEUS_MULTIPROC_DIR   set by `serve` when workers > 1 (see observability.py)

`serve` refuses to start on a non-loopback address without gateway keys, and checks the
configuration (and that every provider's key is set) once, before any worker starts. Workers
share their breakers through Redis (`[state] redis_url`), else through the data folder's SQLite
file; `serve` says which it is, and a store that does not answer yet is only a warning (each
worker then falls back to its memory).

What a caller may cost travels in uvicorn's own configuration, which uvicorn hands to every
worker: `uvicorn_options` builds it from [gateway] (the guarded protocol, its timeouts and
connection cap; engine.gateway.protocol), for `serve` and the tests alike. `serve` first raises
the soft descriptor limit to the hard one, and derives each worker's connection cap from it.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from engine.config import GatewayConfig, load_config
from engine.core.errors import ConfigError
from engine.core.paths import DATA_DIR_ENV, DataPaths
from engine.gateway.admin import ADMIN_KEYS_ENV
from engine.gateway.app import DEFAULT_MAX_BODY_BYTES, GatewaySettings, create_app
from engine.gateway.observability import MULTIPROC_ENV
from engine.gateway.protocol import LOOP_FACTORY, ConnectionLimits, GuardedHttpToolsProtocol

log = logging.getLogger("switchover.gateway")

CONFIG_ENV = "SWITCHOVER_CONFIG"
KEYS_ENV = "SWITCHOVER_GATEWAY_KEYS"
MAX_BODY_ENV = "SWITCHOVER_MAX_BODY_MB"
KEY_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # as a budget's name
APP_FACTORY = "engine.gateway.server:app_from_env"

GRACEFUL_SHUTDOWN_S = 30  # requests in flight at a stop get this long to finish
RESERVED_DESCRIPTORS = 128  # the listener, logs, spool files, Redis, PostgreSQL, the loop's own
MIN_CONNECTIONS = 16
DERIVED_CONNECTIONS_CAP = 16_384  # a derived cap, not an explicit one: bounds the memory too
MAX_BACKLOG = 2048  # uvicorn's default


def gateway_keys(
    environ: Mapping[str, str] | None = None, variable: str = KEYS_ENV
) -> frozenset[str]:
    """The keys callers present: the secrets of SWITCHOVER_GATEWAY_KEYS (labels taken off), or
    the bare keys of another `variable` (the admin keys)."""
    if variable == KEYS_ENV:
        return frozenset(key_labels(environ))
    environ = os.environ if environ is None else environ
    return frozenset(k.strip() for k in environ.get(variable, "").split(",") if k.strip())


def key_labels(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """SWITCHOVER_GATEWAY_KEYS as secret → label (None: a bare key). Split at the first ':';
    several keys may share a label (a key being rotated), a key may not have two. Errors name
    the entry by its place, never by its text: it holds a secret."""
    environ = os.environ if environ is None else environ
    entries = [e.strip() for e in environ.get(KEYS_ENV, "").split(",") if e.strip()]
    keys: dict[str, str | None] = {}
    for place, entry in enumerate(entries, start=1):
        named, colon, rest = entry.partition(":")
        if colon and (not KEY_LABEL.fullmatch(named.strip()) or not rest.strip()):
            raise ConfigError(
                f"{KEYS_ENV}: entry {place} is not label:secret (a label is letters, digits, "
                "'.', '_' or '-'; the secret is not empty)"
            )
        label, secret = (named.strip(), rest.strip()) if colon else (None, entry)
        if keys.get(secret, label) != label:
            raise ConfigError(f"{KEYS_ENV}: entry {place} gives a key a second label")
        keys[secret] = label
    return keys


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
    labelled = key_labels(environ)
    return GatewaySettings(
        keys=frozenset(labelled),
        labels={key: label for key, label in labelled.items() if label is not None},
        max_body_bytes=limit,
        admin_keys=gateway_keys(environ, ADMIN_KEYS_ENV),
    )


def descriptor_limit(*, raise_soft: bool = True) -> int:
    """The soft limit on open files, first raised to the hard limit where the system allows
    (the usual soft default, 1,024, is far below what a gateway holding callers needs)."""
    try:
        import resource
    except ImportError:  # not a Unix: no such limit to read or raise
        return 8 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if raise_soft and soft != hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            log.info("could not raise the open-file limit from %d to %d", soft, target)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def max_connections_for(descriptors: int) -> int:
    """Connections one worker may hold: each request in flight also holds a connection to a
    provider, so half of what is left once the gateway's own files are counted."""
    derived = (descriptors - RESERVED_DESCRIPTORS) // 2
    return min(DERIVED_CONNECTIONS_CAP, max(MIN_CONNECTIONS, derived))


def listen_backlog(max_connections: int) -> int:
    """asyncio accepts up to the backlog in one go, before any of those connections can be
    refused or displace another: a quarter of the cap keeps such a burst (and the victims it
    displaces, closed an iteration later) within the descriptors the cap leaves free; at
    least 128 queue for a burst of callers."""
    return min(MAX_BACKLOG, max(128, max_connections // 4))


def connection_limits(gateway: GatewayConfig, descriptors: int) -> ConnectionLimits:
    return ConnectionLimits(
        header_timeout_s=gateway.header_timeout_s,
        max_connections=gateway.max_connections or max_connections_for(descriptors),
    )


def uvicorn_options(gateway: GatewayConfig, *, descriptors: int) -> dict[str, Any]:
    """uvicorn's settings for [gateway], every limit explicit (docs/deployment.md, "Limits and
    timeouts"). They travel inside uvicorn's Config to each worker: the protocol's limits are
    bound to its class with a partial, and the loop factory is named by its import path."""
    limits = connection_limits(gateway, descriptors)
    return {
        "http": functools.partial(GuardedHttpToolsProtocol, limits=limits),
        "loop": LOOP_FACTORY,
        "ws": "none",  # no WebSocket routes: an upgrade is answered as plain HTTP
        "timeout_keep_alive": gateway.keep_alive_timeout_s,
        "backlog": listen_backlog(limits.max_connections),
        "limit_concurrency": None,  # max_connections, in the protocol, does it better
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
    }


def app_from_env() -> Starlette:
    """uvicorn's factory: the whole gateway of one worker, from the environment."""
    from engine.runtime.switchover import Switchover

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
    descriptors = descriptor_limit()
    log.info(
        "each worker holds up to %d connections (open-file limit %d)",
        connection_limits(cfg.gateway, descriptors).max_connections,
        descriptors,
    )
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
            **uvicorn_options(cfg.gateway, descriptors=descriptors),
        )
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _say_where_breakers_live(redis_url: str | None, workers: int) -> None:
    """Once, before any worker starts: Redis (every host), else the data folder's SQLite file
    (the workers of this host; engine.state.breaker_sqlite), or, when that file cannot be used, each
    worker's memory. `serve` has set the data folder in the environment already."""
    if redis_url is None:
        from engine.state.breaker_sqlite import check_usable

        path = DataPaths.default().breaker_states
        problem = check_usable(path)
        if problem is None:
            log.info("breakers shared by this host's gateway processes through %s", path)
        elif workers > 1:
            log.warning(
                "%s: each of the %d workers keeps its own breakers until it can be used, so a "
                "failing provider is called and probed once per worker",
                problem,
                workers,
            )
        else:
            log.warning("%s: breakers kept in memory until it can be used", problem)
        return
    from engine.state.breaker_redis import check_reachable

    problem = check_reachable(redis_url)
    if problem is None:
        log.info("breakers shared through Redis ([state] redis_url)")
    else:
        log.warning("%s: workers keep breakers in memory until it answers", problem)
