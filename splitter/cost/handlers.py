"""One cost handler per canonical op kind, registered explicitly in :data:`HANDLERS`.

Every handler answers three questions about one :class:`~splitter.ir.Op`:

* :meth:`OpHandler.infer_shape` - the output shape from the input shapes (used to check importers);
* :meth:`OpHandler.macs` - multiply-accumulates of one inference (MAC_j of SPEC.md);
* :meth:`OpHandler.scratch_bytes` - extra working memory the kernel needs while it runs.

MAC convention (X-CUBE-AI, as in the thesis's Appendix A tables). Read off
``models/profiles/thesis_profiles.json`` (a copy of ``../shared/data/``); every
conv/dense/pool/BN/softmax row of the eight profiles is reproduced exactly by these rules:

FLASH (:func:`op_flash`) is the bytes of the op's constant arrays by dtype plus, for an op with
quantised int8 weights, 8 bytes per weight scale: the int32 fixed-point multiplier and int32
shift the int8 kernels requantise each output channel with (splitter/codegen/ops/quant.py).

* conv2d: ``Hout*Wout*Cout*(Cin/groups)*kh*kw`` products, ``+ Hout*Wout*Cout`` when there is a
  bias, ``+ Cout`` (X-CUBE-AI's per-output-channel term, present with and without bias). Tiny-CNN
  conv 1 (28x28x1 -> 26x26x16, maxpool 2 -> 13x13x16): ``97344 + 10816 + 16`` plus the pool's
  ``13*13*16*4 = 10816`` gives the table's 118 992.
* a fused ReLU is free in a conv (X-CUBE-AI folds it into the kernel's store; tiny_cnn, kws_cnn,
  yamnet rows), any other fused activation (ReLU6/clip in MobileNet v1 rows, ...) costs one per
  output element; on every other op any fused activation costs one per output element (kws_cnn
  Dense 16->128 with ReLU: ``16*128 + 128 + 128 = 2304``).
* dense: ``in*out`` ``+ out`` with a bias (kws_cnn Dense 1920->16: 30 736).
* max/avg pool: one per output element per kernel tap; global average pool and mean: one per
  input element (kws_ds_cnn AVGPool 25x5x64 -> 64: 8000).
* batchnorm (unfused scale and shift): two per element (kws_cnn BatchNorm 40x7x28: 15 680).
* softmax: 15 per element (MobileNet v1 ``Predictions`` 1000 -> 15 000; Tiny-CNN's dense row
  ``480 + 10 + 150 = 640``).
* element-wise binary ops, activations, concat, pad (every mode), slice, nearest resize,
  transpose, quantize, dequantize: one per output element, so that no op that does work costs
  zero time (issue 2); linear resize: four per output element.
* reshape (also Flatten/Squeeze/Unsqueeze): zero, it is a view of the same bytes.

MACs count the whole tensors, batch dimension included (batch is 1 in every model here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from types import MappingProxyType

import numpy as np

from splitter.errors import ShapeError, UnsupportedOpError
from splitter.ir import Op, TensorSpec

Shape = tuple[int, ...]

#: MAC classes of LayerCost.macs_by_class.
MAC_CLASSES = ("conv", "depthwise", "dense", "other")

#: X-CUBE-AI's MAC-equivalents per softmax element (thesis profiles, ``Predictions`` rows).
SOFTMAX_MACS_PER_ELEMENT = 15

#: X-CUBE-AI's MAC-equivalents per element of an unfused BatchNormalization (scale + shift).
BATCHNORM_MACS_PER_ELEMENT = 2


def op_flash(op: Op) -> int:
    """FLASH of one op: exactly the ``.weights`` arrays the C generator emits for it.

    ``sum(w.nbytes for w in op.weights.values())`` (arena rule, FLASH_j: float32 arrays as they
    are; int8 weights and int32 biases at their own itemsize), plus, when ``W`` is int8
    (TFLite full-integer models, ``attrs["w_scale"]`` per tensor or per output channel),
    ``8 * len(w_scale)``: one int32 multiplier and one int32 shift per scale, the
    requantisation ``in_scale * w_scale[c] / out_scale`` the int8 kernels apply. The scales and
    zero points themselves are not stored (folded into those multipliers; TFLite fixes weight
    and bias zero points at 0).
    """
    total = sum(int(np.asarray(w).nbytes) for w in op.weights.values())
    if "W" in op.weights and np.asarray(op.weights["W"]).dtype == np.int8:
        total += 8 * len(op.attr("w_scale", ()) or ())
    return total


def _spatial_axes(layout: str, rank: int) -> tuple[int, int, int]:
    """(channel axis, first spatial axis, second spatial axis) of a rank-4 activation."""
    if rank != 4:
        raise ShapeError(f"expected a rank-4 image tensor, got rank {rank}")
    return (3, 1, 2) if layout == "NHWC" else (1, 2, 3)


def _window_out(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Output length of a sliding window: ``floor((n + pads - d*(k-1) - 1) / s) + 1`` (ONNX)."""
    return (size + pad - dilation * (k - 1) - 1) // stride + 1


