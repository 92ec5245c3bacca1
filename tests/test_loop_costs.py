"""The cost features of PEX loops and of kernels the table never measured, by hand; and the time
price of each loop in ``plan``.

How well the estimate holds on models outside the table's fit is ``benchmarks/heldout.py``'s
job (``benchmarks/results/heldout.md``); these tests pin the formulas it relies on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from splitter.cost.kernels import (
    _coef_of,
    kernel_table,
    loop_terms,
    op_features,
    term_instructions,
)
from splitter.ir import Op, QuantParams, TensorSpec

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "benchmarks" / "heldout"


def _f(name: str, shape: tuple[int, ...]) -> TensorSpec:
    return TensorSpec(name, shape, "float32")


def test_binary_features_ignore_the_operands_sizes() -> None:
    """``k_binary`` reads a broadcast or constant operand with stride 0 as often as a full one:
    a batch-norm ``mul`` by a per-channel constant has the features of an activation-by-
    activation ``mul`` of the same output; ``rows`` are the innermost loop's entries."""
    tensors = {n: _f(n, (1, 16, 12, 10)) for n in ("a", "b", "y")}
    both = Op("m", "mul", ("a", "b"), ("y",), {}, {})
    const = Op("m", "mul", ("a",), ("y",), {}, {"C": np.ones((1, 16, 1, 1), np.float32)})
    want = {"call": 1, "out": 1920, "rows": 16 * 12}
    assert op_features(both, tensors, "NCHW") == want
    assert op_features(const, tensors, "NCHW") == want


def test_a_variant_never_measured_takes_its_kinds_fit() -> None:
    """A kernel variant no model of ``models/`` uses is costed by the same kind in the other
    layout (same copy loop, other strides), not by the pooled upper bound."""
    variants = kernel_table()["builds"]["M4F.dsp"]["variants"]
    unmeasured = [
        v.replace("/NHWC/", "/NCHW/")
        for v in variants
        if v.endswith("/NHWC/float32") and v.replace("/NHWC/", "/NCHW/") not in variants
    ]
    assert unmeasured  # e.g. a float NCHW copy kernel no model of models/ uses
    for v in unmeasured:
        other = variants[v.replace("/NCHW/", "/NHWC/")]["coef"]
        assert _coef_of(v, "M4F.dsp") == other, v


def _q8(name: str, h: int, c: int) -> TensorSpec:
    return TensorSpec(name, (1, h, h, c), "int8", QuantParams((0.1,), (0,)))


def _conv(name: str, src: str, dst: str, w: tuple[int, ...], pad: int, groups: int = 1) -> Op:
    attrs = {"groups": groups, "pads": (pad,) * 4, "strides": (1, 1)}
    return Op(name, "conv2d", (src,), (dst,), attrs, {"W": np.zeros(w, np.int8)})


