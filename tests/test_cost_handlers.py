"""Every op handler's output shape and MAC count against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from splitter.cost.handlers import HANDLERS, handler, op_flash
from splitter.cost.layer import op_macs
from splitter.errors import UnsupportedOpError
from splitter.graph.builder import GraphBuilder
from splitter.ir import Op
from splitter.ops import OP_KINDS


def _last(b: GraphBuilder) -> tuple[Op, tuple[int, ...], int]:
    """(op, output shape, MACs) of the builder's last op."""
    op = b.ops[-1]
    return op, b.tensors[op.outputs[0]].shape, op_macs(op, b.tensors)[1]


def test_every_op_kind_has_exactly_one_handler() -> None:
    assert set(HANDLERS) == set(OP_KINDS)


def test_unknown_kind_is_reported_with_the_op_name() -> None:
    with pytest.raises(UnsupportedOpError, match=r"weird_1.*'frobnicate'"):
        handler(Op("weird_1", "frobnicate", ("x",), ("y",)))


def test_conv2d_nchw_valid_with_bias_and_relu_matches_thesis_row() -> None:
    b = GraphBuilder((1, 1, 28, 28))
    b.conv(b.input, 16, 3, act="relu")
    op, shape, macs = _last(b)
    assert shape == (1, 16, 26, 26)
    # 26*26*16*9 products + 26*26*16 bias + 16 per-channel term; ReLU free in a conv
    assert macs == 97344 + 10816 + 16
    assert op_flash(op) == (16 * 9 + 16) * 4
    assert op_macs(op, b.tensors)[0] == "conv"


def test_conv2d_nhwc_stride_pad_without_bias_and_relu6() -> None:
    b = GraphBuilder((1, 128, 128, 3), layout="NHWC")
    b.conv(b.input, 8, 3, stride=2, pad=1, bias=False, act="relu6")
    _, shape, macs = _last(b)
    assert shape == (1, 64, 64, 8)  # floor((128 + 2 - 2 - 1) / 2) + 1 = 64
    assert macs == 64 * 64 * 8 * 27 + 8 + 64 * 64 * 8  # products + Cout + relu6 per element


def test_depthwise_conv_is_its_own_mac_class() -> None:
    b = GraphBuilder((1, 8, 64, 64))
    b.conv(b.input, 8, 3, pad=1, groups=8, act="relu6")
    op, shape, macs = _last(b)
    assert shape == (1, 8, 64, 64)
    assert macs == 360456  # mobilenet_v1_025 Conv2D_dw row: 32768*(9+1) + 8 + 32768
    assert op_macs(op, b.tensors)[0] == "depthwise"


def test_pointwise_conv_on_a_1x1_map_counts_as_dense() -> None:
    b = GraphBuilder((1, 256, 1, 1))
    b.conv(b.input, 1000, 1)
    _, shape, macs = _last(b)
    assert shape == (1, 1000, 1, 1)
    assert macs == 256 * 1000 + 1000  # mobilenet_v1_025 Conv2D_preds row: 257.0 kMAC, no + Cout
    b2 = GraphBuilder((1, 256, 2, 2))
    b2.conv(b2.input, 10, 1)
    assert _last(b2)[2] == 4 * 10 * 256 + 4 * 10 + 10  # a real 2x2 map keeps the + Cout term


def test_dilated_conv_shape() -> None:
    b = GraphBuilder((1, 2, 10, 10))
    x = b.conv(b.input, 4, 3)
    op = b.ops[-1]
    dilated = Op(
        "d", "conv2d", op.inputs, ("d:out",), {**op.attrs, "dilations": (2, 2)}, op.weights
    )
    assert handler(dilated).infer_shape(dilated, [(1, 2, 10, 10)], "NCHW") == (1, 4, 6, 6)
    assert b.tensors[x].shape == (1, 4, 8, 8)


def test_dense_with_bias_and_relu() -> None:
    b = GraphBuilder((1, 16))
    b.dense(b.input, 128, act="relu")
    op, shape, macs = _last(b)
    assert shape == (1, 128)
    assert macs == 2304  # kws_cnn Dense 16->128: 16*128 + 128 bias + 128 relu
    assert op_flash(op) == (16 * 128 + 128) * 4
    assert op_macs(op, b.tensors)[0] == "dense"


def test_dense_without_bias() -> None:
    b = GraphBuilder((1, 1920))
    b.dense(b.input, 16, bias=False)
    _, shape, macs = _last(b)
    assert (shape, macs) == ((1, 16), 1920 * 16)


def test_matmul_of_two_activations() -> None:
    b = GraphBuilder((1, 4, 6))
    t = b.op("transpose", b.input, perm=(0, 2, 1))
    b.op("matmul", b.input, t)
    _, shape, macs = _last(b)
    assert shape == (1, 4, 4)
    assert macs == 16 * 6


@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
def test_pools_count_taps_per_output(kind: str) -> None:
    b = GraphBuilder((1, 16, 26, 26))
    b.op(kind, b.input, kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0))
    _, shape, macs = _last(b)
    assert shape == (1, 16, 13, 13)
    assert macs == 13 * 13 * 16 * 4


