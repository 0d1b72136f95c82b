"""Driving the dashboard with AppTest, and reading what it shows."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

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


def dollars(said: str) -> Decimal:
    """The signed amount a person reads in a money figure: "saved $0.19" is -0.19, "cost $0.07
    more" 0.07, "no difference" 0, "-$0.0021" -0.0021."""
    if said == "no difference":
        return Decimal(0)
    found = re.fullmatch(r"(saved |cost )?(-?)\$([\d,]+(?:\.\d+)?)( more)?", said)
    assert found, f"not money as engine.core.money writes it: {said!r}"
    amount = Decimal(found[3].replace(",", ""))
    return -amount if found[1] == "saved " or found[2] == "-" else amount
