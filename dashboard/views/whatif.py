"""What-if: what would this incident cost with that backup? Pick (or edit) a scenario, choose
backup candidates, run the simulator (the real chain on a virtual clock, results in a store of
their own under data/simulations/, never mixed with live data) and compare them."""

from __future__ import annotations

import dataclasses
import tomllib

import pandas as pd
import streamlit as st

from dashboard import charts, data
from engine.errors import ConfigError
from simulations.arrivals import arrivals
from simulations.scenario import library, parse_scenario
from simulations.simulate import simulate, slug

SCALES = {"1 %": 0.01, "10 %": 0.1, "25 %": 0.25, "100 %": 1.0}
SIMULATED_PER_S = 8_000  # measured: docs/benchmarks.md, "Simulator"


def _saved_dir():
    return data.data_paths().root / "scenarios"


def _choices() -> dict[str, str]:
    """Scenario name → its TOML text: the library's, then the ones saved here."""
    found = {}
    for path in [*library(), *sorted(_saved_dir().glob("*.toml"))]:
        text = path.read_text()
        name = tomllib.loads(text).get("name", path.stem)
        found[name] = text
    return found


st.title("What-if")
st.caption(
    "Replays a scenario's traffic through the real chain, breakers and retries on a virtual "
    "clock: once without the incident (the baseline), once per backup candidate with it."
)
choices = _choices()
name = st.selectbox("Scenario", list(choices), key="whatif_scenario")
text = st.text_area("Scenario (TOML; edit freely)", choices[name], height=260,
                    key=f"whatif_text_{name}")  # fmt: skip
try:
    scenario = parse_scenario(tomllib.loads(text), source=name)
except (ConfigError, tomllib.TOMLDecodeError) as exc:
    st.error(f"This scenario cannot run: {exc}")
    st.stop()
st.markdown(scenario.description)

known = sorted({*scenario.backups, *(t.name for r in scenario.config.routes.values()
                                     for t in r.targets[1:])})  # fmt: skip
cols = st.columns([3, 2, 1])
backups = cols[0].multiselect("Backup candidates", known, default=list(scenario.backups) or known,
                              key="whatif_backups")  # fmt: skip
extra = cols[0].text_input(
    "Another backup (any provider/model genai-prices knows)",
    placeholder="groq/llama-3.3-70b-versatile",
    key="whatif_extra",
)
scale = SCALES[cols[1].segmented_control("Traffic", list(SCALES), default="100 %",
                                         key="whatif_scale") or "100 %"]  # fmt: skip
scaled = dataclasses.replace(scenario, rate_per_s=scenario.rate_per_s * scale)
candidates = [*backups, *([extra.strip()] if extra.strip() else [])]
requests = len(arrivals(scaled)) * (1 + len(candidates))
cols[1].caption(f"{requests:,} simulated requests, about {requests / SIMULATED_PER_S:,.0f} s")
if cols[2].button("Save scenario", key="whatif_save"):
    folder = _saved_dir()
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / f"{slug(scenario.name)}.toml"
    saved.write_text(text)
    st.success(f"Saved as {saved}")

if st.button("Run", type="primary", disabled=not candidates, key="whatif_run"):
    bar = st.progress(0.0, text="simulating")
    done: dict[str, float] = {}

    def progress(label: str, share: float) -> None:
        done[label] = share
        bar.progress(min(1.0, sum(done.values()) / (1 + len(candidates))), text=f"{label}")

    try:
        st.session_state["whatif_result"] = simulate(
            scaled, candidates, results_dir=data.data_paths().root / "simulations",
            progress=progress,
        )  # fmt: skip
    except ConfigError as exc:
        st.error(str(exc))
    bar.empty()

comparison = st.session_state.get("whatif_result")
if comparison is None:
    st.info("Choose backups and press Run.")
    st.stop()

rows = []
for run in [comparison.baseline, *comparison.candidates]:
    base = run is comparison.baseline
    rows.append({
        "run": run.label, "requests": run.requests, "failed": run.failed,
        "fallback rate": run.fallback_rate, "cost": float(run.cost_usd),
        "extra cost": None if base else float(comparison.extra_cost(run)),
        "price difference": None if base else float(run.price_difference_usd),
        "cache loss": None if base else float(run.cache_loss_usd),
        "re-warm": None if base else float(run.rewarm_usd),
        "wasted": float(run.wasted_usd),
        "added p99 ms": None if base else comparison.added_latency_ms(run, "p99"),
        "backup peak req/min": None if base else run.backup_peak_rpm,
        "req/min limit": None if base else run.backup_rpm_limit,
        "backup peak tokens/min": None if base else run.backup_peak_tpm,
        "tokens/min limit": None if base else run.backup_tpm_limit,
    })  # fmt: skip
table = pd.DataFrame(rows)
st.subheader(f"Results: {comparison.scenario}")
money = st.column_config.NumberColumn(format="$%.2f")
st.dataframe(
    table, hide_index=True, width="stretch",
    column_config={"fallback rate": st.column_config.NumberColumn(format="percent"),
                   **{c: money for c in ("cost", "extra cost", "price difference", "cache loss",
                                         "re-warm", "wasted")}},
)  # fmt: skip
peaks = pd.to_numeric(table["backup peak req/min"], errors="coerce")
limits = pd.to_numeric(table["req/min limit"], errors="coerce")
for run in table.loc[peaks > limits, "run"]:
    st.warning(f"{run}: the backup's peak is over its requests-per-minute limit: it cannot "
               "take the load.")  # fmt: skip
parts = ["price difference", "cache loss", "re-warm", "wasted"]
split = table.iloc[1:].melt(id_vars="run", value_vars=parts, var_name="part", value_name="usd")
left, right = st.columns(2)
left.plotly_chart(charts.stacked(split, "run", "usd", "part", "Extra cost by candidate", "USD"),
                  width="stretch")  # fmt: skip
series = pd.DataFrame(
    [
        (run.label, pd.Timestamp(b), r)
        for run in comparison.candidates
        for b, r in run.fallback_by_minute
    ],
    columns=["run", "bucket", "fallback_rate"],
)
right.plotly_chart(
    charts.lines_by(series.assign(bucket=data.view().local(series["bucket"])), "bucket",
                    "fallback_rate", "run", "Fallback rate over time", "share of requests"),
    width="stretch",
)  # fmt: skip