def test_pool_with_padding_and_stride() -> None:
    b = GraphBuilder((1, 7, 7, 3), layout="NHWC")
    b.op("maxpool", b.input, kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    _, shape, macs = _last(b)
    assert shape == (1, 4, 4, 3)  # floor((7 + 2 - 2 - 1) / 2) + 1
    assert macs == 4 * 4 * 3 * 9


@pytest.mark.parametrize(("layout", "shape"), [("NCHW", (1, 64, 25, 5)), ("NHWC", (1, 25, 5, 64))])
def test_global_avgpool_counts_every_input_element(layout: str, shape: tuple[int, ...]) -> None:
    b = GraphBuilder(shape, layout=layout)
    b.op("global_avgpool", b.input)
    _, out, macs = _last(b)
    assert out == ((1, 64, 1, 1) if layout == "NCHW" else (1, 1, 1, 64))
    assert macs == 8000  # kws_ds_cnn AVGPool row


def test_mean_with_and_without_keepdims() -> None:
    b = GraphBuilder((1, 12, 5, 32), layout="NHWC")
    b.op("mean", b.input, axes=(1, 2), keepdims=False)
    _, shape, macs = _last(b)
    assert (shape, macs) == ((1, 32), 1920)
    b.op("mean", b.input, axes=(-1,), keepdims=True)
    assert _last(b)[1] == (1, 12, 5, 1)


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "div"])
def test_binary_ops_broadcast_and_count_outputs(kind: str) -> None:
    b = GraphBuilder((1, 8, 4, 4))
    y = b.op("relu", b.input)
    b.op(kind, b.input, y, act="relu")
    _, shape, macs = _last(b)
    assert (shape, macs) == ((1, 8, 4, 4), 128 + 128)
    c = np.ones((1, 8, 1, 1), np.float32)
    b.op(kind, b.input, weights={"C": c})
    op, shape, macs = _last(b)
    assert (shape, macs, op_flash(op)) == ((1, 8, 4, 4), 128, 32)


def test_concat_sums_the_axis() -> None:
    b = GraphBuilder((1, 8, 4, 4))
    y = b.op("relu", b.input)
    b.op("concat", b.input, y, axis=1)
    _, shape, macs = _last(b)
    assert (shape, macs) == ((1, 16, 4, 4), 256)


@pytest.mark.parametrize(
    "kind", ["relu", "relu6", "clip", "leaky_relu", "sigmoid", "tanh", "hardswish", "hardsigmoid"]
)
def test_activations_one_per_element(kind: str) -> None:
    b = GraphBuilder((1, 3, 5, 7))
    b.op(kind, b.input)
    _, shape, macs = _last(b)
    assert (shape, macs) == ((1, 3, 5, 7), 105)


@pytest.mark.parametrize("kind", ["quantize", "dequantize"])
def test_quantize_dequantize_one_per_element(kind: str) -> None:
    b = GraphBuilder((1, 12))
    b.op(kind, b.input)
    assert _last(b)[1:] == ((1, 12), 12)


def test_softmax_is_fifteen_per_element() -> None:
    b = GraphBuilder((1, 1000))
    b.op("softmax", b.input, axis=-1)
    assert _last(b)[1:] == ((1, 1000), 15000)  # mobilenet_v1 Predictions row


def test_batchnorm_is_two_per_element() -> None:
    b = GraphBuilder((1, 28, 40, 7))
    scale = np.ones(28, np.float32)
    b.op("batchnorm", b.input, weights={"scale": scale, "shift": scale})
    op, shape, macs = _last(b)
    assert (shape, macs, op_flash(op)) == ((1, 28, 40, 7), 15680, 224)  # kws_cnn BatchNorm row


def test_pad_adds_begins_and_ends() -> None:
    b = GraphBuilder((1, 3, 5, 5))
    b.op("pad", b.input, pads=(0, 0, 1, 2, 0, 0, 1, 2), value=0.0)
    assert _last(b)[1:] == ((1, 3, 7, 9), 189)


def test_reshape_is_free_and_resolves_minus_one_and_zero() -> None:
    b = GraphBuilder((1, 48, 1, 1))
    b.op("reshape", b.input, shape=(0, -1))
    assert _last(b)[1:] == ((1, 48), 0)


def test_transpose_permutes() -> None:
    b = GraphBuilder((1, 3, 5, 7))
    b.op("transpose", b.input, perm=(0, 2, 3, 1))
    assert _last(b)[1:] == ((1, 5, 7, 3), 105)


def test_flash_counts_every_weight_array_by_dtype() -> None:
    op = Op(
        "f",
        "conv2d",
        ("x",),
        ("y",),
        {"groups": 1},
        {"W": np.zeros((8, 3, 3, 3), np.float32), "B": np.zeros(8, np.float32)},
    )
    assert op_flash(op) == (216 + 8) * 4


def test_flash_of_quantised_weights_adds_requantisation_multipliers() -> None:
    attrs: dict[str, object] = {
        "groups": 1,
        "w_scale": (0.1,) * 8,
        "w_zero_point": (0,) * 8,
        "b_scale": (0.01,) * 8,
        "b_zero_point": (0,) * 8,
    }
    weights: dict[str, np.ndarray] = {
        "W": np.zeros((8, 3, 3, 3), np.int8),
        "B": np.zeros(8, np.int32),
    }
    op = Op("q", "conv2d", ("x",), ("y",), attrs, weights)
    # int8 W 216 + int32 B 32 + per channel an int32 multiplier and an int32 shift (8 * 8)
    assert op_flash(op) == 216 + 32 + 8 * 8


def test_flash_of_a_real_int8_tflite_conv() -> None:
    from pathlib import Path

    from splitter.importers import load_graph

    path = Path(__file__).resolve().parent.parent / "models" / "tiny_cnn_int8.tflite"
    conv = load_graph(path).ops[0]
    assert conv.kind == "conv2d" and conv.weights["W"].dtype == np.int8
    n_out = conv.weights["W"].shape[0]
    expected = conv.weights["W"].size + 4 * n_out + 8 * n_out
    assert op_flash(conv) == expected  # W int8 + B int32 + per-channel multiplier and shift
