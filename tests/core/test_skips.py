"""A skip as an attempt records it: JSON that reads back as it was written, every reason with
its words, and a value that does not read (NULL, an old row, a damaged text) read as none."""

from __future__ import annotations

import pytest

from engine.core.skips import SKIP_WORDS, Skip, SkipReason, from_json, to_json


def test_skips_read_back_as_they_were_written():
    skips = (
        Skip("claude/a", SkipReason.BREAKER_OPEN, 0),
        Skip("gpt/b", SkipReason.CONTEXT_TOO_SMALL, 1, "context window 8,000 tokens"),
        Skip("gpt/c", SkipReason.DISABLED, None),
    )
    assert from_json(to_json(skips)) == skips
    assert to_json(()) is None


def test_every_reason_has_a_name_and_a_why():
    assert set(SKIP_WORDS) == set(SkipReason)
    assert all(name and why for name, why in SKIP_WORDS.values())


def test_the_detail_is_what_the_failure_says_and_the_name_what_the_reason_is_called():
    skip = Skip("gpt/b", SkipReason.CONTEXT_TOO_SMALL, 1, "context window 8,000 tokens")
    assert (skip.name, skip.said) == ("context window too small", "context window 8,000 tokens")
    assert Skip("claude/a", SkipReason.NO_BUDGET, 1).said == "time budget too small"


def test_a_reason_this_version_does_not_know_is_kept_and_said_plainly():
    [skip] = from_json('[{"target":"x/y","reason":"quota_exhausted","depth":2}]')
    assert (skip.reason, skip.name, skip.depth) == ("quota_exhausted", "quota exhausted", 2)


@pytest.mark.parametrize("value", [None, float("nan"), "", "not json", '[{"depth": 1}]', "{}"])
def test_a_value_that_does_not_read_is_no_skip(value):
    assert from_json(value) == ()
