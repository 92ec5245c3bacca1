"""LO-SC segmentation (splitter.partition.segment) against the paper's example and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from splitter.errors import InfeasibleError
from splitter.partition.segment import (
    SegmentProblem,
    carried,
    segment_memory,
    segment_time,
    solve_segments,
)

MB = 1_000_000


def test_paper_example_cuts_after_the_first_layer() -> None:
    """LO-SC section IV: three 3 MB layers, outputs 1/2/2 MB, 6 MB segments -> [0], [1, 2]."""
    problem = SegmentProblem(
        memory=(3 * MB,) * 3, output=(1 * MB, 2 * MB, 2 * MB), memory_cap=6 * MB
    )
    answer = solve_segments(problem)
    assert answer.segments == ((0, 0), (1, 2))
    assert answer.carried_bytes == 3 * MB  # 1 MB after segment 0, 2 MB final output
    assert answer.optimal
    # the plain knapsack (fewest segments, first fit) cuts after layer 1 and carries 4 MB
    assert carried(problem, [1]) == 4 * MB


def _brute_force(problem: SegmentProblem) -> int | None:
    """The least eq. (9) over every set of cuts whose segments fit (2^(L-1) candidates)."""
    n = problem.n
    best: int | None = None
    for k in range(n):
        for cuts in itertools.combinations(range(n - 1), k):
            starts, ends = [0, *(c + 1 for c in cuts)], [*cuts, n - 1]
            fits = all(
                segment_memory(problem, a, b) <= problem.memory_cap
                and (problem.time_cap is None or segment_time(problem, a, b) <= problem.time_cap)
                for a, b in zip(starts, ends, strict=True)
            )
            if fits:
                value = carried(problem, cuts)
                best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_equals_brute_force_on_random_instances(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    memory = tuple(int(v) for v in rng.integers(1, 40, n))
    peak = tuple(int(v) for v in rng.integers(0, 30, n)) if seed % 2 else ()
    time = tuple(float(v) for v in rng.uniform(0.001, 0.01, n)) if seed % 3 == 0 else ()
    problem = SegmentProblem(
        memory=memory,
        output=tuple(int(v) for v in rng.integers(1, 100, n)),
        memory_cap=int(rng.integers(45, 120)),
        peak=peak,
        time=time,
        time_cap=0.02 if time else None,
    )
    expected = _brute_force(problem)
    if expected is None:
        with pytest.raises(InfeasibleError):
            solve_segments(problem)
        return
    answer = solve_segments(problem)
    assert answer.optimal
    assert answer.carried_bytes == expected
    assert carried(problem, [b for _, b in answer.segments[:-1]]) == expected
    for a, b in answer.segments:
        assert segment_memory(problem, a, b) <= problem.memory_cap
        if problem.time_cap is not None:
            assert segment_time(problem, a, b) <= problem.time_cap
    # contiguous, ordered, covering every layer once
    flat = [layer for a, b in answer.segments for layer in range(a, b + 1)]
    assert flat == list(range(n))


def test_a_layer_larger_than_a_segment_is_named() -> None:
    problem = SegmentProblem(memory=(5, 50, 5), output=(1, 1, 1), memory_cap=20)
    with pytest.raises(InfeasibleError, match="layer 1 alone needs 50 B"):
        solve_segments(problem)


def test_peak_counts_once_per_segment() -> None:
    """Weights add up; the working buffer is the largest one of the segment, not the sum."""
    problem = SegmentProblem(memory=(10, 10), output=(5, 5), memory_cap=40, peak=(15, 20))
    assert segment_memory(problem, 0, 1) == 40
    assert solve_segments(problem).segments == ((0, 1),)
