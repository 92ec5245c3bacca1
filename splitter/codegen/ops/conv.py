"""conv2d (and depthwise, ``groups == C``): ``k_conv2d`` / ``k_conv2d_nhwc`` / ``k_q_conv2d``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from splitter.codegen.ops.base import (
    EmitContext,
    OpEmitter,
    act_ok,
    act_record,
    all_int8,
    block,
    image_batch1,
    nhwc_batch1,
    q8_act_ok,
    record,
)
from splitter.codegen.ops.formulas import Shape, act_macs, spatial_axes, window_out
from splitter.codegen.ops.opdef import ALL, OpDef
from splitter.codegen.ops.q8_variants import conv_weights, depthwise_weights, variant_name
from splitter.codegen.ops.quant import act_range, bias, gemm_rounding, qp, requant_arrays
from splitter.ir import Op, TensorSpec


def pack4(w2d: np.ndarray) -> np.ndarray:
    """Rows in blocks of 4 interleaved: block b holds ``w[4b + r, k]`` at ``(b*K + k)*4 + r``.

    The ``O % 4`` last rows stay row-major; same number of elements (no padding). This is the
    layout ``conv_pointwise``/``conv_blocked``/``k_dense`` in kernels.c read.
    """
    o, k = w2d.shape
    nb = o // 4
    blocks = w2d[: nb * 4].reshape(nb, 4, k).transpose(0, 2, 1).ravel()
    return np.concatenate([blocks, w2d[nb * 4 :].ravel()]).astype(np.float32)


def ohwi(w: np.ndarray) -> np.ndarray:
    """Canonical conv weights ``(O, C/groups, kh, kw)`` as TFLite's ``(O, kh, kw, C/groups)``.

    ``ohwi(w)[o, ky, kx, c] = w[o, c, ky, kx]``: the order ``k_conv2d_nhwc`` reads, so the
    innermost loop runs over contiguous input channels; same element count (FLASH unchanged).
    """
    return np.ascontiguousarray(np.asarray(w).transpose(0, 2, 3, 1))


def nhwc_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """Canonical conv weights ``(O, C/groups, kh, kw)`` in the order ``k_conv2d_nhwc`` reads.

    ``groups == 1``: :func:`ohwi` rows packed by :func:`pack4` (element ``k = (ky*kw + kx)*C + c``
    of 4 output channels interleaved, the 4 x 4 pixel-by-channel blocking of kernels_nhwc.c);
    depthwise (``C/groups == 1``): ``(kh, kw, O)``, TFLite's own depthwise order, so the channels
    of a tap are contiguous; any other grouping: :func:`ohwi`. Same element count in every case.
    """
    w = np.asarray(w, dtype=np.float32)
    if groups == 1:
        return pack4(ohwi(w).reshape(w.shape[0], -1))
    if w.shape[1] == 1:
        return np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))
    return ohwi(w)


def window_record(
    op: Op,
    ctx: EmitContext,
    kernel: Sequence[int],
    *,
    groups: int = 1,
    act: str = "{K_ACT_NONE, 0.0f, 0.0f}",
) -> list[str]:
    """The ``k_window_params p`` record of a conv or pool ``op`` (kernels.h).

    Input ``C x H x W`` and output ``O x OH x OW`` are read from the tensors in the graph's
    layout (NCHW, or NHWC for ``ctx.layout == "NHWC"``); strides, the four pads (top, left,
    bottom, right), dilations and ``count_include_pad`` from the op's attributes.
    """
    nhwc = ctx.layout == "NHWC"
    x, y = ctx.shape(op.inputs[0]), ctx.shape(op.outputs[0])
    (_, h, w, c), (_, oh, ow, o) = (x, y) if nhwc else ((x[0], *x[2:], x[1]), (y[0], *y[2:], y[1]))
    sh, sw = op.attr("strides", (1, 1))
    pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
    dh, dw = op.attr("dilations", (1, 1))
    cip = 1 if op.attr("count_include_pad", 0) else 0
    rows: list[list[tuple[str, object]]] = [
        [("C", c), ("H", h), ("W", w), ("O", o), ("OH", oh), ("OW", ow)],
        [("kh", int(kernel[0])), ("kw", int(kernel[1])), ("sh", sh), ("sw", sw)],
        [("pt", pt), ("pl", pl), ("pb", pb), ("pr", pr)],
        [("dh", dh), ("dw", dw), ("groups", groups), ("count_include_pad", cip)],
        [("act", act)],
    ]
    return record("k_window_params", "p", rows)


def q_record(
    op: Op, ctx: EmitContext, requant: tuple[str, str, int] | None = None, round_up: int = 0
) -> list[str]:
    """The ``k_q_params q`` record (kernels_q8.h): zero points, the fused activation's clamp and,
    for conv / dense, the per-channel multipliers ``requant = (mult, shift, nq)``."""
    x, y = op.inputs[0], op.outputs[0]
    _, in_zp = qp(ctx.tensors[x])
    _, out_zp = qp(ctx.tensors[y])
    lo, hi = act_range(op, ctx.tensors[y])
    mult, shift, nq = requant or ("0", "0", 0)
    rows: list[list[tuple[str, object]]] = [
        [("in_zp", in_zp), ("out_zp", out_zp), ("act_min", lo), ("act_max", hi)],
        [("nq", nq), ("round_up", round_up), ("mult", mult), ("shift", shift)],
    ]
    return record("k_q_params", "q", rows)


def weights_4d(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constant 4-D weights ``W``."""
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 4:
        return "conv2d needs constant 4-D weights W"
    return None


