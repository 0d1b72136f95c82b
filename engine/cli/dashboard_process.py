"""How the dashboard is started: `streamlit run dashboard/app.py` with settings that suit a
server (no browser opened, no usage statistics sent, no file watcher, no e-mail prompt)."""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


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