def _act_macs(op: Op, out: TensorSpec, *, relu_free: bool = False) -> int:
    """MACs of a fused activation ``attrs["act"]``: one per output element (ReLU free in convs)."""
    act = op.attr("act")
    if not act or (relu_free and act == "relu"):
        return 0
    return out.size


class OpHandler:
    """Base handler: same-shape output, one MAC-equivalent per output element, no scratch."""

    op_class = "other"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        """Output shape of ``op`` given its input shapes and the graph layout."""
        return tuple(in_shapes[0])

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        """One MAC-equivalent per output element (plus nothing for a fused activation)."""
        return out.size

    def mac_class(self, op: Op, ins: Sequence[TensorSpec]) -> str:
        """Which class of :data:`MAC_CLASSES` the op's MACs count in."""
        return self.op_class

    def scratch_bytes(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec, item: int) -> int:
        """Kernel scratch in bytes; the float kernels here need none (direct loops)."""
        return 0


class Conv2DHandler(OpHandler):
    """conv2d, W ``(O, I/groups, kh, kw)``.

    MACs ``= Hout*Wout*O*(I/groups)*kh*kw + [bias] Hout*Wout*O + O + act`` (X-CUBE-AI, see the
    module docstring); a 1x1 conv with a 1x1 output is a dense layer to X-CUBE-AI and has no
    ``+ O`` term (MobileNet v1 ``Conv2D_preds`` 256 -> 1000: 257 000).
    Output ``Hout = floor((H + pt + pb - d*(kh-1) - 1)/s) + 1`` (ONNX Conv).
    """

    op_class = "conv"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        c_ax, h_ax, w_ax = _spatial_axes(layout, len(x))
        out_ch = int(op.weights["W"].shape[0])
        kh, kw = op.attr("kernel", op.weights["W"].shape[2:])
        sh, sw = op.attr("strides", (1, 1))
        pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
        dh, dw = op.attr("dilations", (1, 1))
        out = list(x)
        out[c_ax] = out_ch
        out[h_ax] = _window_out(x[h_ax], kh, sh, pt + pb, dh)
        out[w_ax] = _window_out(x[w_ax], kw, sw, pl + pr, dw)
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        w = op.weights["W"]
        out_ch, per_group_in, kh, kw = (int(d) for d in w.shape)
        total = out.size * per_group_in * kh * kw
        if not self._is_dense(op, out):
            total += out_ch
        if "B" in op.weights:
            total += out.size
        return total + _act_macs(op, out, relu_free=True)

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
        multiple of 4 bytes, as the firmware's float-typed arena is). Float convs and the other
        int8 convs (depthwise, grouped) read their input directly: 0."""
        if q8_conv_kind(op, ins) not in ("conv", "pointwise"):
            return 0
        k = int(np.prod(op.weights["W"].shape[1:]))
        return 4 + 2 * 2 * (k + k % 2)


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


class DenseHandler(OpHandler):
    """dense ``y = x @ W.T + B``, W ``(out, in)``: MACs ``= in*out + [bias] out + act``."""

    op_class = "dense"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        n_out, n_in = (int(d) for d in op.weights["W"].shape)
        total = prod(in_shapes[0])
        if total % n_in:
            raise ShapeError(f"{op.name}: input of {total} elements is not a multiple of {n_in}")
        return (total // n_in, n_out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        n_out, n_in = (int(d) for d in op.weights["W"].shape)
        rows = out.size // n_out
        total = rows * n_in * n_out
        if "B" in op.weights:
            total += out.size
        return total + _act_macs(op, out)


class MatMulHandler(OpHandler):
    """matmul of two activations ``(..., M, K) @ (..., K, N)``: MACs ``= prod(out) * K + act``."""

    op_class = "dense"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        a, b = in_shapes[0], in_shapes[1]
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
        return (*batch, a[-2], b[-1])

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * int(ins[0].shape[-1]) + _act_macs(op, out)


class PoolHandler(OpHandler):
    """maxpool / avgpool: one MAC-equivalent per output element per kernel tap (``kh*kw``)."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        _, h_ax, w_ax = _spatial_axes(layout, len(x))
        kh, kw = op.attr("kernel")
        sh, sw = op.attr("strides", (kh, kw))
        pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
        out = list(x)
        out[h_ax] = _window_out(x[h_ax], kh, sh, pt + pb)
        out[w_ax] = _window_out(x[w_ax], kw, sw, pl + pr)
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        kh, kw = op.attr("kernel")
        return out.size * int(kh) * int(kw) + _act_macs(op, out)