def q8_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """int8 ``W`` with zero weight zero points, one scale per tensor or output channel, int32
    ``B``: the TFLite full-integer convention conv and dense kernels assume."""
    w = op.weights.get("W")
    if w is None or np.asarray(w).dtype != np.int8:
        return "int8 op needs int8 weights W"
    scales = op.attr("w_scale") or ()
    if len(scales) not in (1, np.asarray(w).shape[0]):
        return f"{len(scales)} weight scales for {np.asarray(w).shape[0]} output channels"
    if any(int(z) != 0 for z in op.attr("w_zero_point") or ()):
        return "non-zero weight zero points"
    b = op.weights.get("B")
    if b is not None and np.asarray(b).dtype != np.int32:
        return f"bias is {np.asarray(b).dtype} (int32 only)"
    if set(op.weights) - {"W", "B"}:
        return f"unexpected constants {sorted(set(op.weights) - {'W', 'B'})}"
    return None


def q8_conv_kind(op: Op, ins: Sequence[TensorSpec]) -> str:
    """Which int8 kernel family runs a conv2d (the ``k_q_<kind>_<isa>`` kernels of
    kernels_q8_opt.c; splitter/codegen/ops/q8_variants.py picks the ISA): ``"pointwise"`` (1x1,
    stride 1,
    no padding, groups 1), ``"conv"`` (other groups 1), ``"depthwise"`` (groups == C == O, depth
    multiplier 1), ``"grouped"`` (the generic ``k_q_conv2d``); ``""`` for a float conv."""
    if not ins or ins[0].dtype != "int8":
        return ""
    w = op.weights["W"]
    groups = int(op.attr("groups", 1))
    if groups == 1:
        one = tuple(w.shape[2:]) == (1, 1) and tuple(op.attr("strides", (1, 1))) == (1, 1)
        flat = not any(op.attr("pads", (0, 0, 0, 0)))
        return "pointwise" if one and flat else "conv"
    if int(w.shape[1]) == 1 and int(w.shape[0]) == groups:
        return "depthwise"
    return "grouped"


#: most bytes of re-laid weights a conv copies into its scratch (``K_CONV_PADW``)
CONV_PADW = 2048


def conv_padded_k(op: Op) -> int:
    """``K'`` of an int8 conv's re-laid im2col (``conv_padded_k``, kernels_q8_opt.c), 0 when it
    keeps ``K = kh * kw * C``: for ``K % 4 != 0``, dilation 1 along a row and
    ``O * K' <= CONV_PADW``, ``K' = ceil8(K)`` (a 3x3x3 first layer: 32)."""
    o, c, kh, kw = (int(v) for v in op.weights["W"].shape)
    k = kh * kw * c
    kp = (k + 7) // 8 * 8
    dw = int(tuple(op.attr("dilations", (1, 1)))[1])
    if k % 4 == 0 or dw != 1 or o * kp > CONV_PADW:
        return 0
    return kp


def dw3_ring_bytes(op: Op, x: TensorSpec) -> int:
    """Scratch bytes of the int8 depthwise ``op`` on input ``x`` (``k_q_depthwise_scratch``,
    kernels_q8_opt.c): ``4 + 2 * 3 * 4 * RW`` for a 3x3 kernel with dilation 1, stride 1,
    ``C >= 4`` channels and at least 4 pixels along the longer axis, ``RW = L + W + pr + 3``
    rounded up to even with ``L = pl`` rounded up to even (``H``, ``pt``, ``pb`` in their
    place when ``H > W``: the ring's lines are then the input's columns); 0 otherwise. ``H``,
    ``W`` come from the NHWC shape (the int8 kernels' layout; NCHW when the last axis is not
    the channel count)."""
    w = op.weights["W"]
    c = int(w.shape[0])
    pt, pl, pb, pr = (int(v) for v in op.attr("pads", (0, 0, 0, 0)))
    unit = tuple(op.attr("strides", (1, 1))) == tuple(op.attr("dilations", (1, 1))) == (1, 1)
    height, width = (int(v) for v in (x.shape[1:3] if x.shape[-1] == c else x.shape[2:4]))
    if tuple(w.shape[2:]) != (3, 3) or not unit or c < 4 or max(height, width) < 4:
        return 0
    if height > width:  # the ring's lines are the input's columns (dw3_geom)
        pl, pr, width = pt, pb, height
    n = pl + pl % 2 + width + pr + 3
    return 4 + 2 * 3 * 4 * (n + n % 2)


