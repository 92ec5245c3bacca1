"""Per-axis index gathers: slice (and split), reflect / edge / wrap pad, resize.

Each of these ops reads, along every axis ``d`` independently, source index ``src_d[i]`` for
output index ``i``; :func:`slice_index`, :func:`pad_index` and :func:`resize_coords` compute
those indices from the op's attributes (the ONNX formulas), and the emitter writes them as
element offsets (index times the input's stride) for ``k_gather_axes``, or, for a linear
resize, the two neighbours and the weight of the second for ``k_resize_linear``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from splitter.codegen.ops.base import (
    Q8_ELEMENTWISE,
    EmitContext,
    OpEmitter,
    block,
    ints,
    pad4,
    rank4_or_less,
    record,
    same_quant,
)
from splitter.codegen.ops.formulas import Shape
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.opdef import ALL, F32_NCHW, OpDef
from splitter.errors import ShapeError
from splitter.ir import Op, TensorSpec

#: numpy.pad modes of the ONNX Pad modes (ONNX "reflect" excludes the edge, as numpy's does).
PAD_MODES = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}

#: ONNX Resize coordinate_transformation_mode values supported.
COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
#: ONNX Resize nearest_mode values.
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def slice_index(n_out: int, start: int, step: int) -> np.ndarray:
    """``start + i * step`` for ``i < n_out`` (ONNX Slice after clamping, numpy semantics)."""
    return start + step * np.arange(n_out, dtype=np.int64)


def pad_index(n_in: int, begin: int, end: int, mode: str) -> np.ndarray:
    """Source index of every output position of a ``mode`` pad of ``begin``/``end`` cells
    (``numpy.pad`` of ``arange(n_in)``, whose reflect / edge / wrap are ONNX's)."""
    return np.pad(np.arange(n_in, dtype=np.int64), (begin, end), mode=PAD_MODES[mode])  # type: ignore[call-overload]


def resize_coords(n_in: int, n_out: int, scale: float, coord_mode: str) -> np.ndarray:
    """Source coordinate (float32, as onnxruntime computes it) of every output index along one
    axis, by ONNX Resize's ``coordinate_transformation_mode``:
    half_pixel ``(i + 0.5) / s - 0.5``; pytorch_half_pixel the same, 0 when ``n_out == 1``;
    align_corners ``i (n_in - 1) / (n_out - 1)``; asymmetric ``i * (1 / s)`` with ``1 / s``
    rounded to float32 first (so ``2 * (7 / 4)`` is the tie 3.5, as in onnxruntime; checked
    against it for every mode in tests/test_op_exported.py). ``s`` is the file's float32 scale,
    or the exact ``n_out / n_in`` when the model gives sizes."""
    i = np.arange(n_out, dtype=np.float32)
    s = np.float32(scale)
    if coord_mode == "half_pixel":
        return (i + np.float32(0.5)) / s - np.float32(0.5)
    if coord_mode == "pytorch_half_pixel":
        if n_out == 1:
            return np.zeros(1, np.float32)
        return (i + np.float32(0.5)) / s - np.float32(0.5)
    if coord_mode == "align_corners":
        if n_out == 1:
            return np.zeros(1, np.float32)
        return i * np.float32(n_in - 1) / np.float32(n_out - 1)
    if coord_mode == "asymmetric":
        return i * np.float32(1.0 / scale)
    raise ValueError(f"coordinate_transformation_mode {coord_mode!r}")


def nearest_index(coords: np.ndarray, n_in: int, nearest_mode: str) -> np.ndarray:
    """Nearest source index by ONNX Resize's ``nearest_mode``, clamped to ``[0, n_in)``."""
    frac = coords - np.floor(coords)
    if nearest_mode == "round_prefer_floor":
        idx = np.where(frac == 0.5, np.floor(coords), np.round(coords))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(frac == 0.5, np.ceil(coords), np.round(coords))
    elif nearest_mode == "floor":
        idx = np.floor(coords)
    elif nearest_mode == "ceil":
        idx = np.ceil(coords)
    else:
        raise ValueError(f"nearest_mode {nearest_mode!r}")
    return np.clip(idx, 0, n_in - 1).astype(np.int64)


def linear_taps(coords: np.ndarray, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, w)``: the coordinate clamped to ``[0, n_in - 1]`` lies between ``lo`` and
    ``hi = min(lo + 1, n_in - 1)`` with weight ``w`` on ``hi`` (onnxruntime's linear resize)."""
    c = np.clip(coords, np.float32(0), np.float32(n_in - 1)).astype(np.float32)
    lo = np.floor(c).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, (c - lo.astype(np.float32)).astype(np.float32)


def _strides4(shape: Sequence[int]) -> list[int]:
    """Element strides of ``shape`` left-padded to rank 4."""
    s = pad4(shape)
    return [prod(s[d + 1 :]) for d in range(4)]


def _int_array(name: str, values: Sequence[int]) -> str:
    return f"static const int {name}[{len(values)}] = {{{ints(values)}}};"


def _float_array(name: str, values: Sequence[float]) -> str:
    return f"static const float {name}[{len(values)}] = {{{', '.join(map(c_float, values))}}};"


def _gather_call(op: Op, ctx: EmitContext, index: Sequence[np.ndarray]) -> list[str]:
    """``k_gather_axes`` with the per-axis source ``index`` (one array per axis of the input)."""
    x, y = op.inputs[0], op.outputs[0]
    strides = _strides4(ctx.shape(x))
    maps = [np.zeros(1, np.int64)] * (4 - len(index)) + list(index)
    offsets = [np.asarray(m, np.int64) * strides[d] for d, m in enumerate(maps)]
    flat = np.concatenate(offsets)
    starts = np.cumsum([0] + [len(m) for m in offsets[:-1]])
    rows: list[list[tuple[str, object]]] = [
        [("ys", f"{{{ints(pad4(ctx.shape(y)))}}}")],
        [("map", "{" + ", ".join(f"m + {int(s)}" for s in starts) + "}")],
    ]
    lines = [_int_array("m", [int(v) for v in flat]), *record("k_gather_params", "p", rows)]
    return block(lines, f"k_gather_axes(&p, {ctx.ptr(x)}, {ctx.ptr(y)})")


def block_slice(op: Op, tensors: Mapping[str, TensorSpec]) -> tuple[int, int, int, int] | None:
    """``(outer, xtot, xoff, yn)`` of a slice that cuts one axis ``a`` with step 1 (a layer
    split's channel slice): ``outer = prod(x[:a])``, ``xtot = prod(x[a:])``,
    ``xoff = start_a * prod(x[a+1:])``, ``yn = (end_a - start_a) * prod(x[a+1:])``, so
    ``y[o*yn + i] = x[o*xtot + xoff + i]`` (``k_slice_part``); None for any other slice."""
    xs = tensors[op.inputs[0]].shape
    bounds = list(zip(op.attr("starts"), op.attr("ends"), op.attr("steps"), strict=True))
    cut = [d for d, (a, b, s) in enumerate(bounds) if (a, b, s) != (0, xs[d], 1)]
    if len(cut) > 1 or any(int(s) != 1 for _, _, s in bounds):
        return None
    axis = cut[0] if cut else 0
    start, end = int(bounds[axis][0]), int(bounds[axis][1])
    inner = prod(xs[axis + 1 :])
    return prod(xs[:axis]), prod(xs[axis:]), start * inner, (end - start) * inner


def _one_axis(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """int8 slices cut one axis with step 1 (``k_q_slice_part``)."""
    return None if block_slice(op, tensors) is not None else "an int8 slice of several axes"


class Slice(OpEmitter):
    """slice (ONNX Slice, one output of Split, TFLite SLICE): ``y[i] = x[starts + i * steps]``
    per axis.

    slice: per axis ``len(range(starts, ends, steps))`` elements (the importer normalises the
    bounds as Python's ``slice.indices``); one copy per output element. A slice along one axis
    with step 1 (:func:`block_slice`) copies blocks (``k_slice_part``, int8 ``k_q_slice_part``),
    any other is an index gather (float only). The bounds index the tensor's own shape (NHWC
    for TFLite and for a QDQ graph's int8 tensors); int8 copies bytes, so input and output share
    one quantisation.
    """

    # y[i] = x[starts[d] + i[d] * steps[d]] on every axis d, i[d] < len(range(starts, ends,
    # steps)) (Slice, normalised as Python's slice.indices; Split: one slice per output)
    order = 290
    definition = OpDef(
        "slice",
        ("starts", "ends", "steps"),
        onnx=("Slice", "Split"),
        tflite=("SLICE",),
        kernels=ALL,
    )
    float_checks = (rank4_or_less,)
    int8_checks = (*Q8_ELEMENTWISE, same_quant, _one_axis)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        bounds = list(zip(op.attr("starts"), op.attr("ends"), op.attr("steps"), strict=True))
        if len(bounds) != len(x):
            raise ShapeError(f"{op.name}: slice of a rank-{len(x)} tensor needs {len(x)} bounds")
        return tuple(len(range(int(a), int(b), int(s))) for a, b, s in bounds)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        part = block_slice(op, ctx.tensors)
        if part is not None:
            outer, xtot, xoff, yn = part
            x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
            return [f"k_slice_part({x}, {outer}, {xtot}, {xoff}, {y}, {yn});"]
        ys = ctx.shape(op.outputs[0])
        starts, steps = op.attr("starts"), op.attr("steps")
        index = [slice_index(n, int(a), int(s)) for n, a, s in zip(ys, starts, steps, strict=True)]
        return _gather_call(op, ctx, index)

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        part = block_slice(op, ctx.tensors)
        assert part is not None  # _one_axis
        outer, xtot, xoff, yn = part
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        return [f"k_q_slice_part({x}, {outer}, {xtot}, {xoff}, {y}, {yn});"]


def known_pad_mode(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """A reflect / edge / wrap pad with non-negative pads of a rank <= 4 tensor."""
    if op.attr("mode") not in PAD_MODES:
        return f"pad mode {op.attr('mode')!r} (reflect, edge, wrap)"
    if any(int(p) < 0 for p in op.attr("pads", ())):
        return "negative pads (cropping)"
    return rank4_or_less(op, tensors)


class PadMode(OpEmitter):
    """pad_mode: reflect / edge / wrap padding as an index gather.

    pad_mode (reflect / edge / wrap): the shape of a pad; one copy per output element.
    """

    # reflect / edge / wrap padding (ONNX Pad modes); a per-axis index gather
    order = 280
    definition = OpDef("pad_mode", ("pads", "mode"), onnx=("Pad",), kernels=frozenset({F32_NCHW}))
    float_checks = (known_pad_mode,)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        pads = tuple(int(p) for p in op.attr("pads"))
        rank = len(x)
        return tuple(x[i] + pads[i] + pads[i + rank] for i in range(rank))

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        xs = ctx.shape(op.inputs[0])
        pads, rank, mode = op.attr("pads"), len(xs), op.attr("mode")
        index = [pad_index(xs[d], int(pads[d]), int(pads[d + rank]), mode) for d in range(rank)]
        return _gather_call(op, ctx, index)


def resize_index(
    op: Op, xs: Sequence[int], ys: Sequence[int]
) -> list[np.ndarray] | list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per axis: the nearest source index (mode nearest) or the linear taps (mode linear)."""
    scales, cm = op.attr("scales"), op.attr("coord_mode")
    coords = [resize_coords(n, m, s, cm) for n, m, s in zip(xs, ys, scales, strict=True)]
    if op.attr("mode") == "nearest":
        nm = op.attr("nearest_mode")
        return [nearest_index(c, n, nm) for c, n in zip(coords, xs, strict=True)]
    return [linear_taps(c, n) for c, n in zip(coords, xs, strict=True)]


def resizable(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Nearest on any axes; linear only over the last two axes of a rank <= 4 tensor."""
    if op.attr("mode") not in ("nearest", "linear"):
        return f"resize mode {op.attr('mode')!r} (nearest, linear)"
    if op.attr("coord_mode") not in COORD_MODES:
        return f"coordinate_transformation_mode {op.attr('coord_mode')!r}"
    if op.attr("mode") == "nearest" and op.attr("nearest_mode") not in NEAREST_MODES:
        return f"nearest_mode {op.attr('nearest_mode')!r}"
    reason = rank4_or_less(op, tensors)
    if reason or op.attr("mode") == "nearest":
        return reason
    xs, ys = tensors[op.inputs[0]].shape, tensors[op.outputs[0]].shape
    for d in range(max(0, len(xs) - 2)):
        if xs[d] != ys[d] or float(op.attr("scales")[d]) != 1.0:
            return f"linear resize of axis {d} (only the last two axes)"
    return None


class Resize(OpEmitter):
    """resize: nearest as ``k_gather_axes``, linear as ``k_resize_linear`` (last two axes).

    resize to ``sizes`` (the output shape: ONNX's ``floor(n * scale)`` or the given sizes).
    Nearest: one copy per output element; linear: 4 MAC-equivalents per output element (three
    lerps ``a + w (b - a)`` and the weight loads).
    """

    # ONNX Resize (nearest: an index gather; linear: bilinear over the last two axes); the
    # per-axis source coordinates follow coord_mode / nearest_mode and the per-axis scales
    # (given, or out / in from sizes) of the ONNX spec; sizes = the output shape
    order = 300
    definition = OpDef(
        "resize",
        ("mode", "coord_mode", "nearest_mode", "scales", "sizes"),
        onnx=("Resize",),
        kernels=frozenset({F32_NCHW}),
    )
    float_checks = (resizable,)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        if len(op.attr("sizes")) != len(in_shapes[0]):
            raise ShapeError(
                f"{op.name}: resize sizes {op.attr('sizes')} of a rank-{len(in_shapes[0])} tensor"
            )
        return tuple(int(d) for d in op.attr("sizes"))

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * (4 if op.attr("mode") == "linear" else 1)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        xs, ys = ctx.shape(x), ctx.shape(y)
        index = resize_index(op, xs, ys)
        if op.attr("mode") == "nearest":
            return _gather_call(op, ctx, index)  # type: ignore[arg-type]
        st = _strides4(xs)
        taps = [(np.zeros(1, np.int64),) * 2 + (np.zeros(1, np.float32),)] * (4 - len(xs))
        taps += list(index)  # type: ignore[arg-type]
        lines = [
            _int_array("m0", [int(v) * st[0] for v in taps[0][0]]),
            _int_array("m1", [int(v) * st[1] for v in taps[1][0]]),
            _int_array("h0", [int(v) * st[2] for v in taps[2][0]]),
            _int_array("h1", [int(v) * st[2] for v in taps[2][1]]),
            _float_array("fh", [float(v) for v in taps[2][2]]),
            _int_array("w0", [int(v) for v in taps[3][0]]),
            _int_array("w1", [int(v) for v in taps[3][1]]),
            _float_array("fw", [float(v) for v in taps[3][2]]),
        ]
        rows: list[list[tuple[str, object]]] = [
            [("ys", f"{{{ints(pad4(ys))}}}")],
            [("m0", "m0"), ("m1", "m1"), ("h0", "h0"), ("h1", "h1")],
            [("w0", "w0"), ("w1", "w1"), ("fh", "fh"), ("fw", "fw")],
        ]
        lines += record("k_resize_params", "p", rows)
        return block(lines, f"k_resize_linear(&p, {ctx.ptr(x)}, {ctx.ptr(y)})")
