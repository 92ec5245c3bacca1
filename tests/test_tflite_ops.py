"""One-operator TFLite models built with the ``tflite`` builders, run by LiteRT.

Covers the operators and options the converter-made models in models/ do not (SQUEEZE,
EXPAND_DIMS, SUB/DIV with a constant operand, TRANSPOSE, HARD_SWISH, LEAKY_RELU, RELU_N1_TO_1,
PADV2, dilated / odd-padded SAME convs, depthwise multiplier 2, SAME pools, FULLY_CONNECTED with
keep_num_dims, MEAN keep_dims, SOFTMAX beta). For each: the importer's output shape equals
LiteRT's and the NumPy reference of the canonical op reproduces LiteRT's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
import tflite
from test_tflite_support import OpDef, TensorDef, build_model, interpreter, reference

from splitter.errors import UnsupportedOpError
from splitter.importers.tflite_import import load_tflite

BO = tflite.BuiltinOperator
SAME, VALID = tflite.Padding.SAME, tflite.Padding.VALID
RELU, RELU_N1_TO_1, RELU6 = 1, 2, 3
RNG = np.random.default_rng(7)


def _opts(name: str, **fields: Any) -> tuple[int, Callable[[flatbuffers.Builder], int]]:
    """``(BuiltinOptions enum, builder)`` for ``tflite.<name>`` with scalar / int-vector fields."""

    def build(b: flatbuffers.Builder) -> int:
        vectors = {
            k: b.CreateNumpyVector(np.asarray(v, np.int32))
            for k, v in fields.items()
            if isinstance(v, tuple)
        }
        getattr(tflite, f"{name}Start")(b)
        for k, v in fields.items():
            getattr(tflite, f"{name}Add{k}")(b, vectors.get(k, v))
        return int(getattr(tflite, f"{name}End")(b))

    return getattr(tflite.BuiltinOptions, name), build


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i(*values: int) -> np.ndarray:
    return np.asarray(values, np.int32)


@dataclass(frozen=True)
class Case:
    """One operator on activation input(s) ``x`` (tensor 0, and 1 when ``two_inputs``)."""

    name: str
    code: int
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]  # what LiteRT computes (the model file stores the same)
    consts: tuple[np.ndarray, ...] = ()
    options: tuple[int, Callable[[flatbuffers.Builder], int]] | None = None
    two_inputs: bool = False
    kind: str = ""


CASES = [
    Case(
        "conv_same_stride2_relu_n1",
        BO.CONV_2D,
        (1, 9, 8, 3),
        (1, 5, 4, 4),
        (_w(4, 3, 3, 3), _w(4)),
        _opts(
            "Conv2DOptions",
            Padding=SAME,
            StrideH=2,
            StrideW=2,
            FusedActivationFunction=RELU_N1_TO_1,
        ),
        kind="conv2d",
    ),
    Case(
        "conv_dilated_even_kernel",
        BO.CONV_2D,
        (1, 10, 9, 2),
        (1, 10, 9, 3),
        (_w(3, 2, 4, 2), _w(3)),
        _opts(
            "Conv2DOptions",
            Padding=SAME,
            StrideH=1,
            StrideW=1,
            DilationHFactor=2,
            DilationWFactor=1,
        ),
        kind="conv2d",
    ),
    Case(
        "conv_valid",
        BO.CONV_2D,
        (1, 7, 7, 2),
        (1, 3, 2, 5),
        (_w(5, 3, 2, 2), _w(5)),
        _opts("Conv2DOptions", Padding=VALID, StrideH=2, StrideW=3, FusedActivationFunction=RELU),
        kind="conv2d",
    ),
    Case(
        "depthwise_mult2",
        BO.DEPTHWISE_CONV_2D,
        (1, 8, 7, 3),
        (1, 4, 4, 6),
        (_w(1, 3, 3, 6), _w(6)),
        _opts(
            "DepthwiseConv2DOptions",
            Padding=SAME,
            StrideH=2,
            StrideW=2,
            DepthMultiplier=2,
            FusedActivationFunction=RELU6,
        ),
        kind="conv2d",
    ),
    Case(
        "avgpool_same",
        BO.AVERAGE_POOL_2D,
        (1, 7, 6, 2),
        (1, 4, 3, 2),
        (),
        _opts("Pool2DOptions", Padding=SAME, StrideH=2, StrideW=2, FilterHeight=3, FilterWidth=3),
        kind="avgpool",
    ),
    Case(
        "maxpool_same_relu",
        BO.MAX_POOL_2D,
        (1, 5, 5, 3),
        (1, 3, 3, 3),
        (),
        _opts(
            "Pool2DOptions",
            Padding=SAME,
            StrideH=2,
            StrideW=2,
            FilterHeight=2,
            FilterWidth=2,
            FusedActivationFunction=RELU,
        ),
        kind="maxpool",
    ),
    Case(
        "fc_keep_num_dims",
        BO.FULLY_CONNECTED,
        (1, 3, 5),
        (1, 3, 4),
        (_w(4, 5), _w(4)),
        _opts("FullyConnectedOptions", KeepNumDims=True, FusedActivationFunction=RELU),
        kind="dense",
    ),
    Case(
        "fc_flatten",
        BO.FULLY_CONNECTED,
        (1, 2, 3, 2),
        (1, 4),
        (_w(4, 12),),
        _opts("FullyConnectedOptions"),
        kind="dense",
    ),
    Case(
        "mean_keepdims",
        BO.MEAN,
        (1, 4, 5, 3),
        (1, 1, 1, 3),
        (_i(1, -2),),
        _opts("ReducerOptions", KeepDims=True),
        kind="mean",
    ),
    Case(
        "squeeze",
        BO.SQUEEZE,
        (1, 1, 1, 8),
        (1, 8),
        (),
        _opts("SqueezeOptions", SqueezeDims=(1, 2)),
        kind="reshape",
    ),
    Case("expand_dims", BO.EXPAND_DIMS, (1, 8), (1, 8, 1), (_i(-1),), kind="reshape"),
    Case("reshape_minus_one", BO.RESHAPE, (1, 4, 3, 2), (1, 6, 4), (_i(1, -1, 4),), kind="reshape"),
    Case(
        "sub_const_first",
        BO.SUB,
        (1, 2, 2, 3),
        (1, 2, 2, 3),
        (_w(3),),
        _opts("SubOptions", FusedActivationFunction=RELU),
        kind="sub",
    ),
    Case("div_const", BO.DIV, (1, 2, 2, 3), (1, 2, 2, 3), (_w(3) + 3,), kind="div"),
    Case(
        "mul_broadcast",
        BO.MUL,
        (1, 3, 1, 4),
        (1, 3, 2, 4),
        (_w(1, 1, 2, 1),),
        _opts("MulOptions", FusedActivationFunction=RELU6),
        kind="mul",
    ),
    Case(
        "add_two_inputs_relu",
        BO.ADD,
        (1, 2, 3, 4),
        (1, 2, 3, 4),
        (),
        _opts("AddOptions", FusedActivationFunction=RELU),
        two_inputs=True,
        kind="add",
    ),
    Case(
        "concat_last_axis",
        BO.CONCATENATION,
        (1, 2, 3, 4),
        (1, 2, 3, 8),
        (),
        _opts("ConcatenationOptions", Axis=-1),
        two_inputs=True,
        kind="concat",
    ),
    Case(
        "transpose", BO.TRANSPOSE, (1, 2, 3, 4), (1, 4, 2, 3), (_i(0, 3, 1, 2),), kind="transpose"
    ),
    Case("hard_swish", BO.HARD_SWISH, (1, 3, 8), (1, 3, 8), kind="hardswish"),
    Case(
        "leaky_relu",
        BO.LEAKY_RELU,
        (1, 3, 8),
        (1, 3, 8),
        (),
        _opts("LeakyReluOptions", Alpha=0.2),
        kind="leaky_relu",
    ),
    Case("relu_n1_to_1", BO.RELU_N1_TO_1, (1, 3, 8), (1, 3, 8), kind="clip"),
    Case("tanh", BO.TANH, (1, 3, 8), (1, 3, 8), kind="tanh"),
    Case("logistic", BO.LOGISTIC, (1, 3, 8), (1, 3, 8), kind="sigmoid"),
    Case("relu6", BO.RELU6, (1, 3, 8), (1, 3, 8), kind="relu6"),
    Case(
        "softmax_beta",
        BO.SOFTMAX,
        (1, 2, 5),
        (1, 2, 5),
        (),
        _opts("SoftmaxOptions", Beta=0.5),
        kind="softmax",
    ),
    Case(
        "padv2_value",
        BO.PADV2,
        (1, 3, 2, 2),
        (1, 4, 5, 2),
        (_i(0, 0, 1, 0, 1, 2, 0, 0).reshape(4, 2), np.asarray([1.5], np.float32)),
        kind="pad",
    ),
]


def _model(case: Case) -> bytes:
    """``x`` (and ``y``) -> op -> ``out``; constants follow in ``case.consts`` order."""
    tensors = [TensorDef("x", case.in_shape)]
    if case.two_inputs:
        tensors.append(TensorDef("y", case.in_shape))
    const_first = case.name == "sub_const_first"
    consts = [TensorDef(f"c{k}", c.shape, c) for k, c in enumerate(case.consts)]
    act = list(range(len(tensors)))
    ins = [len(tensors) + k for k in range(len(consts))]
    op_inputs = tuple(ins + act if const_first else act + ins)
    out = len(tensors) + len(consts)
    tensors += [*consts, TensorDef("out", case.out_shape)]
    opt_type, opt_fn = case.options if case.options else (0, None)
    op = OpDef(case.code, op_inputs, (out,), opt_type, opt_fn)
    return build_model(tensors, [op], tuple(act), (out,))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_single_op_against_litert(case: Case, tmp_path: Path) -> None:
    data = _model(case)
    path = tmp_path / f"{case.name}.tflite"
    path.write_bytes(data)
    g = load_tflite(path)
    (op,) = g.ops
    assert op.kind == case.kind
    it = interpreter(data)
    xs = []
    for d in it.get_input_details():
        x = RNG.standard_normal(d["shape"]).astype(np.float32) * 3
        it.set_tensor(d["index"], x)
        xs.append(x)
    it.invoke()
    (out,) = it.get_output_details()
    want = it.get_tensor(out["index"])
    assert g.tensors[op.outputs[0]].shape == tuple(int(d) for d in out["shape"]) == want.shape
    got = reference(op, xs).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_shape_inference_propagates_overridden_batch(tmp_path: Path) -> None:
    """conv + mean with a dynamic batch: batch 3 via input_shapes flows through both ops."""
    tensors = [
        TensorDef("x", (1, 6, 6, 2), signature=(-1, 6, 6, 2)),
        TensorDef("w", (4, 3, 3, 2), _w(4, 3, 3, 2)),
        TensorDef("b", (4,), _w(4)),
        TensorDef("h", (1, 3, 3, 4), signature=(-1, 3, 3, 4)),
        TensorDef("axes", (2,), _i(1, 2)),
        TensorDef("y", (1, 4), signature=(-1, 4)),
    ]
    conv_t, conv_o = _opts("Conv2DOptions", Padding=SAME, StrideH=2, StrideW=2)
    ops = [OpDef(BO.CONV_2D, (0, 1, 2), (3,), conv_t, conv_o), OpDef(BO.MEAN, (3, 4), (5,))]
    path = tmp_path / "dyn.tflite"
    path.write_bytes(build_model(tensors, ops, (0,), (5,)))
    assert load_tflite(path).tensors["y"].shape == (1, 4)
    g = load_tflite(path, input_shapes={"x": (3, 6, 6, 2)})
    assert (g.tensors["h"].shape, g.tensors["y"].shape) == ((3, 3, 3, 4), (3, 4))
    it = interpreter(path.read_bytes(), resize={0: [3, 6, 6, 2]})
    assert [tuple(d["shape"]) for d in it.get_output_details()] == [(3, 4)]


def test_repeated_tensor_names_get_index_suffix(tmp_path: Path) -> None:
    """Two tensors named ``t``: both become ``t:<index>``; unique names are kept."""
    tensors = [TensorDef("t", (1, 4)), TensorDef("t", (1, 4)), TensorDef("", (1, 4))]
    ops = [OpDef(BO.RELU, (0,), (1,)), OpDef(BO.TANH, (1,), (2,))]
    path = tmp_path / "names.tflite"
    path.write_bytes(build_model(tensors, ops, (0,), (2,)))
    g = load_tflite(path)
    assert [op.inputs + op.outputs for op in g.ops] == [("t:0", "t:1"), ("t:1", ":2")]
    assert g.inputs == ("t:0",) and g.outputs == (":2",)


def test_concat_with_fused_activation_is_rejected(tmp_path: Path) -> None:
    """TFLite's concatenation kernel rejects a fused activation; so does the importer."""
    case = Case(
        "concat_relu",
        BO.CONCATENATION,
        (1, 2, 3, 4),
        (1, 2, 3, 8),
        (),
        _opts("ConcatenationOptions", Axis=3, FusedActivationFunction=RELU),
        two_inputs=True,
    )
    path = tmp_path / "concat_relu.tflite"
    path.write_bytes(_model(case))
    with pytest.raises(UnsupportedOpError, match=r"operator #0 \(CONCATENATION\) has fused"):
        load_tflite(path)
    with pytest.raises(RuntimeError, match="activation"):
        interpreter(path)