def dw3_row_ring_bytes(op: Op, x: TensorSpec) -> int:
    """The most scratch bytes ``k_q_depthwise_scratch`` asks for on any call of a PEX row loop
    (input ``H' <= H`` rows of width ``W``, top and bottom pads at most the op's): the ring of
    the whole op (:func:`dw3_ring_bytes`; lines along ``H`` when ``H > W``, the longest such
    call's) and the ring with lines along ``W`` (the calls with ``H' <= W``), the larger."""
    h, w, c = (int(v) for v in x.shape[1:4])
    rows = dw3_ring_bytes(op, replace(x, shape=(x.shape[0], min(h, w), w, c)))
    return max(dw3_ring_bytes(op, x), rows)


class Conv2D(OpEmitter):
    """``y = act(conv(x, W) + B)``; NCHW weights packed by :func:`pack4` (groups 1), NHWC float
    weights as :func:`nhwc_weights`, int8 weights as :func:`ohwi`; int8 requantises per output
    channel.

    conv2d, W ``(O, I/groups, kh, kw)``.

    MACs ``= Hout*Wout*O*(I/groups)*kh*kw + [bias] Hout*Wout*O + O + act`` (X-CUBE-AI,
    :mod:`splitter.codegen.ops.formulas`); a 1x1 conv with a 1x1 output is a dense layer
    to X-CUBE-AI and has no ``+ O`` term (MobileNet v1 ``Conv2D_preds`` 256 -> 1000: 257 000).
    Output ``Hout = floor((H + pt + pb - d*(kh-1) - 1)/s) + 1`` (ONNX Conv).
    """

    # y = conv(x, W) + B, W (O, I/groups, kh, kw); groups == C is a depthwise conv
    order = 10
    definition = OpDef(
        "conv2d",
        ("kernel", "strides", "pads", "dilations", "groups", "act"),
        onnx=("Conv",),
        tflite=("CONV_2D", "DEPTHWISE_CONV_2D"),
        kernels=ALL,
    )
    float_checks = (weights_4d, image_batch1, act_ok)
    int8_checks = (all_int8, q8_weights, q8_act_ok, nhwc_batch1)

    op_class = "conv"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        c_ax, h_ax, w_ax = spatial_axes(layout, len(x))
        out_ch = int(op.weights["W"].shape[0])
        kh, kw = op.attr("kernel", op.weights["W"].shape[2:])
        sh, sw = op.attr("strides", (1, 1))
        pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
        dh, dw = op.attr("dilations", (1, 1))
        out = list(x)
        out[c_ax] = out_ch
        out[h_ax] = window_out(x[h_ax], kh, sh, pt + pb, dh)
        out[w_ax] = window_out(x[w_ax], kw, sw, pl + pr, dw)
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        w = op.weights["W"]
        out_ch, per_group_in, kh, kw = (int(d) for d in w.shape)
        total = out.size * per_group_in * kh * kw
        if not self._is_dense(op, out):
            total += out_ch
        if "B" in op.weights:
            total += out.size
        return total + act_macs(op, out, relu_free=True)

    @staticmethod
    def _is_dense(op: Op, out: TensorSpec) -> bool:
        """A 1x1 conv producing one value per channel, which X-CUBE-AI runs as a dense layer."""
        w = op.weights["W"]
        return int(op.attr("groups", 1)) == 1 and w.shape[2:] == (1, 1) and out.size == w.shape[0]

    def mac_class(self, op: Op, ins: Sequence[TensorSpec]) -> str:
        groups = int(op.attr("groups", 1))
        per_group_in = int(op.weights["W"].shape[1])
        return "depthwise" if groups > 1 and per_group_in == 1 else "conv"

    def scratch_bytes(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec, item: int) -> int:
        """The int8 conv's im2col columns (``k_q_conv_scratch``, kernels_q8_opt.c): for
        groups 1, ``4 + 2 * 2 * (K + K % 2)`` bytes with ``K = kh * kw * C / groups``, two
        output pixels' columns of ``x - in_zp`` as int16, the count rounded up to even, plus 4
        bytes to align them to 4 inside the arena block (3 would do; 4 keeps the block a
        multiple of 4 bytes, as the firmware's float-typed arena is). An int8 3x3 depthwise
        (dilation 1, stride 1, ``C >= 4``): its padded input ring
        (``k_q_depthwise_scratch``), ``4 + 2 * 3 * 4 * RW`` bytes, three rows of four int16
        channel planes of ``RW = L + W + pr + 3`` halfwords rounded up to even, ``L`` the left
        padding rounded up to even. A conv with re-laid columns (:func:`conv_padded_k`):
        ``4 + 2 * 2 * K' + 2 * O * K'``, the columns at ``K'`` and its weights copied as
        int16. Float convs and the other int8 convs read their input directly: 0."""
        kind = q8_conv_kind(op, ins)
        if kind == "depthwise":
            return dw3_ring_bytes(op, ins[0])
        if kind not in ("conv", "pointwise"):
            return 0
        k = int(np.prod(op.weights["W"].shape[1:]))
        kp = conv_padded_k(op)
        if kp:
            return 4 + 2 * 2 * kp + 2 * int(op.weights["W"].shape[0]) * kp
        return 4 + 2 * 2 * (k + k % 2)

    def row_scratch_bytes(
        self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec, item: int, band: int = 1
    ) -> int:
        """In a PEX row loop: the conv / pointwise im2col columns; a depthwise's line ring for
        any call of the loop (:func:`dw3_row_ring_bytes`) when it computes bands of rows (one
        row per call, the ring would load every input row three times: the window loops, 0)."""
        if q8_conv_kind(op, ins) == "depthwise":
            return dw3_row_ring_bytes(op, ins[0]) if band > 1 else 0
        return self.scratch_bytes(op, ins, out, item)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        wt = np.asarray(op.weights["W"], dtype=np.float32)
        groups = int(op.attr("groups", 1))
        if ctx.layout == "NHWC":
            fn, wn = "k_conv2d_nhwc", ctx.const(op, "W", nhwc_weights(wt, groups))
        else:
            packed = pack4(wt.reshape(wt.shape[0], -1)) if groups == 1 else wt
            fn, wn = "k_conv2d", ctx.const(op, "W", packed)
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        params = window_record(op, ctx, wt.shape[2:], groups=groups, act=act_record(op))
        x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
        return block(params, f"{fn}(&p, {x}, {wn}, {bn}, {y})")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        """``k_<variant>`` (:mod:`codegen.ops.q8_variants`): conv / pointwise with the layer's
        im2col scratch block, depthwise, or the generic ``k_q_conv2d`` for grouped convs."""
        wt = np.asarray(op.weights["W"])
        fn, wn, scratch = q8_kernel(op, ctx)
        bn = bias(op, ctx)
        requant = requant_arrays(op, ctx)
        groups = int(op.attr("groups", 1))
        params = window_record(op, ctx, wt.shape[2:], groups=groups)
        params += q_record(op, ctx, requant, gemm_rounding(op))
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        s = f"{scratch}, " if scratch else ""
        return block(params, f"{fn}(&p, &q, {x}, {wn}, {bn}, {s}{y})")


