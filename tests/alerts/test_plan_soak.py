"""The fault plan is the oracle: the demo's 15-minute incident plan played for four cycles on a
virtual clock through the real chains, scheduler and receiver, with a scheduler restart inside
an outage and a late spool file inside another (tests/helpers/plan_soak.py). What the incidents,
alerts, notifications, console and weekly report say must be what the plan injected."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pandas as pd
import pytest
from helpers.alert_harness import SlackStandIn
from helpers.plan_soak import START, Injected, PlanSoak

from engine.config.alerting import INCIDENT_SETTLE_S
from engine.published.read import PublishedData
from engine.reports.week import build_week

SETTLE = timedelta(seconds=INCIDENT_SETTLE_S)
MINUTE = timedelta(minutes=1)
# The longest a breaker keeps a target out after its fault ended: an account fault's hold.
HOLD = timedelta(minutes=5)


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    receiver = SlackStandIn()
    url = receiver.start()
    soak = PlanSoak(tmp_path_factory.mktemp("soak"), receiver_url=url)
    soak.run()
    soak.receiver = receiver
    yield soak
    soak.close()
    receiver.stop()


@pytest.fixture(scope="module")
def incidents(soak) -> pd.DataFrame:
    return pd.DataFrame(
        soak.query(
            "SELECT incident_id, target, family, started_at, ended_at, requests_affected "
            "FROM incidents ORDER BY started_at, target"
        ),
        columns=["incident_id", "target", "family", "started_at", "ended_at", "affected"],
    )


def _matching(incidents: pd.DataFrame, fault: Injected) -> pd.DataFrame:
    """The incidents of the fault's target and family that overlap it."""
    same = incidents[(incidents["target"] == fault.target) & (incidents["family"] == fault.family)]
    return same[
        (same["started_at"] < fault.end + SETTLE)
        & (same["ended_at"].isna() | (same["ended_at"] > fault.start))
    ]


def test_the_soak_had_its_restart_and_its_late_file(soak):
    assert soak.restarts == 1
    assert soak.requests > 5000
    late = soak.query(
        "SELECT count(*) FROM attempts WHERE started_at >= $lo AND started_at < $hi",
        {"lo": START + timedelta(minutes=34), "hi": START + timedelta(minutes=36)},
    )
    assert late[0][0] > 0, "the held-back attempts were ingested once handed over"


def test_each_injected_fault_is_exactly_one_incident_of_its_target_and_family(soak, incidents):
    for fault in soak.injected:
        found = _matching(incidents, fault)
        assert len(found) == 1, (fault, found)
    assert len(incidents) == len(soak.injected), "no incident the plan did not inject"


def test_each_incident_starts_within_a_minute_and_ends_within_settle_and_a_minute(soak, incidents):
    for fault in soak.injected:
        [row] = _matching(incidents, fault).itertuples()
        assert abs(row.started_at - fault.start) <= MINUTE, (fault, row)
        assert row.ended_at is not None and not pd.isna(row.ended_at), (fault, row)
        assert fault.end - MINUTE <= row.ended_at <= fault.end + SETTLE + MINUTE, (fault, row)


def test_each_incidents_requests_affected_are_the_attempts_ground_truth(soak, incidents):
    """Counted again from the raw attempts, in plain Python: the requests that started in the
    incident's minutes, whose route's primary is its target or that tried it, no request
    fault, and that its target did not answer."""
    rows = soak.query(
        "SELECT request_id, route, target, started_at, outcome, served, decision, attempt_number "
        "FROM attempts ORDER BY request_id, attempt_number"
    )
    primaries = {name: route.targets[0].name for name, route in soak.config.routes.items()}
    requests: dict[str, dict] = {}
    for request_id, route, target, started, outcome, served, decision, _ in rows:
        r = requests.setdefault(
            request_id,
            {"route": route, "first": started, "tried": set(), "by": None, "own_fault": False},
        )
        r["first"] = min(r["first"], started)
        if outcome != "skipped":
            r["tried"].add(target)
        if served and outcome == "success":
            r["by"] = target
        r["own_fault"] |= decision == "fail_fast"
    for row in incidents.itertuples():
        lo, hi = row.started_at, row.ended_at
        expected = sum(
            1
            for r in requests.values()
            if lo <= r["first"].replace(second=0, microsecond=0) < hi
            and (primaries[r["route"]] == row.target or row.target in r["tried"])
            and not r["own_fault"]
            and r["by"] != row.target
        )
        assert row.affected == expected, row


def _targets_of(soak, subject: str) -> set[str]:
    """An alert's subject as the targets it is about: a route's targets, or the target itself
    (a credential alert names its key after it)."""
    route = soak.config.routes.get(subject)
    if route is not None:
        return {t.name for t in route.targets}
    return {subject.split(" (")[0]}


def test_no_alert_fires_without_an_injected_cause(soak):
    """Each alert fired while a fault the plan injected on one of its targets lasted, or while
    the breakers still kept that target out after it (an account fault's hold)."""
    alerts = soak.query("SELECT rule, subject, fired_at FROM alerts ORDER BY fired_at")
    assert alerts
    for rule, subject, fired_at in alerts:
        window = timedelta(hours=1) if rule.endswith("-1h") else timedelta(minutes=5)
        causes = [
            f
            for f in soak.injected
            if f.target in _targets_of(soak, subject)
            and f.start <= fired_at <= f.end + HOLD + window
        ]
        assert causes, (rule, subject, fired_at)


def test_no_breaker_open_alert_for_holds_no_longer_than_its_threshold(soak):
    assert soak.query("SELECT * FROM alerts WHERE rule = 'breaker-open'") == []


def test_every_key_refusal_has_its_credential_alert_and_its_incident(soak, incidents):
    refused = [f for f in soak.injected if f.family == "account"]
    credential = soak.query("SELECT fired_at FROM alerts WHERE rule = 'credential'")
    assert len(credential) == len(refused)
    for fault, (fired_at,) in zip(refused, sorted(credential), strict=True):
        assert fault.start <= fired_at <= fault.start + MINUTE
        assert len(_matching(incidents, fault)) == 1


def test_no_receiver_is_told_the_same_thing_twice_across_the_restart(soak):
    told = Counter((d.body["event"], d.body["alert"]["alert_id"]) for d in soak.receiver.got)
    assert told and max(told.values()) == 1, told.most_common(3)
    fired = {a for (event, a) in told if event == "firing"}
    assert fired == {a for (a,) in soak.query("SELECT alert_id FROM alerts")}


def test_the_console_says_each_incident_start_and_end_once_restart_and_late_file_included(soak):
    started = [line for _, line in soak.said if line.startswith("incident started")]
    ended = [line for _, line in soak.said if line.startswith("incident ended")]
    assert len(started) == len(set(started)) == len(soak.injected)
    assert len(ended) == len(soak.injected)
    fired = [line.split(":")[1] for _, line in soak.said if line.startswith("alert fired")]
    assert len(fired) == len(soak.query("SELECT * FROM alerts"))


def test_the_weekly_report_lists_exactly_the_injected_incidents(soak):
    data = PublishedData(soak.paths.published)
    try:
        report = build_week(data, f"{START:%G-W%V}", as_of=soak.end)
    finally:
        data.close()
    listed = sorted(zip(report.incidents["target"], report.incidents["family"], strict=True))
    assert listed == sorted((f.target, f.family) for f in soak.injected)
    assert all(report.incidents["alerts"] != ""), "every incident has the alert that told of it"