@pytest.mark.parametrize(("band", "calls", "slides"), [(1, [9, 10, 10], 30), (4, [3, 3, 3], 9)])
def test_a_row_loop_calls_the_ops_tuned_kernels_once_per_band(
    band: int, calls: list[int], slides: int
) -> None:
    """expand 1x1 (8 -> 24) -> depthwise 3x3 (pad 1) -> project 1x1 (24 -> 8) at 10x10: each
    op's own tuned kernel (the variant of the op run whole, same features: every output once,
    every MAC) with one call per iteration it has rows to compute (one row per iteration: the
    expand computes rows 0 and 1 in its first call, then one a call; bands of 4 rows: 4, 4, 2
    output rows, 3 calls each), and the window slides of
    :func:`splitter.cost.rows.window_moves` (bookkeeping ``rows``: iterations x ops). One row
    per iteration the depthwise has no line ring (its window loops, its blocks' constants
    set up on every call); in bands it has one, its
    features per call: 6 blocks of 4 channels, 10 output rows in all of 3 groups of 4 pixels
    per channel (the 10 % 4 last pixels of each call's last row one more group), and the
    ring's loads of each call's output rows + 2 lines of 10 pixels."""
    tensors = {"x": _q8("x", 10, 8), "e": _q8("e", 10, 24), "d": _q8("d", 10, 24),
               "y": _q8("y", 10, 8)}  # fmt: skip
    ops = [_conv("expand", "x", "e", (24, 8, 1, 1), 0),
           _conv("dw", "e", "d", (24, 1, 3, 3), 1, groups=24),
           _conv("project", "d", "y", (8, 24, 1, 1), 0)]  # fmt: skip
    terms = loop_terms(ops, 10, tensors, "NHWC", by="row", band=band)
    convs = [t for t in terms if t.variant.startswith("conv2d.")]
    dw = "conv2d.depthwise" + (".ring" if band > 1 else "")
    assert [t.variant.split("/")[0] for t in convs] == [
        "conv2d.pointwise", dw, "conv2d.pointwise"]  # fmt: skip
    assert [t.features["call"] for t in convs] == calls
    for op, t, n in zip(ops, convs, calls, strict=True):
        if band > 1 and t.variant.startswith(dw):
            assert t.features == {"call": 3, "inner": 18, "rows": 60, "pair": 720, "edge": 18,
                                  "in": 24 * (10 + 2 * 3) * 10, "gen": 0, "out": 2400}  # fmt: skip
            continue
        whole = op_features(op, tensors, "NHWC", ring=False)
        if t.variant.startswith(dw):  # its blocks' constants once per call
            whole["inner"] *= n
        assert {**whole, "call": n} == t.features
    assert [convs[0].features["out"], convs[2].features["out"]] == [2400, 800]
    slide = next(t for t in terms if t.variant == "pex.row.slide/NHWC/int8")
    assert slide.features["rows"] == slides
    assert slide.features["in"] % (10 * 24) == 0  # whole rows of W x C bytes


def test_a_channel_loop_calls_the_dsp_kernels_on_a_dsp_core() -> None:
    """The same block as a channel loop over its 24 expanded channels: on a DSP build the tuned
    one-channel kernels of kernels_q8_pex.c, by hand: the generator's 100 pixels are 25 blocks
    of four (no tail); the 10x10 depthwise plane (pad 1) has 8 x 8 interior pixels, 4 pairs a
    row, and 36 border pixels whose valid taps are 28 x 28 - 64 x 9 = 208; the accumulation
    adds 100 pixels x 8 outputs per channel (no ``O % 4`` tail). The plain build keeps the
    generic kernels' variants."""
    tensors = {"x": _q8("x", 10, 8), "e": _q8("e", 10, 24), "d": _q8("d", 10, 24),
               "y": _q8("y", 10, 8)}  # fmt: skip
    ops = [_conv("expand", "x", "e", (24, 8, 1, 1), 0),
           _conv("dw", "e", "d", (24, 1, 3, 3), 1, groups=24),
           _conv("project", "d", "y", (8, 24, 1, 1), 0)]  # fmt: skip
    got = {t.variant: t.features for t in loop_terms(ops, 24, tensors, "NHWC", isa="dsp")}
    assert got["pex.q_pex_pointwise_dsp/NHWC/int8"] == {
        "call": 24, "in": 24 * 8, "out": 2400, "mac": 2400 * 8, "pix": 0, "gen": 0}  # fmt: skip
    assert got["pex.q_dw_plane_dsp/NHWC/int8"] == {
        "call": 24, "rows": 240, "pair": 24 * 32, "inner": 0, "pix": 24 * 36,
        "edge": 24 * 208, "out": 2400}  # fmt: skip
    assert got["pex.accumulate_dsp/NHWC/int8"] == {
        "call": 24, "in": 2400, "out": 2400 * 8, "rows": 0}  # fmt: skip
    assert got["pex.acc_dsp/NHWC/int8"] == {"call": 1, "out": 800}
    plain = {t.variant for t in loop_terms(ops, 24, tensors, "NHWC", isa="plain")}
    assert plain == {"pex.q_pointwise/NHWC/int8", "pex.q_dw_plane/NHWC/int8",
                     "pex.accumulate/NHWC/int8", "pex.acc/NHWC/int8"}  # fmt: skip


