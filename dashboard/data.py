"""The dashboard's reads: the published snapshots (never the .duckdb file), through one
`PublishedData` per process and a short cache; the breakers as the gateway holds them now
(dashboard.live_breakers); plus what the sidebar chose (window, timezone).

Query parameters are rounded to the minute before they key the cache, so the reruns of one
minute (a refresh every 5 s, several users) share results; the cache lives 5 s, the pace of
the scheduler's cycle. The breakers are read afresh at most every BREAKERS_TTL_S.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd
import streamlit as st

from dashboard import live_breakers
from dashboard.auth import CONFIG_ENV
from engine.config import Config, load_config
from engine.core.errors import ConfigError
from engine.core.formats import MISSING, format_latency
from engine.core.paths import DataPaths
from engine.published.read import PublishedData

WINDOWS: dict[str, timedelta] = {
    "15 min": timedelta(minutes=15),
    "1 h": timedelta(hours=1),
    "6 h": timedelta(hours=6),
    "24 h": timedelta(hours=24),
    "7 d": timedelta(days=7),
}
# Minute rollups and attempts are published for the last 24 h; longer windows read hours.
MINUTE_DATA = timedelta(hours=24)
TIMEZONES = (
    *("UTC", "America/Sao_Paulo", "America/New_York", "America/Los_Angeles", "Europe/London"),
    *("Europe/Berlin", "Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney"),
)
REFRESH_S = 5
# Several users (and the reruns of one) share a reading this young; each refresh gets a new one.
BREAKERS_TTL_S = 2
# `switchover up --demo` writes this file into its data folder (simulations.demo.up.DEMO_MARKER).
DEMO_MARKER = "DEMO"


def data_paths() -> DataPaths:
    return DataPaths.default()


@st.cache_resource
def _published(directory: str) -> PublishedData:
    return PublishedData(Path(directory))


def published() -> PublishedData:
    return _published(str(data_paths().published))


@st.cache_data(ttl=REFRESH_S, show_spinner=False, max_entries=256)
def _query(directory: str, name: str, **params: Any) -> pd.DataFrame:
    return _published(directory).query(name, **params)


def query(name: str, **params: Any) -> pd.DataFrame:
    return _query(str(data_paths().published), name, **params)


@st.cache_data(ttl=REFRESH_S, show_spinner=False, max_entries=64)
def _query_attempts(
    directory: str, since: datetime, until: datetime | None, requests: tuple[Any, ...]
) -> list[pd.DataFrame]:
    asked = [(name, dict(params)) for name, params in requests]
    return _published(directory).query_attempts(since, until, asked)


def query_attempts(
    since: datetime, until: datetime | None, requests: Sequence[tuple[str, dict[str, Any]]]
) -> list[pd.DataFrame]:
    """`query` of each request, from one read of the attempts of [since, until)."""
    frozen = tuple((name, tuple(sorted(params.items()))) for name, params in requests)
    return _query_attempts(str(data_paths().published), since, until, frozen)


def configuration() -> Config | None:
    """The configuration the gateways read (SWITCHOVER_CONFIG, which `switchover dashboard
    --config` sets), read again when the file changes; None without one."""
    path = os.environ.get(CONFIG_ENV)
    if not path or not Path(path).exists():
        return None
    return load_configuration(path, Path(path).stat().st_mtime_ns)


@st.cache_resource(show_spinner=False, max_entries=4)
def load_configuration(path: str, mtime_ns: int) -> Config:
    """The configuration at `path` (`mtime_ns` keys the cache: a changed file is read again);
    raises ConfigError."""
    return load_config(path)


def breakers_now() -> live_breakers.LiveBreakers:
    """Every breaker as the gateway holds it now, or why it could not be read."""
    try:
        config = configuration()
    except ConfigError:
        config = None  # the operator panel says what is wrong with it
    redis_url = config.state.redis_url if config is not None else None
    return _breakers_now(str(data_paths().root), redis_url, live_breakers.gateway_url(os.environ))


@st.cache_data(ttl=BREAKERS_TTL_S, show_spinner=False, max_entries=16)
def _breakers_now(root: str, redis_url: str | None, url: str) -> live_breakers.LiveBreakers:
    return live_breakers.read(DataPaths(Path(root)), redis_url, os.environ)


def manifest() -> dict[str, Any]:
    return published().snapshots()


def is_demo() -> bool:
    return (data_paths().root / DEMO_MARKER).exists()


@dataclass(frozen=True, slots=True)
class View:
    label: str
    window: timedelta
    tz: ZoneInfo
    now: datetime

    @property
    def since(self) -> datetime:
        return (self.now - self.window).replace(second=0, microsecond=0)

    @property
    def grain(self) -> str:
        return "minute" if self.window <= MINUTE_DATA else "hour"

    @property
    def bucket(self) -> timedelta:
        """The length of one bucket at the view's grain."""
        return timedelta(minutes=1) if self.grain == "minute" else timedelta(hours=1)

    def local(self, column: pd.Series) -> pd.Series:
        """UTC timestamps shown in the chosen timezone."""
        return pd.to_datetime(column, utc=True).dt.tz_convert(self.tz)

    def stamp(self, when: Any) -> str:
        if when is None or pd.isna(when):
            return MISSING
        return pd.Timestamp(when).tz_convert(self.tz).strftime("%Y-%m-%d %H:%M")

    def short(self, when: Any) -> str:
        """The time of day for times of the last 12 hours ("12:05"), else the date too."""
        recent = pd.Timestamp(self.now) - pd.Timestamp(when) < pd.Timedelta(hours=12)
        return self.clock(when) if recent else self.stamp(when)

    def clock(self, when: Any, seconds: bool = False) -> str:
        """The time of day only ("12:05", "12:05:23"), for times of the last hours."""
        return pd.Timestamp(when).tz_convert(self.tz).strftime("%H:%M:%S" if seconds else "%H:%M")

    def table(self, frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        """`columns` of `frame` as a person reads them in a table: times in the chosen zone to
        the second ("2026-12-01 13:58:38"), latencies (a column named "…_ms") as
        engine.core.formats writes them ("1,102 ms"), whole numbers without ".0", and "—"
        wherever a value is missing, never None, nan or <NA>. A column that misses a value is
        text throughout, so that none mixes numbers and "—" (Arrow cannot carry that). The
        zone is in the page's caption or the column's name."""
        shown = {}
        for name in columns:
            column = frame[name]
            if pd.api.types.is_datetime64_any_dtype(column):
                local = self.local(column).dt.strftime("%Y-%m-%d %H:%M:%S")
                shown[name] = local.astype(object).where(column.notna(), MISSING)
            elif name.endswith("_ms") and pd.api.types.is_numeric_dtype(column):
                shown[name] = column.map(format_latency)
            elif pd.api.types.is_bool_dtype(column) or not column.isna().any():
                shown[name] = column
            elif pd.api.types.is_numeric_dtype(column):
                known = column.dropna()
                whole = known.eq(known.round()).all()
                said = known.map("{:,.0f}".format if whole else "{:,.2f}".format)
                shown[name] = said.astype(object).reindex(column.index, fill_value=MISSING)
            else:
                shown[name] = column.astype(object).where(column.notna(), MISSING)
        return pd.DataFrame(shown, index=frame.index)


DEFAULTS = {"window": "1 h", "timezone": os.environ.get("SWITCHOVER_TIMEZONE", "UTC")}


def choice(label: str, key: str, options: list[str]) -> None:
    """A sidebar choice that outlives page changes: Streamlit forgets a widget's value in any
    run that does not draw it, so the value is also kept under a key of our own."""
    kept = st.session_state.get(f"chosen_{key}", DEFAULTS[key])

    def keep() -> None:
        st.session_state[f"chosen_{key}"] = st.session_state[key]

    index = options.index(kept) if kept in options else 0
    st.selectbox(label, options, index=index, key=key, on_change=keep)


def now() -> datetime:
    """The dashboard's clock: the "now" every page reads its window back from. One seam, so
    that a test views its data as of the moment it was published, however long the suite."""
    return datetime.now(UTC)


def view() -> View:
    """What the sidebar chose (app.py draws it), as of now."""
    label = st.session_state.get("window") or st.session_state.get("chosen_window", "1 h")
    tz = st.session_state.get("timezone") or st.session_state.get(
        "chosen_timezone", DEFAULTS["timezone"]
    )
    return View(label, WINDOWS[label], ZoneInfo(tz), now())


def as_of(v: View) -> datetime:
    """The time the published data reaches (now at the latest): the start of the scheduler
    cycle that took in the spool, which the recent attempts are stamped with. "The last 5 min"
    count back from it, so that the wait for the next cycle never reads as a drop."""
    snapshots = manifest()
    published = snapshots.get("recent_attempts") or snapshots.get("rollup_minute")
    return v.now if published is None else min(v.now, published.written_at)


def rollups(v: View, **filters: Any) -> pd.DataFrame:
    """The window's rollups at the view's grain."""
    return query(f"{v.grain}_rollups", since=v.since, **filters)


def empty_state() -> None:
    st.info(
        "No data yet. Start the demo with `make run`, or send requests through the gateway "
        "(`switchover serve`) with `switchover scheduler` running: attempts appear here "
        "within seconds.",
        icon=":material/hourglass_empty:",
    )
