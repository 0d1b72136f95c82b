"""The simulated accounts' rate limits: a run of calls checked and counted at once (the
fast-forward's way) lets in and counts exactly what the same calls made one by one would."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.whatif.scenario import Limits
from simulations.whatif.simulated import MinuteLimits

LIMITS = {
    "a/m": Limits(rpm=40, tpm=30_000),
    "b/m": Limits(input_tpm=20_000, output_tpm=2_000),
}


def _calls(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    at = np.sort(rng.uniform(0, 600, n))
    return at, rng.integers(1, 2_000, n), rng.integers(0, 300, n)


@pytest.mark.parametrize("target", sorted(LIMITS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_run_of_calls_passes_and_counts_as_the_same_calls_one_by_one(target, seed):
    at, prompt, output = _calls(seed)
    one_by_one, in_runs = MinuteLimits(LIMITS), MinuteLimits(LIMITS)
    start = 0
    while start < len(at):
        stop = min(len(at), start + 37)  # runs that cross minutes, and start mid-minute
        passed = in_runs.passing(target, at[start:stop], prompt[start:stop], output[start:stop])
        expected = 0
        while expected < stop - start:
            i = start + expected
            if one_by_one.over(target, float(at[i]), int(prompt[i]), int(output[i])) is not None:
                break
            expected += 1
        assert passed == expected
        in_runs.count(target, at[start : start + passed], prompt[start : start + passed],
                      output[start : start + passed])  # fmt: skip
        if passed < stop - start:  # the refused call: the chain's, which counts nothing
            start += passed + 1
        else:
            start = stop
    # What each has counted lets the same next calls in, or refuses them, alike.
    for probe in (1, 5_000, 40_000):
        call = (np.array([599.0]), np.array([probe]), np.array([10]))
        assert one_by_one.passing(target, *call) == in_runs.passing(target, *call)


def test_a_refused_call_waits_for_the_next_minute():
    limits = MinuteLimits({"a/m": Limits(rpm=1)})
    assert limits.over("a/m", 61.0, 10, 10) is None
    assert limits.over("a/m", 75.0, 10, 10) == pytest.approx(45.0)
    assert limits.over("a/m", 120.0, 10, 10) is None
