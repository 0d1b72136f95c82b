"""What-if: what would this incident cost with that backup? A scenario from the library (or edited),
from our own recorded traffic (a date range and an outage described), or a recorded incident
replayed (the Incidents page links here with its id); backup candidates and a traffic scale. The run
is a job in a process of its own (simulations.whatif.job), which this page starts and polls: the
dashboard's server never simulates, so the other viewers' pages stay as fast as they are, and a run
outlives a reload. The results are in stores of their own under data/simulations/, never mixed with
live data, and said honestly (simulations.whatif.results, simulations.whatif.report): failing
candidates first and in red, with the cause; extra cost that adds up; headroom against the rate
limits at the run's scale; latency within its noise as ≈ 0."""

from __future__ import annotations

import os
import tomllib
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import charts, data, widgets
from engine.config import load_config
from engine.config.alerting import parse_duration
from engine.core.errors import ConfigError
from engine.core.fault_families import describe
from simulations.whatif import from_store
from simulations.whatif import job as jobs
from simulations.whatif.arrivals import arrivals
from simulations.whatif.report import (
    calibration_text,
    headroom_warnings,
    scale_notice,
    sentence,
    table_rows,
)
from simulations.whatif.results import Comparison
from simulations.whatif.scenario import library, parse_scenario, slug
from simulations.whatif.scenario_toml import to_toml

SCALES = {"1 %": 0.01, "10 %": 0.1, "25 %": 0.25, "100 %": 1.0}
SOURCES = ("the library", "our traffic", "an incident")
SIMULATED_PER_S = 8_000  # until a job has run here: docs/benchmarks.md, "Simulator"
POLL_S = 1.0  # how often a running job's progress is read
CONFIG_ENV = "SWITCHOVER_CONFIG"  # the routes to simulate, as the gateway reads them


def _saved_dir() -> Path:
    return data.data_paths().root / "scenarios"


def _choices() -> dict[str, str]:
    """Scenario name → its TOML text: the library's, then the ones saved here."""
    found = {}
    for path in [*library(), *sorted(_saved_dir().glob("*.toml"))]:
        text = path.read_text()
        name = tomllib.loads(text).get("name", path.stem)
        found[name] = text
    return found


def _config_path() -> Path | None:
    """switchover.toml ($SWITCHOVER_CONFIG, else the working folder's); on demo data without
    one, the demo's routes."""
    from simulations.demo.up import DEMO_CONFIG

    path = Path(os.environ.get(CONFIG_ENV, "switchover.toml"))
    if path.exists():
        return path
    return DEMO_CONFIG if data.is_demo() else None


@st.cache_data(ttl=60, show_spinner="Reading the recorded traffic…", max_entries=16)
def _from_store(path: str, changed: float, kind: str, **what) -> str:
    """A scenario built from the published snapshots (simulations.whatif.from_store), as TOML to
    show and edit; `changed` (the configuration's mtime) keys the cache."""
    config = load_config(Path(path))
    if kind == "incident":
        built = from_store.scenario_from_incident(data.published(), config, what["incident_id"])
    else:
        outage = from_store.Outage(
            what["target"], what["start_s"], what["length_s"], what["fault"], what["rate"]
        )
        built = from_store.scenario_from_traffic(
            data.published(), config, what["start"], what["end"], outage=outage
        )
    return to_toml(built)


def _library() -> tuple[str, str]:
    choices = _choices()
    name = st.selectbox("Scenario", list(choices), key="whatif_scenario")
    return name, choices[name]