def test_fused_tanh_is_rejected(tmp_path: Path) -> None:
    """TFLite's CONV_2D kernel ignores a fused TANH (outputs leave [-1, 1]), so the importer
    refuses it rather than guess."""
    case = Case(
        "conv_tanh",
        BO.CONV_2D,
        (1, 5, 5, 2),
        (1, 5, 5, 3),
        (_w(3, 3, 3, 2), _w(3)),
        _opts("Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1, FusedActivationFunction=4),
    )
    path = tmp_path / "conv_tanh.tflite"
    path.write_bytes(_model(case))
    with pytest.raises(UnsupportedOpError, match=r"operator #0 \(CONV_2D\): fused activation TANH"):
        load_tflite(path)
    it = interpreter(path)
    (inp,) = it.get_input_details()
    it.set_tensor(inp["index"], np.full(inp["shape"], 3.0, np.float32))
    it.invoke()
    assert np.abs(it.get_tensor(it.get_output_details()[0]["index"])).max() > 1.0


def test_float16_weights_dequantize_is_folded(tmp_path: Path) -> None:
    """float16-quantised models store weights as float16 behind a DEQUANTIZE: the importer folds
    it into the conv (weights stay float16, source_nodes name both operators) and the conv's
    NumPy reference on those weights matches LiteRT."""
    w16 = _w(4, 3, 3, 2).astype(np.float16)
    tensors = [
        TensorDef("x", (1, 6, 5, 2)),
        TensorDef("w16", w16.shape, w16),
        TensorDef("w", w16.shape),
        TensorDef("b", (4,), _w(4)),
        TensorDef("y", (1, 6, 5, 4)),
    ]
    conv_t, conv_o = _opts("Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1)
    ops = [OpDef(BO.DEQUANTIZE, (1,), (2,)), OpDef(BO.CONV_2D, (0, 2, 3), (4,), conv_t, conv_o)]
    path = tmp_path / "fp16.tflite"
    path.write_bytes(build_model(tensors, ops, (0,), (4,)))
    g = load_tflite(path)
    (op,) = g.ops
    assert op.kind == "conv2d" and op.inputs == ("x",)
    assert op.source_nodes == ("op1", "CONV_2D", "op0", "DEQUANTIZE")
    assert op.weights["W"].dtype == np.float16
    np.testing.assert_array_equal(op.weights["W"], w16.transpose(0, 3, 1, 2))
    it = interpreter(path)
    x = RNG.standard_normal((1, 6, 5, 2)).astype(np.float32)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(reference(op, [x]), want, rtol=1e-4, atol=1e-4)


def test_fully_connected_with_runtime_weights_is_rejected(tmp_path: Path) -> None:
    tensors = [TensorDef("x", (1, 4)), TensorDef("w", (3, 4)), TensorDef("y", (1, 3))]
    path = tmp_path / "fc_runtime_w.tflite"
    path.write_bytes(build_model(tensors, [OpDef(BO.FULLY_CONNECTED, (0, 1), (2,))], (0, 1), (2,)))
    with pytest.raises(UnsupportedOpError, match=r"operator #0 \(FULLY_CONNECTED\): .*run-time"):
        load_tflite(path)
