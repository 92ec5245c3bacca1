"""Row loops: partial execution along output rows (line-buffered streaming), exact for int8.

PEX's channel loops (:mod:`splitter.cost.pex`) end with an accumulating convolution, whose full
output needs 32-bit accumulators when the arithmetic must stay exact (the paper's 376 kB on
MobileNetV2 counts 8-bit accumulators, its section 3.4, which changes the results). A row loop
over a chain of convolutions ``s..e`` (each op's only consumer the next one) needs no
accumulator and no recomputation: the last op computes its output one row at a time, and every
tensor between two ops of the loop exists only as a window of the rows its consumer still needs
(a line buffer). Input and output of the loop are full tensors; every output row of every op is
computed exactly once, by the same kernel and the same arithmetic as the op run whole (so the
bytes are those of the whole op, and no MACs are added; rows below the last one a consumer
reads are never computed).

The schedule (what the generated C in ``splitter/codegen/pex_rows.py`` runs, and what
:func:`window_rows` simulates to size the windows): op ``i`` has input height ``H_i``, kernel
height ``k_i``, stride ``s_i`` and top pad ``p_i``; ``done_i`` rows of its output exist. For each
output row ``r`` of the last op ``n-1``:

* ``need_{n-1} = r + 1``, ``need_{i-1} = clamp((need_i - 1) * s_i - p_i + k_i, 0, H_i)`` (the
  rows of op ``i-1``'s output that op ``i``'s first ``need_i`` rows read);
* for ``i = 0 .. n-1``, while ``done_i < need_i``: the window of op ``i``'s output (read by op
  ``i+1``) drops the rows below ``lo_i = min(max(0, done_{i+1} * s_{i+1} - p_{i+1}), done_i)``
  (the first row op ``i+1`` will still read; memmove to the front), then op ``i`` computes row
  ``done_i`` from rows ``max(0, a) .. min(H_i, a + k_i) - 1`` of its input (``a = done_i * s_i -
  p_i``; the kernel called with ``OH = 1``, that many input rows and ``max(0, -a)`` as its top
  pad) into window slot ``done_i - lo_i`` (the full output for the last op).

A window's capacity is the largest ``done_i - lo_i + 1`` the schedule reaches; its bytes are
``capacity * W * C * itemsize`` (one row of an NHWC tensor is contiguous). For MobileNetV2's
first block (conv 3x3 s2 -> depthwise 3x3 -> project 1x1 at 112x112x32) the windows are 3 and
1 rows: 224x224x3 + 3 * 112x32 + 1 * 112x32 + 112x112x16 = 365,568 bytes with int8 activations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from splitter.ir import Op, TensorSpec


@dataclass(frozen=True)
class RowGeom:
    """One op's vertical window: input rows ``h_in``, output rows ``h_out``, kernel height
    ``k``, stride ``s``, top pad ``pad``."""

    h_in: int
    h_out: int
    k: int
    s: int
    pad: int


def row_geometry(op: Op, tensors: Mapping[str, TensorSpec]) -> RowGeom | None:
    """The op's :class:`RowGeom` when it can run one output row at a time: a conv2d with
    weights, int8 rank-4 NHWC input and output, dilation 1 along H; else None."""
    if op.kind != "conv2d" or "W" not in op.weights or len(op.inputs) < 1:
        return None
    x, y = tensors[op.inputs[0]], tensors[op.outputs[0]]
    if len(x.shape) != 4 or len(y.shape) != 4 or x.dtype != "int8" or y.dtype != "int8":
        return None
    dh, _dw = op.attr("dilations", (1, 1))
    if dh != 1:
        return None
    kh = int(op.weights["W"].shape[2])
    sh, _sw = op.attr("strides", (1, 1))
    pt, _pl, _pb, _pr = op.attr("pads", (0, 0, 0, 0))
    return RowGeom(int(x.shape[1]), int(y.shape[1]), kh, int(sh), int(pt))


def band_schedule(geoms: Sequence[RowGeom], band: int = 1) -> list[list[tuple[int, int, int]]]:
    """The calls of a row loop of output bands of ``band`` rows (module docstring): per
    iteration ``r`` (output rows ``r*band .. min((r+1)*band, H_out) - 1`` of the last op), per
    op ``i`` with rows missing, ``(lo_i, done_i, need_i)``: the window's first row after its
    slide (``lo_{n-1} = 0``), then the op computes its rows ``done_i .. need_i - 1`` in one
    call. ``need`` as in the module docstring with ``need_{n-1} = min((r+1)*band, H_out)``."""
    n = len(geoms)
    done, lo = [0] * n, [0] * n
    calls: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    last = geoms[-1].h_out
    for top in range(0, last, band):
        need = [0] * n
        need[n - 1] = min(top + band, last)
        for i in range(n - 1, 0, -1):
            g = geoms[i]
            need[i - 1] = min(max((need[i] - 1) * g.s - g.pad + g.k, 0), g.h_in)
        for i in range(n):
            if done[i] >= need[i]:
                continue
            if i < n - 1:
                nxt = geoms[i + 1]
                lo[i] = max(lo[i], min(max(0, done[i + 1] * nxt.s - nxt.pad), done[i]))
            calls[i].append((lo[i], done[i], need[i]))
            done[i] = need[i]
    return calls


def window_rows(geoms: Sequence[RowGeom], band: int = 1) -> tuple[int, ...]:
    """Rows each window between ops ``i`` and ``i+1`` holds at most: the largest
    ``need_i - lo_i`` of :func:`band_schedule`."""
    calls = band_schedule(geoms, band)
    return tuple(max((need - lo for lo, _d, need in c), default=0) for c in calls[:-1])


def call_rows(g: RowGeom, done: int, need: int) -> tuple[int, int, int]:
    """``(a0, H, pt)`` of the call computing output rows ``done .. need - 1`` of an op of
    geometry ``g``: its first input row ``a0 = max(0, a)`` (``a = done * s - pad``), the
    input rows present ``H = min(H_in, (need - 1) * s - pad + k) - a0`` and the rows missing
    above them ``pt = a0 - a`` (the kernels skip the taps outside ``[0, H)``, as for the padded
    whole input)."""
    a = done * g.s - g.pad
    a0 = max(a, 0)
    a1 = min((need - 1) * g.s - g.pad + g.k, g.h_in)
    return a0, a1 - a0, a0 - a


def row_bytes(spec: TensorSpec, itemsize: int) -> int:
    """Bytes of one row of an NHWC tensor: ``W * C * itemsize``."""
    return int(spec.size // spec.shape[1]) * itemsize


def loop_windows(
    ops: Sequence[Op], tensors: Mapping[str, TensorSpec], band: int = 1
) -> tuple[tuple[int, ...], tuple[RowGeom, ...]] | None:
    """Window rows and geometries of a row loop over ``ops`` in output bands of ``band`` rows
    (None: not every op can stream)."""
    geoms = [row_geometry(op, tensors) for op in ops]
    if any(g is None for g in geoms):
        return None
    known = tuple(g for g in geoms if g is not None)
    return window_rows(known, band), known


def window_moves(geoms: Sequence[RowGeom], band: int = 1) -> tuple[tuple[int, int], ...]:
    """Per window (between ops ``i`` and ``i+1``), the slides the generated C makes: the number
    of ``k_q_slide`` calls and the rows they move (``codegen/pex_rows.py``: before op ``i``
    computes its rows, ``keep = clamp(d_{i+1} s_{i+1} - p_{i+1}, 0, d_i)``; when ``keep >
    l_i`` the rows ``keep .. d_i - 1`` move to the front). The schedule of
    :func:`band_schedule`."""
    calls = band_schedule(geoms, band)
    moves = []
    for c in calls[:-1]:
        count = rows = 0
        prev = 0
        for lo, done, _need in c:
            if lo > prev:
                count, rows = count + 1, rows + done - lo
            prev = lo
        moves.append((count, rows))
    return tuple(moves)
