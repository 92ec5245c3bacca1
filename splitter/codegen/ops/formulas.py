"""The shape and MAC formulas the op classes share, and the MAC convention they follow.

Every op class (:class:`~splitter.codegen.ops.base.OpKind`) answers these questions about one
:class:`~splitter.ir.Op`:

* `OpKind.infer_shape` - the output shape from the input shapes (used to check importers);
* `OpKind.macs` - multiply-accumulates of one inference (MAC_j of SPEC.md);
* `OpKind.scratch_bytes` - extra working memory the kernel needs while it runs.

MAC convention (X-CUBE-AI, as in the thesis's Appendix A tables). Read off
``models/profiles/thesis_profiles.json`` (a copy of ``../shared/data/``); every
conv/dense/pool/BN/softmax row of the eight profiles is reproduced exactly by these rules:

FLASH (:func:`op_flash`) is the bytes of the op's constant arrays by dtype plus, for an op with
quantised int8 weights, 8 bytes per weight scale: the int32 fixed-point multiplier and int32
shift the int8 kernels requantise each output channel with (:mod:`splitter.codegen.ops.quant`).

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

import numpy as np

from splitter.errors import ShapeError
from splitter.ir import Op, TensorSpec

Shape = tuple[int, ...]

#: MAC classes of LayerCost.macs_by_class.
MAC_CLASSES = ("conv", "depthwise", "dense", "other")

#: X-CUBE-AI's MAC-equivalents per softmax element (thesis profiles, ``Predictions`` rows).
SOFTMAX_MACS_PER_ELEMENT = 15

#: X-CUBE-AI's MAC-equivalents per element of an unfused BatchNormalization (scale + shift).
BATCHNORM_MACS_PER_ELEMENT = 2


#: bytes every weights array is padded to a multiple of (int8 arrays: ``WeightTable.add``)
WEIGHT_ALIGN = 4


def op_flash(op: Op) -> int:
    """FLASH of one op: exactly the ``.weights`` arrays the C generator emits for it.

    ``sum(ceil4(w.nbytes) for w in op.weights.values())`` (arena rule, FLASH_j: float32 arrays
    as they are; int8 weights and int32 biases at their own itemsize, an int8 array zero-padded
    to a multiple of :data:`WEIGHT_ALIGN` bytes as the generator emits it), plus, when ``W`` is int8
    (TFLite full-integer models, ``attrs["w_scale"]`` per tensor or per output channel),
    ``8 * len(w_scale)``: one int32 multiplier and one int32 shift per scale, the
    requantisation ``in_scale * w_scale[c] / out_scale`` the int8 kernels apply. The scales and
    zero points themselves are not stored (folded into those multipliers; TFLite fixes weight
    and bias zero points at 0).
    """
    total = sum(-(-int(np.asarray(w).nbytes) // WEIGHT_ALIGN) * WEIGHT_ALIGN
                for w in op.weights.values())  # fmt: skip
    if "W" in op.weights and np.asarray(op.weights["W"]).dtype == np.int8:
        total += 8 * len(op.attr("w_scale", ()) or ())
    return total


def spatial_axes(layout: str, rank: int) -> tuple[int, int, int]:
    """(channel axis, first spatial axis, second spatial axis) of a rank-4 activation."""
    if rank != 4:
        raise ShapeError(f"expected a rank-4 image tensor, got rank {rank}")
    return (3, 1, 2) if layout == "NHWC" else (1, 2, 3)


def window_out(size: int, k: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Output length of a sliding window: ``floor((n + pads - d*(k-1) - 1) / s) + 1`` (ONNX)."""
    return (size + pad - dilation * (k - 1) - 1) // stride + 1


def act_macs(op: Op, out: TensorSpec, *, relu_free: bool = False) -> int:
    """MACs of a fused activation ``attrs["act"]``: one per output element (ReLU free in convs)."""
    act = op.attr("act")
    if not act or (relu_free and act == "relu"):
        return 0
    return out.size
