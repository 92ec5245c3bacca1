"""PEX row loops (splitter.cost.rows): window sizes by hand, and the schedule the generated C
runs replayed on row labels for random conv chains (every row each op reads is in its window,
every row computed once, the windows never overflow)."""

from __future__ import annotations

import numpy as np
import pytest

from splitter.cost.layer import itemsize_function
from splitter.cost.pex import partial_schedule
from splitter.cost.rows import RowGeom, call_rows, window_moves, window_rows
from splitter.ir import Graph, Op, QuantParams, TensorSpec


def test_mobilenet_v2_first_block_windows_by_hand() -> None:
    """conv 3x3 s2 (pad 1) -> depthwise 3x3 -> project 1x1 at 112 rows: the depthwise reads 3
    conv rows per output row, the projection 1 depthwise row."""
    conv0 = RowGeom(224, 112, 3, 2, 1)
    dw = RowGeom(112, 112, 3, 1, 1)
    project = RowGeom(112, 112, 1, 1, 0)
    assert window_rows((conv0, dw, project)) == (3, 1)
    # a stride-2 consumer takes 2 new rows per output row: its producers then run 2 rows per
    # iteration, so windows above it hold one more row (the schedule's price for being simple)
    expand = RowGeom(112, 112, 1, 1, 0)
    dw2 = RowGeom(112, 56, 3, 2, 1)
    assert window_rows((conv0, dw, project, expand, dw2)) == (4, 2, 2, 3)
    assert window_rows((expand, dw2)) == (3,)


def _replay(
    geoms: list[RowGeom], band: int = 1
) -> tuple[list[int], list[list[int]], list[tuple[int, int]]]:
    """The generated C's schedule (codegen/pex_rows.py) on row labels, output bands of
    ``band`` rows: windows hold the labels of the rows they keep; returns the capacity used,
    the rows each op computed and per window the slides (``k_q_copy`` calls, rows moved to the
    front)."""
    n = len(geoms)
    cap = list(window_rows(geoms, band))
    windows: list[list[int]] = [[] for _ in range(n - 1)]  # labels, window slot order
    lo = [0] * (n - 1)
    done = [0] * n
    computed: list[list[int]] = [[] for _ in range(n)]
    moves = [(0, 0)] * (n - 1)
    for top in range(0, geoms[-1].h_out, band):
        need = [0] * n
        need[-1] = min(top + band, geoms[-1].h_out)
        for i in range(n - 1, 0, -1):
            g = geoms[i]
            need[i - 1] = min(max((need[i] - 1) * g.s - g.pad + g.k, 0), g.h_in)
        for i, g in enumerate(geoms):
            if done[i] >= need[i]:
                continue
            if i < n - 1:
                nxt = geoms[i + 1]
                keep = min(max(0, done[i + 1] * nxt.s - nxt.pad), done[i])
                if keep > lo[i]:
                    windows[i] = windows[i][keep - lo[i] :]
                    moves[i] = (moves[i][0] + 1, moves[i][1] + len(windows[i]))
                    lo[i] = keep
            a0, rows_in, _pt = call_rows(g, done[i], need[i])
            wanted = list(range(a0, a0 + rows_in))
            for row in range(done[i], need[i]):  # every output row's taps inside the call's
                a = row * g.s - g.pad
                assert set(range(max(a, 0), min(a + g.k, g.h_in))) <= set(wanted)
            if i > 0:  # the rows read are the window's, at slots (row - lo)
                got = [windows[i - 1][row - lo[i - 1]] for row in wanted]
                assert got == wanted, (i, done[i], got, wanted)
            computed[i].extend(range(done[i], need[i]))
            if i < n - 1:
                windows[i].extend(range(done[i], need[i]))
                assert len(windows[i]) == need[i] - lo[i] <= cap[i]
            done[i] = need[i]
    return cap, computed, moves


@pytest.mark.parametrize("band", [1, 2, 5])
@pytest.mark.parametrize("seed", range(40))
def test_schedule_reads_only_window_rows(seed: int, band: int) -> None:
    rng = np.random.default_rng(seed)
    h = int(rng.integers(5, 40))
    geoms = []
    for _ in range(int(rng.integers(2, 6))):
        k = int(rng.integers(1, 6))
        s = int(rng.integers(1, 4))
        pad = int(rng.integers(0, k))
        out = (h + 2 * pad - k) // s + 1
        if out < 1:
            break
        geoms.append(RowGeom(h, out, k, s, pad))
        h = out
    if len(geoms) < 2:
        pytest.skip("chain collapsed to one op")
    cap, computed, moves = _replay(geoms, band)
    assert window_moves(geoms, band) == tuple(moves)  # the cost model's slides are the C's
    assert computed[-1] == list(range(geoms[-1].h_out))
    for i, rows in enumerate(computed):
        assert rows == list(range(len(rows)))  # in order, each once
        assert len(rows) <= geoms[i].h_out  # no row computed twice: no extra MACs
    assert all(c <= geoms[i].h_out for i, c in enumerate(cap))


def _q8(name: str, h: int, c: int) -> TensorSpec:
    return TensorSpec(name, (1, h, h, c), "int8", QuantParams((0.1,), (0,)))


def _qconv(name: str, src: str, dst: str, shape: tuple[int, ...], pad: int, groups: int = 1) -> Op:
    attrs = {"groups": groups, "pads": (pad,) * 4, "strides": (1, 1)}
    return Op(name, "conv2d", (src,), (dst,), attrs, {"W": np.zeros(shape, np.int8)})


def test_scheduler_picks_a_row_loop_by_hand() -> None:
    """x(10x10x4) -> conv 3x3 -> a(8ch) -> dw 3x3 -> b(8ch) -> conv 1x1 -> y(2ch), int8 NHWC,
    one byte each. Channel loops with int32 accumulators: the whole chain x + a/8 + b/8 + 4 y =
    1400 B, so conv -> dw writing b's channels is best, x + a/8 + b = 1300 B; the row
    loop: x + 3 rows of a + 1 row of b + y = 400 + 240 + 80 + 200 = 920 B, plus one im2col
    scratch block for the tuned kernels c1 and c2 call, live over the loop, of the larger one
    (``4 + 4 K``: K = 36, 8): 148 B, 1068 B."""
    tensors = {
        "x": _q8("x", 10, 4),
        "a": _q8("a", 10, 8),
        "b": _q8("b", 10, 8),
        "y": _q8("y", 10, 2),
    }
    ops = (
        _qconv("c1", "x", "a", (8, 4, 3, 3), 1),
        _qconv("dw", "a", "b", (8, 1, 3, 3), 1, groups=8),
        _qconv("c2", "b", "y", (2, 8, 1, 1), 0),
    )
    graph = Graph("g", ops, tensors, ("x",), ("y",), layout="NHWC")
    one = itemsize_function(1)
    channels = partial_schedule(graph, one, accumulator_bytes=4)
    assert channels.peak == 1300 and channels.ordinary_peak == 1600
    both = partial_schedule(graph, one, accumulator_bytes=4, row_rule=lambda _op, _g: True)
    assert both.peak == 1068
    assert [(lp.first, lp.last, lp.by, lp.channels) for lp in both.loops] == [(0, 2, "row", 10)]
    assert both.describe(both.loops[0]) == "c1 -> dw -> c2 over 10 rows"
