"""The telemetry rule kinds: attempts held back from the store (telemetry_lag) and attempts a
recorder discarded (telemetry_loss), from the spool folder and the telemetry health tables the
scheduler keeps (engine.store.telemetry)."""

from __future__ import annotations

from engine.alerts.context import PROCESS_GONE_AFTER, Context, Observation, window_text
from engine.config.alerting import Rule
from engine.telemetry.breaker_events import EVENTS_DIR

__all__ = ["telemetry_lag", "telemetry_loss"]


def telemetry_lag(rule: Rule, ctx: Context) -> list[Observation]:
    """How long attempts have been held back from the store, by each cause that holds them:
    files waiting to be ingested, a spool that cannot be written (the scheduler's probe,
    engine.store.telemetry), recorders whose writes keep failing (their status files). The
    figure is the longest; the summary names every cause above the threshold."""
    causes = [c for c in (_waiting_files(ctx), _spool_check(ctx), *_failing(ctx)) if c]
    causes = [(age, text) for age, text in causes if age > rule.threshold]
    if not causes:
        return []
    summary = (
        "spool: " + "; ".join(text for _, text in causes) + f" (threshold {rule.threshold:g} s): "
        "attempts wait outside the store, so the dashboard and alerts lag behind"
    )
    return [Observation(rule, "spool", max(age for age, _ in causes), summary)]


def _waiting_files(ctx: Context) -> tuple[float, str] | None:
    oldest: float | None = None
    for folder, suffix in ((ctx.spool_dir, ".parquet"), (ctx.spool_dir / EVENTS_DIR, ".jsonl")):
        try:
            entries = list(folder.iterdir())
        except OSError:  # absent, or not a folder: the spool check says so
            continue
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith(suffix):
                continue
            try:
                mtime = entry.stat().st_mtime
            except FileNotFoundError:  # ingested meanwhile
                continue
            oldest = mtime if oldest is None else min(oldest, mtime)
    if oldest is None:
        return None
    age = ctx.wall() - oldest
    return age, (
        f"the oldest attempt file has waited {age:.0f} s to be ingested: the scheduler is "
        "failing or overloaded"
    )


def _spool_check(ctx: Context) -> tuple[float, str] | None:
    found = ctx.con.execute(
        "SELECT problem, since FROM spool_checks WHERE spool = $spool",
        {"spool": str(ctx.spool_dir)},
    ).fetchone()
    if found is None:
        return None
    problem, since = found
    age = (ctx.now - since).total_seconds()
    return age, f"the spool {ctx.spool_dir} cannot be written since {since:%H:%M} UTC: {problem}"


_FAILING = """
    SELECT host, process_id, buffered, failing_since, last_error FROM recorder_status
    WHERE failing_since IS NOT NULL AND NOT closed AND seen_at >= $alive_since
    ORDER BY failing_since, host, process_id
"""


def _failing(ctx: Context) -> list[tuple[float, str]]:
    """Recorders whose writes fail. One that is failing rewrites its status every flush
    cycle, so a status unchanged for PROCESS_GONE_AFTER belongs to a process that is gone."""
    rows = ctx.con.execute(_FAILING, {"alive_since": ctx.now - PROCESS_GONE_AFTER}).fetchall()
    return [
        (
            (ctx.now - since).total_seconds(),
            f"{buffered} attempts waiting in process {host}/{pid}, whose writes fail since "
            f"{since:%H:%M} UTC ({error})",
        )
        for host, pid, buffered, since, error in rows
    ]


_LOSSES = """
    SELECT host, process_id, sum(dropped)::BIGINT AS dropped,
        string_agg(reason, '; ' ORDER BY observed_at DESC) FILTER (reason IS NOT NULL),
        max(observed_at)
    FROM telemetry_losses WHERE observed_at > $since AND observed_at <= $now
    GROUP BY host, process_id ORDER BY host, process_id
"""


def telemetry_loss(rule: Rule, ctx: Context) -> list[Observation]:
    """Attempts a recorder discarded (its status files, engine.store.telemetry), per process."""
    rows = ctx.con.execute(_LOSSES, {"since": ctx.since(rule), "now": ctx.now}).fetchall()
    fired = []
    for host, pid, dropped, reasons, last in rows:
        if dropped <= rule.threshold:
            continue
        summary = (
            f"{dropped} attempts dropped by {host}/{pid} in the last {window_text(rule)} (last "
            f"seen {last:%H:%M} UTC): {reasons or 'no reason given'}. They never reach the "
            "store: figures, costs and alerts undercount that process"
        )
        fired.append(Observation(rule, f"{host}/{pid}", float(dropped), summary))
    return fired
