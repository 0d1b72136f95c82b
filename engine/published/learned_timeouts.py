"""The first-token limits a route with `first_token_timeout_s = "learned"` uses, read from the
published target latency (engine.fallback.learned_limits says how a limit follows from them).

`target_latency` holds, per target and hour, the time to first token of its streamed answers at
LEVELS. A target's p99 over the window is the p99 of the hours' mixture (each hour weighted by
its streams), not the largest hourly p99: one slow hour of ten streams should not set the limit
of a day of thousands. The gateway reads them again every `REFRESH_S`; the Live page shows the
same figures as the evidence behind each limit.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from engine.fallback.learned_limits import MIN_STREAMS, LearnedLimit
from engine.published.catalogue import LEVELS
from engine.published.read import PublishedData

__all__ = ["REFRESH_S", "WINDOW", "learn", "read_learned"]

WINDOW = timedelta(hours=24)  # the history a limit is learned from
REFRESH_S = 60.0  # the target latency is republished with the hourly traffic profile


def learn(latency: pd.DataFrame, since: datetime) -> dict[str, LearnedLimit]:
    """Per target with at least MIN_STREAMS streamed answers in `latency` (target_latency rows,
    from `since`): its first-token p99 over them."""
    if latency.empty:
        return {}
    rows = latency[(latency["streams"] > 0) & latency["ttft_ms"].notna()]
    limits = {}
    for target, hours in rows.groupby("target", sort=True):
        streams = int(hours["streams"].sum())
        if streams < MIN_STREAMS:
            continue
        p99_ms = _mixture_quantile(list(hours["ttft_ms"]), hours["streams"].to_numpy(), 0.99)
        limits[str(target)] = LearnedLimit(str(target), p99_ms / 1000, streams, since)
    return limits


def read_learned(published: PublishedData, now: datetime) -> dict[str, LearnedLimit]:
    """The limits the published target latency teaches as of `now` (empty without it)."""
    since = now - WINDOW
    try:
        latency = published.query("target_latency", since=since)
    except (KeyError, OSError, ValueError):  # nothing published yet, or mid-write
        return {}
    return learn(latency, since)


def _mixture_quantile(quantiles: list, weights: np.ndarray, level: float) -> float:
    """The `level` quantile of the mixture of distributions each given by its values at
    LEVELS, weighted: every distribution's CDF interpolated on the union of their values."""
    levels = np.asarray(LEVELS)
    curves = [np.maximum.accumulate(np.asarray(q, dtype=float)) for q in quantiles]
    grid = np.unique(np.concatenate(curves))
    cdf = sum(w * np.interp(grid, q, levels) for q, w in zip(curves, weights, strict=True))
    cdf = cdf / weights.sum()
    return float(np.interp(level, cdf, grid))
