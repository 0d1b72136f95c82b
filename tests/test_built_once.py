"""helpers.built_once: a dataset built once per run, every caller its own copy."""

from __future__ import annotations

import uuid

import pytest
from helpers.built_once import built_once


def test_a_dataset_is_built_once_and_each_caller_gets_a_copy_of_its_own(tmp_path_factory):
    name, builds = f"probe-{uuid.uuid4().hex}", []

    def build(folder):
        builds.append(folder)
        (folder / "data.txt").write_text("built")
        return {"rows": 3}

    first, facts = built_once(tmp_path_factory, name, build)
    (first / "data.txt").write_text("changed by a test")
    second, again = built_once(tmp_path_factory, name, build)
    assert len(builds) == 1
    assert facts == again == {"rows": 3}
    assert first != second
    assert (second / "data.txt").read_text() == "built"


def test_a_build_that_fails_leaves_nothing_and_the_next_caller_builds_again(tmp_path_factory):
    name = f"probe-{uuid.uuid4().hex}"

    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("the build broke")

    with pytest.raises(RuntimeError, match="the build broke"):
        built_once(tmp_path_factory, name, broken)
    folder, facts = built_once(tmp_path_factory, name, lambda f: "whole")
    assert facts == "whole"
    assert not (folder / "half.txt").exists()
