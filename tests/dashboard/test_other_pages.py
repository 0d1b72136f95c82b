"""Costs, Incidents & alerts and Explorer on the fixture dataset: no exception, the numbers
equal ones computed from the attempts, and the widgets change what is shown."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal

import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY
from helpers.dashboard_pages import (
    arrow_fixes,
    dollars,
    metric,
    open_page,
    open_with_choices,
    texts,
)

from dashboard import data
from dashboard.definitions import define
from engine.alerts.incidents import IncidentPolicy
from engine.core.money import format_usd
from engine.published.read import PublishedData

from .conftest import OUTAGE


def _since(window: timedelta) -> pd.Timestamp:
    return pd.Timestamp((data.now() - window).replace(second=0, microsecond=0))


def test_costs_add_up_to_the_attempts_costs(app_env):
    _, attempts, _ = app_env
    at = open_page("costs")
    hour = attempts[attempts["started_at"] >= _since(timedelta(hours=1))]
    cost = sum((Decimal(c) for c in hour["cost_usd"].dropna()), Decimal(0))
    assert metric(at, "Cost") == format_usd(cost)
    failed = hour[hour["outcome"] != "success"]
    wasted = sum((Decimal(c) for c in failed["cost_usd"].dropna()), Decimal(0))
    assert metric(at, "Wasted spend") == format_usd(wasted)
    assert metric(at, "Fallback premium").startswith(("saved $", "cost $", "no difference"))
    assert len(at.get("plotly_chart")) == 2


def test_the_fallback_premium_is_its_price_difference_plus_its_cache_loss_as_shown(app_env):
    """One precision for the three, a saving said as a saving, and the parts as shown adding
    up to the premium as shown."""
    at = open_page("costs")
    shown = [metric(at, label) for label in ("Fallback premium", "of which price difference",
                                             "of which cache loss")]  # fmt: skip
    premium, price, cache_loss = (dollars(said) for said in shown)
    assert premium == price + cache_loss, shown
    assert cache_loss > 0, "the primary's cached prompt was lost in the outage"
    assert price < 0 and shown[1].startswith("saved $"), "GPT-4.1 mini is cheaper than Sonnet"


def test_the_table_of_costs_shares_one_precision(app_env):
    at = open_page("costs")
    [table] = at.dataframe
    decimals = {len(text.partition(".")[2]) for text in table.value["cost_usd"]}
    assert len(decimals) == 1 and all(t.startswith("$") for t in table.value["cost_usd"])


def test_splitting_costs_by_provider_lists_the_providers(app_env):
    at = open_page("costs")
    [table] = at.dataframe
    assert list(table.value.columns) == ["route", "cost_usd"]
    at.segmented_control(key="cost_split").set_value("Provider").run()
    [table] = at.dataframe
    assert set(table.value["provider"]) == {"claude", "gpt"}


def test_clicking_the_chosen_split_again_keeps_the_costs_split_by_it(app_env):
    """A segmented control deselects its option when the chosen one is clicked again: the page
    keeps that choice rather than failing on none (the window as the user had it, 24 h)."""
    at = open_with_choices(window="24 h")
    at.switch_page("views/costs.py").run()
    at.segmented_control(key="cost_split").set_value(None).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.segmented_control(key="cost_split").value == "Route"
    assert list(at.dataframe[0].value.columns) == ["route", "cost_usd"]
    at.segmented_control(key="cost_split").set_value("Provider").run()
    at.segmented_control(key="cost_split").set_value(None).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.segmented_control(key="cost_split").value == "Provider", "the previous choice"
    assert set(at.dataframe[0].value["provider"]) == {"claude", "gpt"}


@pytest.mark.parametrize(
    ("page", "key", "default"),
    [("incidents", "incident_range", "7 d"), ("whatif", "whatif_source", "the library"),
     ("whatif", "whatif_scale", "100 %")],
)  # fmt: skip
def test_no_segmented_control_is_ever_left_without_a_choice(app_env, page, key, default):
    at = open_page(page)
    at.segmented_control(key=key).set_value(None).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.segmented_control(key=key).value == default


def test_the_outage_is_listed_with_its_impact_and_the_alerts_it_raised(app_env):
    _, attempts, start = app_env
    at = open_page("incidents")
    incidents = at.dataframe[0].value
    assert list(incidents["what"]) == [f"claude/{PRIMARY} failing (5xx, 529, timeouts)"]
    began = start + timedelta(minutes=OUTAGE[0])
    assert incidents["started_at"].iloc[0] == f"{began:%Y-%m-%d %H:%M:%S}", "UTC, to the second"
    served = attempts[attempts["served"] & (attempts["outcome"] == "success")]
    by_backup = served[served["fallback_depth"] > 0]
    [incident] = PublishedData(app_env[0].published).query("incidents", since=start).itertuples()
    last_529 = attempts[attempts["http_status"] == 529]["started_at"].max()
    assert abs(last_529 - (start + timedelta(minutes=OUTAGE[1]))) <= timedelta(minutes=1)
    assert incident.ended_at == last_529 + IncidentPolicy().settle
    lo, hi = incident.started_at, pd.Timestamp(incident.ended_at).ceil("min")
    first = attempts.groupby("request_id")["started_at"].min()
    in_window = set(first[(first >= lo) & (first < hi)].index)
    answered_by_backup = in_window & set(by_backup["request_id"])
    assert metric(at, "Answered by fallback") == f"{len(answered_by_backup):,}"
    [alerts] = [d.value for d in at.dataframe if "rule" in d.value.columns]
    assert "fallback-rate-5m" in set(alerts["rule"])
    [summary] = alerts[alerts["rule"] == "fallback-rate-5m"]["summary"].head(1)
    assert "backups' prices $" in summary and "saved" not in summary, summary
    assert "Where the traffic went" in str([c.proto for c in at.get("plotly_chart")])


def test_the_incidents_extra_cost_is_its_premium_and_re_warm_and_its_premium_its_parts(app_env):
    """Extra cost = fallback premium + re-warm, premium = price difference + cache loss: each
    identity holds as shown, at one precision, and the figures are the incident's."""
    paths, _, start = app_env
    at = open_page("incidents")
    [incident] = PublishedData(paths.published).query("incidents", since=start).itertuples()
    labels = ("Extra cost", "Fallback premium", "of which price difference",
              "of which cache loss", "Re-warm")  # fmt: skip
    shown = {label: metric(at, label) for label in labels}
    extra, premium, price, cache_loss, rewarm = (dollars(shown[label]) for label in labels)
    assert extra == premium + rewarm and premium == price + cache_loss, shown
    decimals = {said.partition("$")[2].partition(".")[2].split(" ")[0] for said in shown.values()
                if said != "no difference"}  # fmt: skip
    assert len({len(d) for d in decimals}) == 1, f"one precision: {shown}"
    unit = Decimal(1).scaleb(-len(decimals.pop()))
    assert abs(extra - Decimal(str(incident.extra_cost_usd))) <= unit / 2, shown
    assert abs(cache_loss - Decimal(str(incident.cache_loss_usd))) < unit, shown
    assert cache_loss > 0 and price < 0, "a cheaper backup, and the primary's cache lost"
    assert shown["of which price difference"].startswith("saved $"), "a saving said as one"
    assert metric(at, "Wasted") == format_usd(incident.wasted_usd)


