"""Driving the dashboard with AppTest, and reading what it shows."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

from streamlit.logger import get_logger
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def open_page(page: str | None = None) -> AppTest:
    """The app, on `page` ("costs", "incidents", "explorer"; None: the landing page)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if page is not None:
        at.switch_page(f"views/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    [value] = [m.value for m in at.metric if m.label == label]
    return value


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("error", "warning", "info", "success"):
        parts += [e.value for e in at.get(kind)]
    return "\n".join(parts)


def open_with_choices(**chosen: str) -> AppTest:
    """The landing page with the sidebar's choices (`window`, `timezone`) already made, as
    they are kept across page changes: after a rerun AppTest no longer lists the sidebar's
    widgets, so a test that needs two choices makes them before the first run."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in chosen.items():
        at.session_state[f"chosen_{key}"] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# Where Streamlit says it had to retype a frame's columns to send it (a column mixing numbers and
# text, say): at INFO, on loggers of its own that do not propagate to the root (pytest's caplog).
_ARROW_LOGGERS = ("streamlit.dataframe_util", "streamlit.elements.widgets.data_editor")


@contextmanager
def arrow_fixes() -> Iterator[list[str]]:
    """What Streamlit logs, while inside, of each frame it could not turn into an Arrow table as
    given ("Serialization of dataframe to Arrow table was unsuccessful", with the ArrowInvalid
    that says which column): the list fills as the app runs."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            error = record.exc_info[1] if record.exc_info else None
            text = f"{record.getMessage()} {type(error).__name__}: {error}"
            if "Arrow" in text:
                said.append(text)

    handler = Keep(logging.DEBUG)
    # Through Streamlit's get_logger: one it creates later would get its level back.
    loggers = [get_logger(name) for name in _ARROW_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield said
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def dollars(said: str) -> Decimal:
    """The signed amount a person reads in a money figure: "saved $0.19" is -0.19, "cost $0.07
    more" 0.07, "no difference" 0, "-$0.0021" -0.0021."""
    if said == "no difference":
        return Decimal(0)
    found = re.fullmatch(r"(saved |cost )?(-?)\$([\d,]+(?:\.\d+)?)( more)?", said)
    assert found, f"not money as engine.core.money writes it: {said!r}"
    amount = Decimal(found[3].replace(",", ""))
    return -amount if found[1] == "saved " or found[2] == "-" else amount