class GlobalAvgPoolHandler(OpHandler):
    """global_avgpool: one MAC-equivalent per input element (``H*W`` taps per output)."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        _, h_ax, w_ax = _spatial_axes(layout, len(x))
        out = list(x)
        out[h_ax] = out[w_ax] = 1
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return ins[0].size + _act_macs(op, out)


class MeanHandler(OpHandler):
    """mean over ``axes``: one MAC-equivalent per input element."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        axes = {int(a) % len(x) for a in op.attr("axes", range(len(x)))}
        if op.attr("keepdims", True):
            return tuple(1 if i in axes else d for i, d in enumerate(x))
        return tuple(d for i, d in enumerate(x) if i not in axes)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return ins[0].size + _act_macs(op, out)


class BinaryHandler(OpHandler):
    """add / sub / mul / div with numpy broadcasting (a constant operand is ``weights["C"]``).

    MACs: one per output element ``+ act``.
    """

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        shapes = [tuple(s) for s in in_shapes]
        if "C" in op.weights:
            shapes.append(tuple(op.weights["C"].shape))
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size + _act_macs(op, out)


class ConcatHandler(OpHandler):
    """concat along ``axis``: one MAC-equivalent (a copy) per output element."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        axis = int(op.attr("axis", 0)) % len(in_shapes[0])
        out = list(in_shapes[0])
        out[axis] = sum(int(s[axis]) for s in in_shapes)
        return tuple(out)


class UnaryHandler(OpHandler):
    """Element-wise activation (relu, relu6, clip, sigmoid, tanh...): one per output element."""


class SoftmaxHandler(OpHandler):
    """softmax: :data:`SOFTMAX_MACS_PER_ELEMENT` (15, X-CUBE-AI) per output element."""

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return SOFTMAX_MACS_PER_ELEMENT * out.size


class LRNHandler(OpHandler):
    """lrn: ``size`` MAC-equivalents per output element for the window's sum of squares plus
    one for the scaling ``x * (bias + alpha / size * sum)^-beta`` (the element-wise rule):
    MACs ``= out * (size + 1)``. No thesis profile has an LRN row; this is splitter's rule."""

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * (int(op.attr("size")) + 1)


class BatchNormHandler(OpHandler):
    """Unfused batchnorm ``x*scale + shift``: :data:`BATCHNORM_MACS_PER_ELEMENT` per element
    ``+ act``."""

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return BATCHNORM_MACS_PER_ELEMENT * out.size + _act_macs(op, out)