def test_a_silence_asked_for_on_the_page_reaches_the_control_folder(app_env):
    paths, _, _ = app_env
    at = open_page("incidents")
    [rule] = [t for t in at.text_input if t.label == "Rule"]
    rule.set_value("latency-p99")
    [reason] = [t for t in at.text_input if t.label == "Reason"]
    reason.set_value("load test tonight")
    at.button[0].click().run()
    assert not at.exception
    requests = list((paths.control / "silences").glob("*.json"))
    assert len(requests) == 1 and "latency-p99" in requests[0].read_text()
    requests[0].unlink()


def test_a_request_id_shows_its_chain_of_attempts(app_env):
    _, attempts, _ = app_env
    counts = attempts.groupby("request_id").size()
    recent = attempts[attempts["started_at"] >= _since(timedelta(hours=24))]
    request_id = next(r for r in recent["request_id"] if counts[r] == 3)
    at = open_page("explorer")
    at.text_input(key="rid").set_value(request_id).run()
    assert not at.exception
    chain = at.dataframe[0].value
    assert list(chain["attempt_number"]) == [1, 2, 3]
    assert "answered by **gpt/gpt-4.1-mini**" in texts(at)


@pytest.mark.parametrize("page", [None, "costs", "incidents", "readiness", "explorer", "whatif"])
def test_no_table_mixes_numbers_with_text_in_a_column(app_env, page):
    """Streamlit logs an ArrowInvalid and retypes the frame when a column mixes numbers and "—":
    a table of a page never makes it."""
    with arrow_fixes() as fixed:
        open_page(page)
    assert fixed == []