def q8_kernel(
    op: Op, ctx: EmitContext, *, whole: bool = True, band: int = 1
) -> tuple[str, str, str]:
    """The int8 conv's kernel (``k_<variant>``), its weights in the variant's layout (added to
    the weights blob) and its scratch argument (``""`` for the kernels without one): the one
    choice the whole op and a PEX row loop (:mod:`splitter.codegen.pex_rows`, ``whole=False``)
    share. The depthwise takes its line ring when it has one (run whole:
    :func:`dw3_ring_bytes`; in a row loop of ``band > 1`` rows per iteration:
    :func:`dw3_row_ring_bytes`), else ``0`` (the window loops)."""
    x = ctx.tensors[op.inputs[0]]
    family = q8_conv_kind(op, [x])
    layout = {"conv": conv_weights, "pointwise": conv_weights, "depthwise": depthwise_weights}
    w = layout.get(family, lambda a: a)(ohwi(np.asarray(op.weights["W"])))
    wn = ctx.weights.add(f"{op.name}_W", w, np.int8)
    scratch = ""
    ring = dw3_ring_bytes(op, x) if whole else dw3_row_ring_bytes(op, x) * (band > 1)
    if family in ("conv", "pointwise") or (family == "depthwise" and ring):
        scratch = ctx.p8(f"{op.name}:scratch")
    elif family == "depthwise":
        scratch = "0"
    return "k_" + variant_name(family, ctx.isa), wn, scratch
