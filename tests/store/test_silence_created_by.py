"""Migration 16: a silence says who asked for it (`created_by`); silences stored before it, and
requests written before it, say nobody and are still taken in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from engine.alerts.silences import inbox, ingest_silences, request_silence
from engine.core.paths import DataPaths
from engine.store import migrations, open_store
from engine.store.migrations import MIGRATIONS

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _before_16(monkeypatch: pytest.MonkeyPatch) -> None:
    older = tuple(m for m in MIGRATIONS if m.version < 16)
    monkeypatch.setattr(migrations, "MIGRATIONS", older)
    monkeypatch.setattr(migrations, "LATEST", older[-1].version)


def test_a_silence_stored_before_migration_16_says_nobody_asked(db_path, monkeypatch):
    _before_16(monkeypatch)
    con = open_store(db_path)
    con.execute(
        "INSERT INTO alert_silences VALUES ('old', 'breaker-open', NULL, $at, $at, '', $at)",
        {"at": NOW},
    )
    con.close()
    monkeypatch.undo()
    con = open_store(db_path)
    rows = con.execute("SELECT silence_id, created_by FROM alert_silences").fetchall()
    assert rows == [("old", None)]
    con.close()


def test_a_silence_asked_for_carries_who_into_the_store(store, tmp_path):
    paths = DataPaths(tmp_path / "data")
    request_silence(
        paths,
        "fallback-rate-5m",
        duration=timedelta(hours=2),
        now=NOW,
        reason="known outage",
        created_by="dashboard: alice@example.com",
    )
    assert ingest_silences(store, paths) == 1
    rows = store.execute("SELECT rule, reason, created_by FROM alert_silences").fetchall()
    assert rows == [("fallback-rate-5m", "known outage", "dashboard: alice@example.com")]


def test_a_request_written_before_migration_16_is_still_taken_in(store, tmp_path):
    paths = DataPaths(tmp_path / "data")
    old = {
        "silence_id": "abc123",
        "rule": "breaker-open",
        "subject": None,
        "starts_at": NOW.isoformat(),
        "ends_at": (NOW + timedelta(hours=1)).isoformat(),
        "reason": "",
        "created_at": NOW.isoformat(),
    }  # no created_by: the body as it was
    inbox(paths).mkdir(parents=True)
    (inbox(paths) / "abc123.json").write_text(json.dumps(old))
    assert ingest_silences(store, paths) == 1
    rows = store.execute("SELECT silence_id, created_by FROM alert_silences").fetchall()
    assert rows == [("abc123", None)]