@pytest.mark.parametrize("page", [None, "costs", "incidents", "readiness"])
def test_money_in_a_metric_has_room_for_its_figure(app_env, page):
    """A metric too narrow for its figure cuts it off ("cost $0.0…"): an amount has a quarter
    of the page at least, a difference said in words ("cost $0.0022 more") a third."""
    at = open_page(page)
    said = [(m.label, m.value, c.weight) for c in at.columns for m in c.metric if "$" in m.value]
    assert said, "the page shows money"
    narrow = [(label, value, weight) for label, value, weight in said
              if weight < (1 / 3 if " " in value else 1 / 4) - 1e-9]  # fmt: skip
    assert narrow == []


def test_an_attempts_latency_reads_in_milliseconds_with_the_thousands_marked(app_env):
    _, attempts, _ = app_env
    recent = attempts[attempts["started_at"] >= _since(timedelta(hours=1))]
    with arrow_fixes() as fixed:
        at = open_page("explorer")
        at.text_input(key="rid").set_value(recent["request_id"].iloc[-1]).run()
    shown = at.dataframe[0].value["latency_ms"]
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})* ms", said) for said in shown), list(shown)
    assert fixed == []


def test_filtering_attempts_by_outcome_counts_what_matches(app_env):
    _, attempts, _ = app_env
    at = open_page("explorer")
    at.multiselect(key="f_outcome").set_value(["error"]).run()
    hour = attempts[attempts["started_at"] >= _since(timedelta(hours=1))]
    errors = (hour["outcome"] == "error").sum()
    assert f"{errors:,} attempts in the last 1 h match" in texts(at)
    assert set(at.dataframe[-1].value["outcome"]) == {"error"}


def test_every_metric_shown_has_the_definition_from_metrics_md_as_its_tooltip(app_env):
    for page in (None, "costs", "incidents"):
        at = open_page(page)
        for m in at.metric:
            assert m.proto.help, f"{m.label} has no tooltip"
            assert m.proto.help in {define(k) for k in _DEFINED}, m.label


_DEFINED = ("requests", "availability", "fallback rate", "latency p50 / p95 / p99", "cost",
            "fallback premium", "answered", "re-warm cost", "wasted spend", "price difference",
            "cache loss", "requests affected", "answered by fallback", "unavailable",
            "extra cost", "re-warm", "wasted", "incidents in the period", "ongoing incidents",
            "alerts fired in the period", "requests affected by all incidents",
            "failed in all incidents", "extra cost of all incidents")  # fmt: skip


def test_without_data_every_page_says_how_to_send_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(tmp_path / "empty"))
    for page in (None, "costs", "incidents", "explorer"):
        at = open_page(page)
        assert "No data yet" in texts(at) and "make run" in texts(at)


def test_times_are_shown_in_the_timezone_chosen(app_env):
    """The same attempts, their times read in UTC and then in São Paulo (UTC−3, no summer
    time): three hours apart, to the second."""
    at = open_page("explorer")
    in_utc = pd.to_datetime(at.dataframe[-1].value["started_at"])
    at = open_page()
    at.selectbox(key="timezone").set_value("America/Sao_Paulo").run()
    at.switch_page("views/explorer.py").run()
    assert not at.exception
    in_sao_paulo = pd.to_datetime(at.dataframe[-1].value["started_at"])
    assert list(in_utc - in_sao_paulo) == [pd.Timedelta(hours=3)] * len(in_utc)


def test_costs_say_the_window_their_figures_are_over(app_env):
    at = open_page("costs")
    said = [c.value for c in at.caption if c.value.startswith("Every figure here is over")]
    assert len(said) == 1, said
    found = re.fullmatch(r"Every figure here is over the last 1 h: (.{16}) – (.{16}) \(UTC\)\.",
                         said[0])  # fmt: skip
    assert found, said
    since, until = (datetime.strptime(t, "%Y-%m-%d %H:%M") for t in found.groups())
    assert timedelta(minutes=59) <= until - since <= timedelta(minutes=60), said