def _our_traffic(v: data.View, path: Path) -> tuple[str, str]:
    """A date range of our traffic (in the sidebar's zone) and the outage to inject, by
    default over the busiest stretch of the range (the worst time to lose a target)."""
    config = load_config(path)
    targets = list(dict.fromkeys(t.name for r in config.routes.values() for t in r.targets))
    today = v.now.astimezone(v.tz).date()
    cols = st.columns(4)
    days = cols[0].date_input(f"Recorded traffic ({v.tz.key})", (today - timedelta(days=1), today),
                              key="whatif_days")  # fmt: skip
    first, last = (days[0], days[-1]) if isinstance(days, tuple) and days else (today, today)
    start = datetime.combine(first, time(), v.tz).astimezone(UTC)
    end = min(datetime.combine(last + timedelta(days=1), time(), v.tz).astimezone(UTC), v.now)
    recorded = data.query("traffic_minute", since=start, until=end)
    if recorded.empty or not recorded["requests"].sum():
        st.info(
            f"No recorded traffic from {v.stamp(start)} to {v.stamp(end)} ({v.tz.key}): "
            "the store keeps 35 days."
        )
        st.stop()
    target = cols[1].selectbox("Fails", targets, key="whatif_outage_target")
    fault = cols[2].selectbox("How", from_store.OUTAGE_KINDS, key="whatif_outage_kind")
    rate = cols[3].slider(
        "Share of its calls", 5, 100, 100, 5, format="%d %%", key="whatif_outage_rate"
    )
    when = st.columns(4)
    length = when[0].text_input("For", "30m", key="whatif_outage_for")
    length_s = parse_duration(length)
    if not length_s:
        st.error('Say how long the outage lasts as a duration: "2h", "45m".')
        st.stop()
    busiest = _busiest(recorded, start, end, length_s).astimezone(v.tz)
    day = when[1].date_input(
        "Starting on",
        busiest.date(),
        min_value=first,
        max_value=last,
        key=f"whatif_outage_day_{first}_{last}",
    )
    at = when[2].time_input(
        f"at ({v.tz.key})", busiest.time(), step=60, key=f"whatif_outage_at_{first}_{last}"
    )
    begins = datetime.combine(day, at, v.tz).astimezone(UTC)
    when[3].caption(f"By default over the busiest {length} of the range, from {v.stamp(busiest)}.")
    text = _from_store(
        str(path),
        path.stat().st_mtime,
        "traffic",
        start=start,
        end=end,
        target=target,
        fault=fault,
        rate=rate / 100,
        start_s=(begins - start).total_seconds(),
        length_s=length_s,
    )
    return tomllib.loads(text)["name"], text