class PadHandler(OpHandler):
    """pad, ``pads`` = begins of every axis then ends (ONNX): one copy per output element."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        pads = tuple(int(p) for p in op.attr("pads"))
        rank = len(x)
        return tuple(x[i] + pads[i] + pads[i + rank] for i in range(rank))


class PadModeHandler(PadHandler):
    """pad_mode (reflect / edge / wrap): the shape of a pad; one copy per output element."""


class SliceHandler(OpHandler):
    """slice: per axis ``len(range(starts, ends, steps))`` elements (the importer normalises the
    bounds as Python's ``slice.indices``); one copy per output element."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        bounds = list(zip(op.attr("starts"), op.attr("ends"), op.attr("steps"), strict=True))
        if len(bounds) != len(x):
            raise ShapeError(f"{op.name}: slice of a rank-{len(x)} tensor needs {len(x)} bounds")
        return tuple(len(range(int(a), int(b), int(s))) for a, b, s in bounds)


class ResizeHandler(OpHandler):
    """resize to ``sizes`` (the output shape: ONNX's ``floor(n * scale)`` or the given sizes).
    Nearest: one copy per output element; linear: 4 MAC-equivalents per output element (three
    lerps ``a + w (b - a)`` and the weight loads)."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        if len(op.attr("sizes")) != len(in_shapes[0]):
            raise ShapeError(
                f"{op.name}: resize sizes {op.attr('sizes')} of a rank-{len(in_shapes[0])} tensor"
            )
        return tuple(int(d) for d in op.attr("sizes"))

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * (4 if op.attr("mode") == "linear" else 1)


class ReshapeHandler(OpHandler):
    """reshape (Flatten, Squeeze, Unsqueeze): zero MACs, the output aliases the input's bytes.

    ``shape`` may hold one ``-1`` (inferred) and ``0`` (copy the input's dimension, ONNX).
    """

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        target = [int(d) for d in op.attr("shape")]
        target = [x[i] if d == 0 and i < len(x) else d for i, d in enumerate(target)]
        if -1 in target:
            known = prod(d for d in target if d != -1)
            target[target.index(-1)] = prod(x) // known if known else 0
        if prod(target) != prod(x):
            raise ShapeError(f"{op.name}: cannot reshape {x} to {tuple(target)}")
        return tuple(target)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return 0


class TransposeHandler(OpHandler):
    """transpose by ``perm``: one copy per output element."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        perm = op.attr("perm") or tuple(reversed(range(len(x))))
        return tuple(x[int(p)] for p in perm)


class QuantizeHandler(UnaryHandler):
    """quantize / dequantize: one per element; the shape transposed by ``perm`` when given
    (a QDQ ONNX input: float NCHW -> int8 NHWC, ``splitter.importers.onnx_qdq``)."""

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x, perm = in_shapes[0], op.attr("perm")
        return tuple(x) if perm is None else tuple(x[int(p)] for p in perm)


_UNARY = UnaryHandler()
_BINARY = BinaryHandler()
_POOL = PoolHandler()

#: op kind -> handler; every kind of :data:`splitter.ir.OP_KINDS` has exactly one entry.
HANDLERS: Mapping[str, OpHandler] = MappingProxyType(
    {
        "conv2d": Conv2DHandler(),
        "dense": DenseHandler(),
        "matmul": MatMulHandler(),
        "maxpool": _POOL,
        "avgpool": _POOL,
        "global_avgpool": GlobalAvgPoolHandler(),
        "mean": MeanHandler(),
        "add": _BINARY,
        "sub": _BINARY,
        "mul": _BINARY,
        "div": _BINARY,
        "concat": ConcatHandler(),
        "relu": _UNARY,
        "relu6": _UNARY,
        "clip": _UNARY,
        "leaky_relu": _UNARY,
        "sigmoid": _UNARY,
        "tanh": _UNARY,
        "hardswish": _UNARY,
        "hardsigmoid": _UNARY,
        "erf": _UNARY,
        "gelu": _UNARY,
        "gelu_tanh": _UNARY,
        "lrn": LRNHandler(),
        "softmax": SoftmaxHandler(),
        "batchnorm": BatchNormHandler(),
        "pad": PadHandler(),
        "pad_mode": PadModeHandler(),
        "slice": SliceHandler(),
        "resize": ResizeHandler(),
        "reshape": ReshapeHandler(),
        "transpose": TransposeHandler(),
        "quantize": QuantizeHandler(),
        "dequantize": QuantizeHandler(),
    }
)


def handler(op: Op) -> OpHandler:
    """The handler of ``op.kind`` (:class:`UnsupportedOpError` naming the op otherwise)."""
    try:
        return HANDLERS[op.kind]
    except KeyError:
        raise UnsupportedOpError(
            f"{op.name}: no cost handler for op kind '{op.kind}'; add one to "
            "splitter/cost/handlers.py:HANDLERS"
        ) from None
