"""What an on-call person does from the dashboard: silence an alert rule (the Incidents page)
and turn a target off or on again (the Live page). Each action records who took it, as the
sign-in names them (dashboard.sign_in.acting: "dashboard: alice@example.com"): a silence's
`created_by`, a switch's `by`. Nobody signed in, no form: the forms are not drawn at all.

Neither action opens the store. A silence is a request the scheduler takes in
(engine.alerts.silences); a switch goes where the gateways read switches, the same keeper
`switchover targets` writes: Redis when the configuration (`SWITCHOVER_CONFIG`, which
`switchover dashboard --config` sets) has `[state] redis_url`, else the data folder's
`control/targets.json`. Without a configuration, the targets offered are those the last
24 hours' traffic used.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import data, sign_in
from dashboard.auth import CONFIG_ENV
from engine.alerts.silences import request_silence
from engine.core.clock import SystemClock
from engine.core.errors import ConfigError
from engine.runtime.build import build_switches
from engine.state.switches import Switches
from engine.state.switches_file import TargetSwitches

EVERY_ROUTE = "every route"
_SAID = "operator_said"  # what the last action did, said once on the next run
_SEEN = timedelta(hours=24)  # without a configuration: the targets of this much traffic


def silence_form() -> None:
    """Silence a rule for a while, as the person signed in."""
    who = sign_in.acting()
    if who is None:
        return
    with st.form("silence"):
        st.markdown("Silence a rule: it still fires and resolves here, but nobody is notified.")
        cols = st.columns(4)
        rule = cols[0].text_input("Rule", placeholder="fallback-rate-5m")
        subject = cols[1].text_input("Only for (route, target or provider)", placeholder="all")
        hours = cols[2].number_input("For hours", min_value=0.25, max_value=24.0 * 30, value=2.0)
        reason = cols[3].text_input("Reason")
        if st.form_submit_button("Silence") and rule.strip():
            request_silence(
                data.data_paths(),
                rule.strip(),
                duration=timedelta(hours=hours),
                now=datetime.now(UTC),
                subject=subject.strip() or None,
                reason=reason,
                created_by=who,
            )
            st.success(f"Silence requested for {rule}: the scheduler takes it in within seconds.")


@dataclass(frozen=True, slots=True)
class Keeper:
    """Where the switches are kept, and the targets each route may have switched off."""

    build: Callable[[], Switches]
    routes: dict[str, tuple[str, ...]]
    where: str
    problem: str | None = field(default=None)  # the configuration could not be read

    def run(self, work: Callable[[Switches], Awaitable[Any]]) -> Any:
        async def once() -> Any:
            switches = self.build()
            try:
                return await work(switches)
            finally:
                close = getattr(switches, "aclose", None)
                if close is not None:
                    await close()

        return asyncio.run(once())


def keeper() -> Keeper:
    path = os.environ.get(CONFIG_ENV)
    paths = data.data_paths()
    local = Keeper(
        lambda: TargetSwitches(paths.target_switches), _seen_routes(), str(paths.target_switches)
    )
    if not path or not Path(path).exists():
        return local
    try:
        config = data.load_configuration(path, Path(path).stat().st_mtime_ns)
    except ConfigError as error:
        return Keeper(local.build, local.routes, local.where, problem=str(error))
    routes = {name: tuple(t.name for t in r.targets) for name, r in config.routes.items()}
    where = "Redis ([state] redis_url)" if config.state.redis_url else local.where
    return Keeper(lambda: build_switches(config, paths, SystemClock()), routes, where)


def _seen_routes() -> dict[str, tuple[str, ...]]:
    seen = data.query("hour_rollups", since=data.now() - _SEEN)
    if seen.empty:
        return {}
    pairs = seen[["route", "target"]].drop_duplicates().sort_values(["route", "target"])
    return {route: tuple(group["target"]) for route, group in pairs.groupby("route")}


@st.fragment
def target_switches() -> None:
    """The switches in force (who, since when, why) and, for a person signed in, a target
    turned off (after a confirmation) or on again."""
    st.subheader("Operator switches", help="A disabled target is skipped by every gateway")
    kept = keeper()
    if kept.problem is not None:
        st.warning(f"The configuration could not be read ({kept.problem}): switches go to "
                   f"{kept.where}.")  # fmt: skip
    said = st.session_state.pop(_SAID, None)
    if said is not None:
        done, text = said
        (st.success if done else st.warning)(text)
    entries = kept.run(lambda s: s.entries())
    who = sign_in.acting()
    _listing(entries, kept, who)
    if who is not None:
        _disable_form(kept, who)


def _listing(entries: list[dict[str, Any]], kept: Keeper, who: str | None) -> None:
    if not entries:
        st.caption(f"No target is switched off (kept in {kept.where}).")
        return
    v = data.view()
    shown = pd.DataFrame(entries)
    shown["route"] = shown["route"].fillna(EVERY_ROUTE)
    shown["since"] = pd.to_datetime(shown["since"], utc=True)
    st.dataframe(
        v.table(shown, ["target", "route", "kind", "since", "by", "reason"]),
        hide_index=True,
        width="stretch",
        column_config={"since": f"since ({v.tz.key})"},
    )
    if who is None:
        return
    for e in entries:
        if e.get("kind", "disabled") != "disabled":
            continue  # a drill ends itself (or `switchover drill`'s Ctrl-C)
        route = e["route"]
        st.button(
            f"Enable {e['target']} ({f'route {route}' if route else EVERY_ROUTE})",
            key=f"enable {e['target']} {route}",
            on_click=_enable,
            args=(kept, e["target"], route),
            icon=":material/toggle_on:",
        )


def _enable(kept: Keeper, target: str, route: str | None) -> None:
    kept.run(lambda s: s.enable(target, route=route))
    st.session_state[_SAID] = True, f"{target} enabled" + (f" for route {route}." if route else ".")


def _disable_form(kept: Keeper, who: str) -> None:
    targets = sorted({t for ts in kept.routes.values() for t in ts})
    if not targets:
        st.caption("No target to switch off: no route is configured or seen.")
        return
    with st.form("disable_target"):
        st.markdown("**Switch a target off**: every gateway process skips it until enabled.")
        cols = st.columns([3, 2, 3])
        cols[0].selectbox("Target", targets, key="switch_target")
        cols[1].selectbox("Route", [EVERY_ROUTE, *sorted(kept.routes)], key="switch_route")
        cols[2].text_input("Reason", key="switch_reason")
        st.checkbox(
            "Yes: its routes are served by their other targets meanwhile", key="switch_sure"
        )
        st.form_submit_button("Disable", on_click=_disable, args=(kept, who), type="primary")


def _disable(kept: Keeper, who: str) -> None:
    state = st.session_state
    target, chosen = state["switch_target"], state["switch_route"]
    route = None if chosen == EVERY_ROUTE else chosen
    if not state["switch_sure"]:
        state[_SAID] = False, f"{target} not disabled: tick the confirmation first."
        return
    if route is not None and target not in kept.routes.get(route, ()):
        state[_SAID] = False, f"{target} not disabled: route {route} has no such target."
        return
    reason = state["switch_reason"].strip()
    kept.run(lambda s: s.disable(target, route=route, reason=reason, by=who))
    state["switch_sure"] = False
    where = f"route {route}" if route else EVERY_ROUTE
    state[_SAID] = True, f"{target} disabled for {where} by {who}."
