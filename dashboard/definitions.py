"""Every figure's definition, as `docs/metrics.md` words it: the dashboard's tooltips are that
text, so the page and the document cannot drift apart. Read once per process."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

METRICS_MD = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"

_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|")
_BOLD = re.compile(r"^(?:- )?\*\*([^*]+)\*\*(.*)$")


@cache
def definitions() -> dict[str, str]:
    """figure name (lower case) → its definition; the first place a name is defined wins."""
    found: dict[str, str] = {}
    lines = METRICS_MD.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if row := _ROW.match(line):
            name, text = row.group(1).strip("` "), row.group(2)
            if name.lower() in ("figure", "kind") or set(name) <= set("-: "):
                continue
            for part in name.split(","):
                found.setdefault(part.strip().lower(), _plain(text))
        elif bold := _BOLD.match(line):
            text = bold.group(2)
            for following in lines[i + 1 :]:  # the paragraph or bullet goes on
                if not following.strip() or following.startswith(("-", "|", "#", "**")):
                    break
                text += " " + following.strip()
            name = bold.group(1).strip()  # kept: "Fallback rate = ...", "Cost of an attempt: ..."
            found.setdefault(name.lower(), _plain(name + text))
    return found


def define(name: str) -> str:
    """The definition of `name`; KeyError when docs/metrics.md has none (a test checks that
    every figure the dashboard shows is defined)."""
    return definitions()[name.lower()]


def _plain(text: str) -> str:
    return text.replace("`", "").strip()
