"""How the dashboard is started: `streamlit run dashboard/app.py` with settings that suit a
server (no browser opened, no usage statistics sent, no file watcher, no e-mail prompt), and
never beyond loopback without a sign-in (dashboard.auth): refused before Streamlit starts."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from dashboard.auth import CONFIG_ENV, SECRETS_FILE_ENV, configured, refusal
from engine.core.errors import ConfigError
from engine.core.paths import DATA_DIR_ENV

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def launch(
    *, host: str, port: int, data_dir: Path | None, config: Path, environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The dashboard's command line and environment on `host`. A ConfigError, one line saying
    how to configure a sign-in, when `host` is beyond loopback and none is configured."""
    refused = refusal(host, configured(environ))
    if refused is not None:
        raise ConfigError(refused)
    env = dict(environ)
    if data_dir is not None:
        env[DATA_DIR_ENV] = str(data_dir)
    if config.exists():
        env[CONFIG_ENV] = str(config.resolve())
    command = streamlit_command(host=host, port=port)
    if environ.get(SECRETS_FILE_ENV):  # where Streamlit reads [auth] for st.login
        command += ["--secrets.files", environ[SECRETS_FILE_ENV]]
    return command, env


def streamlit_command(*, host: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "viewer",
    ]  # fmt: skip
