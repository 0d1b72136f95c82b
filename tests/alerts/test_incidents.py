"""Incidents: the primary down for 10 minutes inside an hour is one incident of that target,
with the right bounds and the cost a hand computation gives from the attempts."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY, World, at, config

from engine.alerts.incidents import RECOVERY, IncidentPolicy
from engine.core.pricing import Pricer
from engine.published.read import PublishedData

CENT_FRACTION = Decimal("0.000001")


@pytest.fixture(scope="module")
def outage(tmp_path_factory):
    """09:00–10:00 healthy (the primary's cache baseline), 10:00–11:00 with the primary
    answering 529 from 10:20 to 10:30; a scheduler cycle every minute."""
    world = World(tmp_path_factory.mktemp("incident"), config([], rules=[]), per_minute=6)
    try:
        world.minutes(80)
        world.primary_fails("overloaded", minutes=10)
        world.minutes(10)
        world.transport.app.cache.clear()  # the 5-minute cache TTL lapsed during the outage
        world.minutes(30)
        incidents = world.query("SELECT * FROM incidents")
        columns = [d[0] for d in world.pipeline.con.description]
        attempts = world.pipeline.con.execute("SELECT * FROM attempts").df()
        yield world, [dict(zip(columns, row, strict=True)) for row in incidents], attempts
    finally:
        world.close()


SETTLE = IncidentPolicy().settle


def test_a_ten_minute_outage_is_exactly_one_incident_ending_its_settle_time_after(outage):
    _, incidents, attempts = outage
    assert [(i["scope"], i["subject"], i["family"]) for i in incidents] == [
        ("target", f"claude/{PRIMARY}", "availability")
    ]
    [incident] = incidents
    assert (incident["target"], incident["provider"]) == (f"claude/{PRIMARY}", "claude")
    assert abs(incident["started_at"] - at(80)) <= timedelta(minutes=1)
    last_529 = attempts[attempts["http_status"] == 529]["started_at"].max()
    assert abs(last_529 - at(90)) <= timedelta(minutes=1)
    assert incident["ended_at"] == last_529 + SETTLE
    assert incident["routes"] == "support"
    assert incident["peak_fault_rate"] == 1.0
    assert incident["top_error"].startswith("overloaded (529)")
    assert incident["fault_attempts"] == (attempts["http_status"] == 529).sum()


def _minutes(incident: dict) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The incident's window as the whole minutes its figures are counted over."""
    return incident["started_at"], pd.Timestamp(incident["ended_at"]).ceil("min")


def _served(attempts: pd.DataFrame) -> pd.DataFrame:
    return attempts[attempts["served"] & (attempts["outcome"] == "success")]


def test_its_impact_counts_match_the_attempts(outage):
    _, [incident], attempts = outage
    lo, hi = _minutes(incident)
    first = attempts.sort_values("attempt_number").groupby("request_id").first()
    in_window = first[(first["started_at"] >= lo) & (first["started_at"] < hi)].index
    served = _served(attempts).set_index("request_id")
    by_primary = served[served["fallback_depth"] == 0].index
    assert incident["requests"] == len(in_window)
    assert incident["requests_affected"] == len(set(in_window) - set(by_primary))
    assert incident["answered_by_fallback"] == incident["requests_affected"]
    assert incident["failed"] == 0
    assert incident["requests_affected"] == incident["answered_by_fallback"] + incident["failed"]


def test_its_costs_match_a_hand_computation(outage):
    _, [incident], attempts = outage
    pricer = Pricer()
    lo, hi = _minutes(incident)
    primary = pricer.unit_prices("anthropic", PRIMARY, lo)

    # The primary's cache-hit ratio for the hour: its successes in the 24 h before.
    hour = lo.replace(minute=0, second=0, microsecond=0)
    healthy = _served(attempts)
    healthy = healthy[(healthy["fallback_depth"] == 0) & (healthy["started_at"] < hour)]
    tokens = healthy[["input_tokens", "cache_read_tokens", "cache_write_tokens"]].sum()
    h = Decimal(float(tokens["cache_read_tokens"] / tokens.sum()))
    assert h > Decimal("0.5"), "the system prompt is cached on the primary"

    premium = cache_loss = Decimal(0)
    served = _served(attempts)
    backup = served[
        (served["fallback_depth"] > 0) & (served["started_at"] >= lo) & (served["started_at"] < hi)
    ]
    for row in backup.itertuples():
        total_in = row.input_tokens + row.cache_read_tokens + row.cache_write_tokens
        on_primary = (
            total_in * (1 - h) * primary.input
            + total_in * h * primary.cache_read
            + row.output_tokens * primary.output
        )
        premium += Decimal(row.cost_usd) - on_primary
        cache_loss += total_in * h * (primary.input - primary.cache_read)
    assert len(backup) > 40
    assert abs(incident["fallback_premium_usd"] - premium) < CENT_FRACTION
    assert abs(incident["cache_loss_usd"] - cache_loss) < CENT_FRACTION
    assert incident["price_difference_usd"] == (
        incident["fallback_premium_usd"] - incident["cache_loss_usd"]
    )

    failed = attempts[
        (attempts["outcome"] != "success")
        & (attempts["started_at"] >= lo)
        & (attempts["started_at"] < hi)
    ]
    assert incident["wasted_usd"] == sum(Decimal(c) for c in failed["cost_usd"].fillna(0))

    # Re-warm: primary successes in the recovery period, in minutes its route was served more
    # by backups than by the primary over the 5 minutes before.
    minute = served["started_at"].dt.floor("min")
    rewarm = Decimal(0)
    after = served[(served["fallback_depth"] == 0) & (served["started_at"] >= lo)]
    after = after[after["started_at"] < hi + RECOVERY]
    for row in after.itertuples():
        m = row.started_at.floor("min")
        recent = served[(minute >= m - timedelta(minutes=5)) & (minute < m)]
        if (recent["fallback_depth"] > 0).sum() > (recent["fallback_depth"] == 0).sum():
            rewarm += row.cache_write_tokens * (primary.cache_write - primary.cache_read)
    assert rewarm > 0, "the primary wrote its cache again after recovering"
    assert incident["rewarm_usd"] == rewarm
    assert incident["extra_cost_usd"] == incident["fallback_premium_usd"] + rewarm


def test_the_incident_is_published_for_the_dashboard_and_reports(outage):
    world, [incident], _ = outage
    published = PublishedData(world.paths.published).query("incidents", since=at(0))
    assert published["incident_id"].tolist() == [incident["incident_id"]]
    assert published["ended_at"].notna().all()