def test_loop_instructions_are_the_sum_of_their_calls() -> None:
    """A loop's estimate is the fits of the calls it makes (no measured count for a shape the
    table never saw)."""
    from splitter.cost.kernels import loop_instructions

    tensors = {"x": _q8("x", 9, 8), "e": _q8("e", 9, 40), "d": _q8("d", 9, 40),
               "y": _q8("y", 9, 16)}  # fmt: skip
    ops = [_conv("expand", "x", "e", (40, 8, 1, 1), 0),
           _conv("dw", "e", "d", (40, 1, 3, 3), 1, groups=40),
           _conv("project", "d", "y", (16, 40, 1, 1), 0)]  # fmt: skip
    for by, n in (("channel", 40), ("row", 9)):
        got = loop_instructions(ops, n, tensors, "NHWC", "M4F.dsp", by=by)
        want = sum(
            term_instructions(t, "M4F.dsp") for t in loop_terms(ops, n, tensors, "NHWC", by=by)
        )
        assert got == pytest.approx(want) and got > 0


def test_plan_reports_each_loops_time_price() -> None:
    """``plan --json`` gives every loop's time price on the device's core: the extra
    milliseconds and the ratio to its ops run whole, from the kernel table and the core's CPI."""
    cmd = [sys.executable, "-m", "splitter", "plan", str(HELDOUT / "mnv2_035_96_int8.tflite"),
           "--target", str(HELDOUT / "two_f405_ram16.toml"), "--json"]  # fmt: skip
    plan = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    loops = [lp for s in plan["submodels"] for lp in s["partial_execution"]["loops"]]
    assert loops
    price = re.compile(
        r" over \d+ (rows|channels)(?:, \d+ per iteration)? "
        r"\(\+(\d+\.\d) ms, (\d+\.\d\d)x the ops run whole\)$"
    )
    kinds = set()
    for text in loops:
        m = price.search(text)
        assert m, text
        kinds.add(m[1])
        assert float(m[3]) > 1.0  # a loop calls one-row / few-channel kernels: never faster
    assert kinds == {"rows", "channels"}


def test_depthwise_weights_of_fewer_than_four_channels() -> None:
    """An int8 depthwise conv of 1-3 channels (an RGB input's): no block of four, every
    channel's taps in order (the grid's int8 walks found the reshape of an empty block
    failing)."""
    from splitter.codegen.ops.q8_variants import depthwise_weights

    w = np.arange(3 * 3 * 3, dtype=np.int8).reshape(3, 3, 3, 1)
    assert depthwise_weights(w).tolist() == w.reshape(3, 9).ravel().tolist()


def test_conv_generic_features_by_hand() -> None:
    """A float NCHW conv of 6 output channels (4 + 2): the 2 last run ``conv_generic``, its own
    term. 6x6 input, 3x3, pad 1: along each row column 0 is one pixel (2 valid taps), columns
    1..4 one block of four interior pixels, column 5 one pixel (2 taps); valid kernel rows per
    output row 2, 3, 3, 3, 3, 2 (16); 4 input channels."""
    from splitter.cost.kernels import GENERIC, op_terms

    attrs = {"kernel": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1), "groups": 1}
    op = Op("c", "conv2d", ("x",), ("y",), attrs, {"W": np.zeros((6, 4, 3, 3), np.float32)})
    tensors = {"x": _f("x", (1, 4, 6, 6)), "y": _f("y", (1, 6, 6, 6))}
    terms = op_terms(op, tensors, "NCHW")
    assert [t.variant for t in terms] == ["conv2d.conv/NCHW/float32", GENERIC]
    assert terms[1].features == {"call": 1, "rows": 2 * 6, "pair": 2 * 6, "out": 2 * 6 * 2,
                                 "inner": 2 * 16 * 4 * 3, "edge": 2 * 16 * 2 * 4,
                                 "gen": 2 * 16 * 4 * 4}  # fmt: skip
