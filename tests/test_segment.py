"""LO-SC segmentation (splitter.segments.problem) against the paper's example and brute force."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from splitter.cli import main
from splitter.cli.segment_cmd import segment_problem
from splitter.errors import InfeasibleError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.segments.problem import (
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


# --- the CLI on a real model ----------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
ONE_F4 = "[link]\nbaud = 921600\n[[device]]\nname = 'f4'\nmcu = 'STM32F405RG'\n"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``splitter`` in-process through its real entry point; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_segment_json_on_a_real_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kws_ds_cnn on one F405 in 80 KiB segments: the JSON agrees with the problem it states."""
    boards = tmp_path / "one.toml"
    boards.write_text(ONE_F4)
    model = str(ROOT / "models" / "kws_ds_cnn.onnx")
    args = ("segment", model, "--target", str(boards), "--segment-memory", "80 KiB", "--json")
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "splitter.segments/1" and doc["optimal"]
    rows = doc["segments"]
    assert len(rows) > 1  # 80 KiB cannot hold the whole model
    assert rows[0]["first"] == 0 and all(
        a["last"] + 1 == b["first"] for a, b in itertools.pairwise(rows)
    )
    assert all(r["memory_bytes"] <= 80 * 1024 for r in rows)
    assert doc["carried_bytes"] == sum(r["carried_bytes"] for r in rows)
    chain = load_chain(model)
    assert rows[-1]["last"] == len(chain.layers) - 1
    problem = segment_problem(
        chain, load_boards(boards), load_boards(boards).devices[0], 80 * 1024, None
    )
    assert doc["carried_bytes"] == _brute_force_dp(problem)


def _brute_force_dp(problem: SegmentProblem) -> int:
    """Least eq. (9) by dynamic programming over the last cut (exact for contiguous segments)."""
    n = problem.n
    best = [0] + [10**18] * n  # best[k]: layers 0..k-1 segmented, carried bytes so far
    for end in range(1, n + 1):
        for start in range(end):
            if segment_memory(problem, start, end - 1) <= problem.memory_cap:
                best[end] = min(best[end], best[start] + problem.output[end - 1])
    return best[n]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--device", "nope"), "no device named 'nope'; choose one of f4"),
        (("--segment-memory", "lots"), "--segment-memory = 'lots' is not a size"),
        (("--segment-memory", "2 KiB"), "alone needs"),
    ],
)
def test_segment_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str
) -> None:
    boards = tmp_path / "one.toml"
    boards.write_text(ONE_F4)
    model = str(ROOT / "models" / "kws_ds_cnn.onnx")
    code, _out, err = run_cli(capsys, "segment", model, "--target", str(boards), *extra)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
