"""The dashboard's Live page over a published folder: how long its first render takes (a new
session: nothing cached) and a refresh (the 5 s rerun, after the reads' cache has expired, with
the process's snapshot reader kept), through Streamlit's AppTest, which runs the page's script
exactly as the server does, without a browser.

    python -m bench.dashboard PUBLISHED_ROOT   # a data folder whose published/ is filled

`bench.scheduler` calls `live_render` on the 10 M-attempt store it builds.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"


@dataclass(frozen=True, slots=True)
class Render:
    first_s: list[float]  # a new session, every cache empty
    refresh_s: list[float]  # a rerun of the same session once the 5 s read cache expired


def live_render(data_root: Path, repeat: int = 5) -> Render:
    """Time the Live page on `data_root` (its `published/` folder)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["SWITCHOVER_DATA_DIR"] = str(data_root)
    first, refresh = [], []
    for _ in range(repeat):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(APP), default_timeout=120)
        started = time.perf_counter()
        at.run()
        first.append(time.perf_counter() - started)
        _check(at)
        st.cache_data.clear()  # the reads' 5 s cache has run out by the next refresh
        started = time.perf_counter()
        at.run()
        refresh.append(time.perf_counter() - started)
        _check(at)
    return Render(first, refresh)


def _check(at: object) -> None:
    exceptions = [e.value for e in at.exception]  # type: ignore[attr-defined]
    if exceptions:
        raise RuntimeError(f"the Live page failed: {exceptions}")
    if not at.metric:  # type: ignore[attr-defined]
        raise RuntimeError("the Live page drew no figures: is anything published?")


def main() -> None:
    render = live_render(Path(sys.argv[1]))
    for name, values in (("first render", render.first_s), ("refresh", render.refresh_s)):
        print(f"{name}: median {statistics.median(values):.3f} s, max {max(values):.3f} s")


if __name__ == "__main__":
    main()
