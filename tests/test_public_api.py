"""The engine's public surface is exactly `engine.__all__` (STYLE §14)."""

from __future__ import annotations

import types

import engine


def test_the_public_surface_is_exactly_all():
    """Read through `dir` and `getattr`: each name is loaded on first use (engine/__init__.py)."""
    exported = {
        name
        for name in dir(engine)
        if not name.startswith("_") and not isinstance(getattr(engine, name), types.ModuleType)
    }
    assert exported == set(engine.__all__)
