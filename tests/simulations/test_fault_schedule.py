"""An incident's fault schedule read from its minutes: one fault per stretch of one failing
share, edges in the silences, each recorded failure as the scenario fault that fails alike."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from simulations.whatif.fault_schedule import FaultMinute, faults_of, scenario_kind

T0 = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)
SONNET = "claude/claude-sonnet-4-5"


def minutes(shares, calls=3, *, kind="provider", error="overloaded", seed=1, at=T0):
    """A minute per share: `calls` calls, each failing with that probability (seeded)."""
    rng = random.Random(seed)
    rows = []
    for i, share in enumerate(shares):
        n = calls if share is not None else 0  # None: no call (the breaker kept it out)
        failed = sum(rng.random() < (share or 0) for _ in range(n))
        bucket = at + timedelta(minutes=i)
        rows.append(FaultMinute(bucket, n, failed, kind if failed else None,
                                error if failed else None, failed))  # fmt: skip
    return rows


def schedule(rows, **kwargs):
    return faults_of(SONNET, rows, start=T0, end=T0 + timedelta(hours=4), **kwargs)


def test_a_steady_partial_outage_is_one_fault_at_its_share_not_a_flicker():
    [fault] = schedule(minutes([0.3] * 120, calls=4))
    assert fault.kind == "overloaded" and fault.rate == pytest.approx(0.3, abs=0.05)
    assert fault.end_s - fault.start_s >= 110 * 60


def test_a_full_outage_then_a_partial_one_are_two_faults():
    faults = schedule(minutes([1.0] * 30 + [0.3] * 60, calls=4, seed=3))
    assert [f.rate for f in faults] == [1.0, pytest.approx(0.3, abs=0.08)]
    assert faults[0].end_s == faults[1].start_s == 30 * 60, "split where the share changed"


def test_minutes_without_calls_continue_the_outage_and_its_edges_sit_in_the_silences():
    # Answers until 15:09; failed probes at 15:12, 15:16, ... 15:36 with silent minutes between
    # (an open breaker); silence again until the next answer, at 15:42.
    rows = minutes([0.0] * 10 + [None] * 2 + ([1.0] + [None] * 3) * 7 + [None] * 2 + [0.0] * 5)
    [fault] = schedule(rows)
    assert fault.rate == 1.0
    # Halfway from the end of the last answer's minute (15:10) to the first probe (15:12).
    assert fault.start_s == 11 * 60
    # Halfway from the end of the last probe's minute (15:37) to the next answer (15:42).
    assert fault.end_s == 39 * 60 + 30


def test_a_rate_limit_keeps_its_recorded_retry_after():
    rows = [FaultMinute(T0 + timedelta(minutes=i), 2, 2, "rate_limit", "rate_limit", 2, 20.0)
            for i in range(10)]  # fmt: skip
    [fault] = schedule(rows)
    assert (fault.kind, fault.retry_after_s, fault.rate) == ("rate_limit", 20.0, 1.0)


def test_two_kinds_at_once_share_the_calls_as_the_simulated_provider_tries_them():
    """Half the calls 529, a quarter time out: the second fault meets only the calls the first
    spared, so its rate is a quarter of the calls over the half left (0.5)."""
    rows = []
    for i in range(60):
        bucket = T0 + timedelta(minutes=i)
        rows += [FaultMinute(bucket, 8, 6, "provider", "overloaded", 4),
                 FaultMinute(bucket, 8, 6, "ambiguous", "read_timeout", 2)]  # fmt: skip
    faults = {f.kind: f.rate for f in schedule(rows)}
    assert faults == {"overloaded": 0.5, "timeout": 0.5}


def test_only_the_families_asked_for_are_read():
    rows = minutes([1.0] * 5) + minutes([1.0] * 5, kind="account", error="authentication",
                                        at=T0 + timedelta(minutes=5))  # fmt: skip
    assert {f.kind for f in schedule(rows, kinds=("account",))} == {"auth"}
    assert {f.kind for f in schedule(rows)} == {"auth", "overloaded"}


@pytest.mark.parametrize(
    ("fault_kind", "error_class", "kind"),
    [
        ("provider", "overloaded", "overloaded"),
        ("provider", "server_error", "server_error"),
        ("provider", "unavailable", "server_error"),
        ("provider", "connect", "server_error"),
        ("ambiguous", "read_timeout", "timeout"),
        ("provider", "timeout", "timeout"),
        ("ambiguous", "truncated", "server_error"),
        ("rate_limit", "rate_limit", "rate_limit"),
        ("account", "authentication", "auth"),
        ("account", "quota", "auth"),
        ("request", "invalid_request", None),
        ("drill", "drill", None),
    ],
)
def test_each_recorded_failure_is_the_scenario_fault_that_fails_alike(
    fault_kind, error_class, kind
):
    assert scenario_kind(fault_kind, error_class) == kind


def test_a_full_outage_behind_a_breaker_replays_as_one_not_as_its_busy_first_minute():
    """The demo's Sonnet 529s (issue 34): the outage begins half way through a busy minute, the
    breaker opens, and its probes are the only calls after: one failing call a minute, while
    the route sends the target none of its 60 requests. The routes' held requests are the
    evidence: the outage replays at 100 %, not at the 40 % of its first minute."""
    answering = [FaultMinute(T0 + timedelta(minutes=i), 60, 0, wanted=60) for i in range(5)]
    first = FaultMinute(T0 + timedelta(minutes=5), 40, 16, "provider", "overloaded", 16,
                        wanted=60, held=28)  # fmt: skip
    probes = [FaultMinute(T0 + timedelta(minutes=6 + i), 1, 1, "provider", "overloaded", 1,
                          wanted=60, held=60) for i in range(3)]  # fmt: skip
    after = [FaultMinute(T0 + timedelta(minutes=9 + i), 60, 0, wanted=60) for i in range(5)]
    faults = schedule([*answering, first, *probes, *after])
    assert [f.rate for f in faults] == [pytest.approx(28 / 60, abs=0.001), 1.0]
    assert faults[1].start_s == 6 * 60 and faults[1].end_s == 9 * 60


def test_without_held_requests_the_calls_alone_give_the_share():
    rows = [FaultMinute(T0 + timedelta(minutes=i), 10, 3, "provider", "overloaded", 3)
            for i in range(30)]  # fmt: skip
    [fault] = schedule(rows)
    assert fault.rate == pytest.approx(0.3)
