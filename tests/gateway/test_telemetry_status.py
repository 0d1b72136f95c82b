"""The gateway's /metrics and /v1/status show its recorder: written, waiting, lost, failing."""

from __future__ import annotations

from pathlib import Path

import httpx

from engine.core.paths import DataPaths

from .conftest import GatewayFactory, user

OPENAI_PATH = "/v1/chat/completions"


def ask(url: str) -> None:
    body = {"model": "support", "max_tokens": 64, "messages": user()}
    assert httpx.post(url + OPENAI_PATH, json=body).status_code == 200


def metric(text: str, name: str) -> float:
    [value] = [float(line.split()[-1]) for line in text.splitlines() if line.split()[:1] == [name]]
    return value


def test_metrics_and_status_show_what_the_recorder_wrote(gateway: GatewayFactory, tmp_path: Path):
    paths = DataPaths(tmp_path / "data")
    gw = gateway({"support": ["gpt/gpt-4o-mini"]}, record_to=paths)
    ask(gw.url)
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()  # the flusher may have written it already: either way, one row

    text = httpx.get(gw.url + "/metrics").text
    assert metric(text, "switchover_recorder_written_total") == 1.0
    assert metric(text, "switchover_recorder_dropped_total") == 0.0
    assert metric(text, "switchover_recorder_failed_flushes_total") == 0.0
    assert metric(text, "switchover_recorder_buffered") == 0.0
    assert metric(text, "switchover_recorder_failing") == 0.0
    assert metric(text, "switchover_recorder_last_flush_timestamp_seconds") > 0

    telemetry = httpx.get(gw.url + "/v1/status").json()["telemetry"]
    assert telemetry["recording"] is True and telemetry["destination"] == str(paths.spool)
    assert (telemetry["written"], telemetry["dropped"], telemetry["buffered"]) == (1, 0, 0)
    assert telemetry["failing"] is False and telemetry["last_error"] is None
    assert telemetry["last_flush_at"] is not None


def test_a_recorder_that_cannot_write_shows_as_failing_with_its_attempts_waiting(
    gateway: GatewayFactory, tmp_path: Path
):
    paths = DataPaths(tmp_path / "data")
    paths.root.mkdir()
    paths.spool.write_text("a file where the spool folder should be")
    gw = gateway({"support": ["gpt/gpt-4o-mini"]}, record_to=paths)
    ask(gw.url)
    assert gw.sw.recorder is not None
    gw.sw.recorder.flush()

    text = httpx.get(gw.url + "/metrics").text
    assert metric(text, "switchover_recorder_failed_flushes_total") >= 1
    assert metric(text, "switchover_recorder_failing") == 1.0
    assert metric(text, "switchover_recorder_buffered") == 1.0
    assert metric(text, "switchover_recorder_written_total") == 0.0

    ask(gw.url)
    text = httpx.get(gw.url + "/metrics").text
    assert metric(text, "switchover_recorder_buffered") == 2.0

    telemetry = httpx.get(gw.url + "/v1/status").json()["telemetry"]
    assert telemetry["failing"] is True and telemetry["buffered"] == 2
    assert telemetry["last_error"].startswith("FileExistsError")


def test_a_gateway_that_records_nothing_says_so(gateway: GatewayFactory):
    gw = gateway({"support": ["gpt/gpt-4o-mini"]})
    assert httpx.get(gw.url + "/v1/status").json()["telemetry"] == {"recording": False}
    assert "switchover_recorder_written_total 0.0" in httpx.get(gw.url + "/metrics").text
