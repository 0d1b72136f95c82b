"""dashboard.data.View.table: a frame as a person reads it in a table, which Streamlit hands to
Arrow as it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
import pyarrow as pa

from dashboard.data import View


def test_a_column_that_misses_a_value_is_text_throughout_and_a_latency_reads_in_ms():
    view = View("1 h", timedelta(hours=1), ZoneInfo("UTC"), datetime.now(UTC))
    frame = pd.DataFrame({
        "latency_ms": [1101.7394, None], "http_status": [529.0, None],
        "continued_chars": [1412.0, None], "ratio": [1.5, None], "attempt_number": [1, 2],
    })  # fmt: skip
    shown = view.table(frame, list(frame.columns))
    assert shown.to_dict("list") == {
        "latency_ms": ["1,102 ms", "—"], "http_status": ["529", "—"],
        "continued_chars": ["1,412", "—"], "ratio": ["1.50", "—"], "attempt_number": [1, 2],
    }  # fmt: skip
    pa.Table.from_pandas(shown)  # no column mixes numbers and "—": Arrow takes it as it is
