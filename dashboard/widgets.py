"""Widgets the pages share, each of which hands its page a value it can use.

A segmented control (and st.pills) deselects its option when the chosen one is clicked again,
and returns None; a page that splits, filters or scales by the choice has nothing to do with
None. `one_of` keeps the choice instead: the page always gets one of the options, and the
control shows the one it got.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st


def one_of(label: str, options: Sequence[str], default: str, key: str, where: Any = st) -> str:
    """A segmented control under `key` (in the container `where`) that always holds one of
    `options`: `default` at first, then the person's choice; clicking the chosen option again
    keeps it chosen rather than leaving none."""
    kept = f"{key}_kept"  # the last choice, for the run in which the control came back empty

    def keep_a_choice() -> None:
        if st.session_state[key] is None:
            st.session_state[key] = st.session_state.get(kept, default)

    # Seeded through the session state rather than `default=`: the callback sets the value
    # too, and Streamlit warns about a widget given both.
    if st.session_state.get(key) not in options:
        st.session_state[key] = default
    chosen = where.segmented_control(label, options, key=key, on_change=keep_a_choice)
    st.session_state[kept] = chosen
    return chosen
