"""The engine's public surface is exactly `engine.__all__` (STYLE §14)."""

from __future__ import annotations

import types

import engine


def test_the_public_surface_is_exactly_all():
    exported = {
        name
        for name, value in vars(engine).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert exported == set(engine.__all__)