def _busiest(recorded: pd.DataFrame, start: datetime, end: datetime, length_s: float) -> datetime:
    """The start of the `length_s` with the most recorded requests in [start, end)."""
    minutes = max(1, round((end - start).total_seconds() / 60))
    per_minute = [0] * minutes
    for bucket, requests in zip(recorded["bucket"], recorded["requests"], strict=True):
        i = int((bucket.to_pydatetime() - start).total_seconds() // 60)
        if 0 <= i < minutes:
            per_minute[i] += int(requests)
    width = max(1, min(minutes, round(length_s / 60)))
    sums = [sum(per_minute[:width])]
    for i in range(width, minutes):
        sums.append(sums[-1] + per_minute[i] - per_minute[i - width])
    return start + timedelta(minutes=max(range(len(sums)), key=sums.__getitem__))


def _an_incident(v: data.View, path: Path) -> tuple[str, str]:
    """A recorded incident, the one in the address when the Incidents page sent us here."""
    incidents = data.query("replayable_incidents", since=None)
    if incidents.empty:
        st.info(
            "No incident to replay yet: one can be replayed once it has ended and the "
            "scheduler has published its minutes."
        )
        st.stop()
    labels = {
        row.incident_id: f"{describe(row.target, row.family)} · {v.stamp(row.started_at)} "
        f"({v.tz.key}) · {(row.ended_at - row.started_at).total_seconds() / 60:,.0f} min"
        for row in incidents.itertuples()
    }
    asked = st.query_params.get("incident")
    ids = list(labels)
    index = ids.index(asked) if asked in labels else 0
    chosen = st.selectbox(
        "Incident", ids, index=index, format_func=labels.get, key="whatif_incident"
    )
    text = _from_store(str(path), path.stat().st_mtime, "incident", incident_id=chosen)
    return tomllib.loads(text)["name"], text


@st.cache_data(max_entries=32, show_spinner=False)
def _requests(text: str, scale: float) -> int:
    """The requests one run of the scenario sends (a week's traffic takes seconds to draw)."""
    return len(arrivals(parse_scenario(tomllib.loads(text)).scaled(scale)))


def _rate(root: Path) -> float:
    """Simulated requests a second, wall time included, of the largest recent job here (a
    small one's time is mostly the process starting and the stores' set-up)."""
    measured = []
    for job in jobs.recent(root):
        comparison = job.comparison()
        seconds = (job.updated_at - job.started_at).total_seconds()
        if comparison is not None and seconds > 0:
            runs = [comparison.baseline, *comparison.candidates]
            measured.append((sum(r.requests for r in runs), seconds))
    if not measured:
        return SIMULATED_PER_S
    requests, seconds = max(measured)
    return requests / seconds


def _current(root: Path) -> jobs.JobStatus | None:
    """The job this page shows: the one in its address (a reload keeps it), the one this
    session started, else any running (started by another viewer, or before a restart)."""
    chosen = st.query_params.get("job") or st.session_state.get("whatif_job")
    folder = jobs.jobs_dir(root) / chosen if chosen else None
    if folder is not None and (folder / "status.json").exists():
        return jobs.status(folder)
    job = jobs.running(root)
    if job is not None:  # kept for this session: its result is shown once it is over
        st.session_state["whatif_job"] = job.id
    return job


@st.fragment(run_every=POLL_S)
def _progress(folder: Path) -> None:
    """A running job's progress, read from its folder every POLL_S; the whole page reruns to
    draw the results once it is over."""
    job = jobs.status(folder)
    if job.over:
        st.rerun()
    elapsed = (datetime.now(UTC) - job.started_at).total_seconds()
    st.progress(
        job.share,
        text=f"Simulating {job.title} in its own process: {job.doing}, "
        f"{job.share:.0%} after {elapsed:,.0f} s",
    )
    if st.button("Stop", key="whatif_stop"):
        jobs.stop(folder)
        st.rerun()
    partial = job.partial()
    if partial is not None and partial.candidates:
        st.caption(
            f"Done so far: the baseline and {len(partial.candidates)} candidate"
            f"{'s' if len(partial.candidates) > 1 else ''}; the others join them as they finish."
        )
        for run in partial.ranked():
            said = sentence(partial, run, data.view().tz)
            (st.error if partial.failing(run) else st.success)(said)
        st.dataframe(_in_red(partial, _table(partial)), hide_index=True, width="stretch")


def _table(comparison: Comparison) -> pd.DataFrame:
    """The command line's cells (simulations.whatif.report.table_rows), a run a row."""
    rows = table_rows(comparison)
    return pd.DataFrame({(name.strip() or "run"): cells for name, *cells in rows})


def _in_red(comparison: Comparison, table: pd.DataFrame):
    failing = {c.label for c in comparison.candidates if comparison.failing(c)}
    return table.style.apply(
        lambda row: [f"color: {charts.FAILED}" if row["run"] in failing else ""] * len(row),
        axis=1,
    )


def _results(comparison: Comparison, job: jobs.JobStatus, v: data.View) -> None:
    st.subheader(f"Results: {comparison.scenario}")
    seconds = (job.updated_at - job.started_at).total_seconds()
    st.caption(
        f"Run at {v.stamp(job.started_at)} ({v.tz.key}) with {job.scale * 100:g} % of the "
        f"scenario's traffic, in {seconds:,.0f} s. Failing candidates first."
    )
    calibrated = calibration_text(comparison)
    if calibrated and comparison.calibration is not None and comparison.calibration.trusted:
        st.info(calibrated, icon=":material/verified:")
    elif calibrated:
        st.error(calibrated, icon=":material/report:")
    notice = scale_notice(comparison)
    if notice:
        st.warning(notice, icon=":material/zoom_out:")
    for run in comparison.ranked():
        said = sentence(comparison, run, v.tz)
        if comparison.failing(run):
            st.error(said, icon=":material/error:")
        else:
            st.success(said, icon=":material/check_circle:")
    for line in headroom_warnings(comparison, v.tz):
        st.warning(line, icon=":material/speed:")
    st.dataframe(_in_red(comparison, _table(comparison)), hide_index=True, width="stretch")
    ranked = comparison.ranked()
    names = ("price difference", "cache loss", "re-warm", "wasted")
    parts = pd.DataFrame(
        [
            (run.label, name, float(value))
            for run in ranked
            for name, value in zip(names, _parts(comparison, run), strict=True)
        ],
        columns=["run", "part", "usd"],
    )
    st.plotly_chart(
        charts.stacked(
            parts,
            "run",
            "usd",
            "part",
            "Extra cost by candidate, against the baseline",
            "USD",
            unit="usd",
        ),
        width="stretch",
    )
    series = pd.DataFrame(
        [(run.label, pd.Timestamp(b), r) for run in ranked for b, r in run.fallback_by_minute],
        columns=["run", "bucket", "fallback_rate"],
    )
    st.plotly_chart(
        charts.lines_by(
            series.assign(bucket=v.local(series["bucket"])),
            "bucket",
            "fallback_rate",
            "run",
            "Fallback rate over time",
            "share of requests",
        ),
        width="stretch",
    )


def _parts(comparison: Comparison, run) -> tuple:
    p = comparison.parts(run)
    return p.price_difference_usd, p.cache_loss_usd, p.rewarm_usd, p.wasted_usd


st.title("What-if")
st.caption(
    "Replays a scenario's traffic through the real chain, breakers and retries on a virtual "
    "clock: once without the incident (the baseline), once per backup candidate with it. "
    "It runs in a process of its own: leave the page and come back, the run goes on."
)
v = data.view()
root = data.data_paths().root
source = widgets.one_of(
    "Scenario from",
    SOURCES,
    default="an incident" if st.query_params.get("incident") else "the library",
    key="whatif_source",
)
config_path = None if source == "the library" else _config_path()
if source != "the library" and config_path is None:
    st.info(
        f"Which routes to simulate? Put switchover.toml in the dashboard's folder, or name "
        f"it in ${CONFIG_ENV}."
    )
    st.stop()
try:
    if source == "the library":
        name, built = _library()
    elif source == "our traffic":
        name, built = _our_traffic(v, config_path)  # type: ignore[arg-type]
    else:
        name, built = _an_incident(v, config_path)  # type: ignore[arg-type]
except ConfigError as exc:
    st.error(f"No scenario from the store: {exc}")
    st.stop()
text = st.text_area(
    "Scenario (TOML; edit freely)", built, height=260, key=f"whatif_text_{slug(name)}"
)
try:
    scenario = parse_scenario(tomllib.loads(text), source=name)
except (ConfigError, tomllib.TOMLDecodeError) as exc:
    st.error(f"This scenario cannot run: {exc}")
    st.stop()
st.markdown(scenario.description)

known = sorted(
    {*scenario.backups, *(t.name for r in scenario.config.routes.values() for t in r.targets[1:])}
)
cols = st.columns([3, 2, 1])
backups = cols[0].multiselect(
    "Backup candidates",
    known,
    default=list(scenario.backups) or known,
    key=f"whatif_backups_{slug(name)}",
)
extra = cols[0].text_input(
    "Another backup (any provider/model genai-prices knows)",
    placeholder="groq/llama-3.3-70b-versatile",
    key="whatif_extra",
)
scale_label = widgets.one_of(
    "Traffic", list(SCALES), default="100 %", key="whatif_scale", where=cols[1]
)
scale = SCALES[scale_label]
candidates = [*backups, *([extra.strip()] if extra.strip() else [])]
runs = 1 + len(candidates) + (scenario.recorded is not None)  # a replay: as recorded too
requests = _requests(text, scale) * runs
cols[1].caption(f"{requests:,} simulated requests, about {requests / _rate(root):,.0f} s")
if scale < 1:
    cols[1].caption(
        f"Limits are compared at {scale_label} of their value, and the run cannot "
        "reach them: see the notice with the results."
    )
if cols[2].button("Save scenario", key="whatif_save"):
    folder = _saved_dir()
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{slug(scenario.name)}.toml"
    saved.write_text(text)
    st.success(f"Saved as {saved}")

busy = jobs.running(root)
if busy is not None:
    st.caption(f"A simulation is running ({busy.title}): one at a time on this machine.")
if st.button("Run", type="primary", disabled=not candidates or busy is not None, key="whatif_run"):
    started = jobs.start(root, jobs.JobSpec(scenario.name, text, tuple(candidates), scale))
    st.session_state["whatif_job"] = st.query_params["job"] = started.name
    st.rerun()

job = _current(root)
if job is None:
    st.info("Choose backups and press Run.")
    st.stop()
if job.state == "running":
    _progress(job.folder)
    st.stop()
comparison = job.comparison()
if comparison is None:
    st.error(f"{job.title}: {job.error}")
    st.stop()
_results(comparison, job, v)
