"""TFLite importer against LiteRT on every converter-made model in models/.

Shapes, dtypes and quantisation parameters are compared with what the LiteRT interpreter reports;
canonical weights, pads, strides, groups and fused activations are checked numerically by running
a NumPy reference of every canonical op on LiteRT's own intermediate tensors.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tflite
from test_tflite_support import MODELS, TFLITE_MODELS, interpreter, reference, run_seeded

from splitter.importers.tflite_import import load_tflite, tensor_names
from splitter.ir import Graph, Op
from splitter.ops import OP_KINDS

IDS = [p.name for p in TFLITE_MODELS]
INT8_MODELS = [MODELS / "tiny_cnn_int8.tflite", MODELS / "tiny_cnn_int8_fio.tflite"]


@cache
def _graph(path: Path) -> Graph:
    return load_tflite(path)


@cache
def _ran(path: Path) -> Any:
    it = interpreter(path)
    run_seeded(it)
    return it


def _details(path: Path, *, allocated: bool = True) -> dict[str, dict[str, Any]]:
    """LiteRT's tensor details keyed by the importer's unique tensor names (index order);
    ``allocated=False`` reads them before ``allocate_tensors`` (the file's quantisation)."""
    sg = tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0)
    names = tensor_names(sg)
    it = _ran(path) if allocated else interpreter(path, allocate=False)
    # kernels may append scratch tensors (im2col...) after the file's tensors
    return {names[d["index"]]: d for d in it.get_tensor_details() if d["index"] < len(names)}


def test_models_present() -> None:
    assert {p.name for p in TFLITE_MODELS} >= {
        "sine_float.tflite",
        "tiny_cnn_float.tflite",
        "tiny_cnn_int8.tflite",
        "tiny_cnn_int8_fio.tflite",
    }
    # small enough to ship; the one exception is PEX's reference network (issue 16), the
    # full-integer MobileNetV2-1.0 224 (4.0 MB, of which 3.68 MB weights)
    big = {p.name for p in TFLITE_MODELS if p.stat().st_size >= 1_000_000}
    assert big <= {"mobilenet_v2_224_int8.tflite"}
    assert all(p.stat().st_size < 4_100_000 for p in TFLITE_MODELS)


@pytest.mark.parametrize("path", TFLITE_MODELS, ids=IDS)
def test_shapes_and_dtypes_match_litert(path: Path) -> None:
    g, det = _graph(path), _details(path)
    assert g.layout == "NHWC" and g.source_format == "tflite"
    for op in g.ops:
        for name in op.inputs + op.outputs:
            spec = g.tensors[name]
            assert spec.shape == tuple(int(d) for d in det[name]["shape"]), (op.name, name)
            assert np.dtype(spec.dtype) == np.dtype(det[name]["dtype"]), name
    it = _ran(path)
    names = tensor_names(tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0))
    assert g.inputs == tuple(names[d["index"]] for d in it.get_input_details())
    assert g.outputs == tuple(names[d["index"]] for d in it.get_output_details())


@pytest.mark.parametrize("path", TFLITE_MODELS, ids=IDS)
def test_quantisation_matches_litert(path: Path) -> None:
    g, det = _graph(path), _details(path, allocated=False)
    for name, spec in g.tensors.items():
        qp = det[name]["quantization_parameters"]
        if spec.quant is None:
            assert len(qp["scales"]) == 0, name
            continue
        np.testing.assert_allclose(spec.quant.scale, qp["scales"], rtol=1e-7)
        assert spec.quant.zero_point == tuple(int(z) for z in qp["zero_points"])
    for op in g.ops:
        for key, tname in op.attr("weight_tensors", {}).items():
            qp = det[tname]["quantization_parameters"]
            k = key.lower()
            np.testing.assert_allclose(op.attr(f"{k}_scale"), qp["scales"], rtol=1e-7)
            assert op.attr(f"{k}_zero_point") == tuple(int(z) for z in qp["zero_points"])
            stored = _ran(path).get_tensor(det[tname]["index"])  # constants are not changed
            assert op.weights[key].dtype == stored.dtype
            if key == "W" and op.kind == "conv2d":
                _check_conv_weight(op, stored, qp)
            else:
                np.testing.assert_array_equal(op.weights[key], stored)


def _check_conv_weight(op: Op, stored: np.ndarray, qp: dict[str, Any]) -> None:
    """OHWI (conv) or 1HWC (depthwise) in the file; canonical (O, I/g, kh, kw) here."""
    depthwise = op.source_nodes[1] == "DEPTHWISE_CONV_2D"
    perm = (3, 0, 1, 2) if depthwise else (0, 3, 1, 2)
    np.testing.assert_array_equal(op.weights["W"], stored.transpose(perm))
    if len(qp["scales"]) > 1:
        assert qp["quantized_dimension"] == (3 if depthwise else 0)
        assert op.attr("w_axis") == 0
        assert len(op.attr("w_scale")) == op.weights["W"].shape[0]


def test_int8_weights_per_channel_and_per_tensor() -> None:
    per_channel = _graph(MODELS / "tiny_cnn_int8.tflite")
    per_tensor = _graph(MODELS / "tiny_cnn_int8_fio.tflite")
    for g, axis in ((per_channel, 0), (per_tensor, None)):
        convs = [op for op in g.ops if op.kind in ("conv2d", "dense")]
        assert len(convs) == 5
        for op in convs:
            assert op.weights["W"].dtype == np.int8 and op.attr("w_axis") == axis
            if "B" in op.weights:
                assert op.weights["B"].dtype == np.int32
    assert {len(op.attr("w_scale")) for op in per_tensor.ops if "W" in op.weights} == {1}


def test_float_ops_numerically_match_litert() -> None:
    """Every canonical op of the float tiny CNN, run in NumPy on LiteRT's intermediate inputs,
    reproduces LiteRT's output: checks weight layout, pads, strides, groups, axes and acts."""
    path = MODELS / "tiny_cnn_float.tflite"
    g, det, it = _graph(path), _details(path), _ran(path)

    def value(name: str) -> np.ndarray:
        return np.asarray(it.get_tensor(det[name]["index"]))

    for op in g.ops:
        got = reference(op, [value(n) for n in op.inputs])
        np.testing.assert_allclose(got, value(op.outputs[0]), rtol=1e-4, atol=1e-5, err_msg=op.name)


@pytest.mark.parametrize("path", INT8_MODELS, ids=[p.name for p in INT8_MODELS])
def test_int8_conv_and_dense_dequantised_match_litert(path: Path) -> None:
    """Dequantised canonical int8 weights (per-channel scales along ``w_axis``) reproduce
    LiteRT's int8 conv/dense outputs to within 1.5 output quantisation steps."""
    g, det, it = _graph(path), _details(path), _ran(path)

    def real(name: str) -> np.ndarray:
        q = g.tensors[name].quant
        assert q is not None
        return (np.asarray(it.get_tensor(det[name]["index"]), np.float64) - q.zero_point) * q.scale

    for op in (o for o in g.ops if o.kind in ("conv2d", "dense")):
        scale = np.asarray(op.attr("w_scale"))
        w = op.weights["W"].astype(np.float64)
        w *= scale.reshape(-1, *([1] * (w.ndim - 1))) if op.attr("w_axis") == 0 else scale
        b = op.weights["B"] * np.asarray(op.attr("b_scale")) if "B" in op.weights else None
        deq = Op(
            op.name,
            op.kind,
            op.inputs,
            op.outputs,
            op.attrs,
            {"W": w} | ({} if b is None else {"B": b}),
        )
        got = reference(deq, [real(op.inputs[0])])
        out_q = g.tensors[op.outputs[0]].quant
        assert out_q is not None
        lo, hi = ((np.array([-128, 127]) - out_q.zero_point[0]) * out_q.scale[0]).tolist()
        np.testing.assert_allclose(
            np.clip(got, lo, hi), real(op.outputs[0]), atol=1.5 * out_q.scale[0], err_msg=op.name
        )


def test_fused_activations_follow_the_keras_model() -> None:
    """models/make_tflite.py builds conv1 (ReLU), dw1 + ReLU6, pw1 (ReLU), conv2 (none) and a
    residual add + ReLU: the converter fuses them and the importer must keep each one; int8
    models carry the same activations as the float one."""

    def acts(g: Graph) -> list[tuple[str, Any]]:
        return [
            (op.kind, op.attr("act")) for op in g.ops if op.kind not in ("quantize", "dequantize")
        ]

    float_acts = acts(_graph(MODELS / "tiny_cnn_float.tflite"))
    assert float_acts[:5] == [
        ("conv2d", "relu"),
        ("conv2d", "relu6"),
        ("conv2d", "relu"),
        ("conv2d", None),
        ("add", "relu"),
    ]
    for path in INT8_MODELS:
        assert acts(_graph(path)) == float_acts
    sine = _graph(MODELS / "sine_float.tflite")
    assert [(op.kind, op.attr("act")) for op in sine.ops] == [
        ("dense", "relu"),
        ("dense", "relu"),
        ("dense", None),
    ]


def test_fused_relu_is_numerically_present() -> None:
    """LiteRT's outputs of the ops the importer marks relu/relu6 lie in [0, inf) / [0, 6], and
    the conv marked without activation has negative outputs (the flag is not invented)."""
    path = MODELS / "tiny_cnn_float.tflite"
    g, det, it = _graph(path), _details(path), _ran(path)
    for op in g.ops:
        y = it.get_tensor(det[op.outputs[0]]["index"])
        if op.attr("act") == "relu":
            assert y.min() >= 0, op.name
        elif op.attr("act") == "relu6":
            assert y.min() >= 0 and y.max() <= 6, op.name
        elif op.kind == "conv2d":
            assert y.min() < 0, op.name


@pytest.mark.parametrize("path", TFLITE_MODELS, ids=IDS)
def test_canonical_ops_and_source_nodes(path: Path) -> None:
    g = _graph(path)
    model = tflite.Model.GetRootAs(path.read_bytes(), 0)
    assert len(g.ops) == model.Subgraphs(0).OperatorsLength()
    produced = set(g.inputs)
    for i, op in enumerate(g.ops):
        assert op.kind in OP_KINDS
        assert set(OP_KINDS[op.kind]) <= set(op.attrs), op.name
        assert op.source_nodes[0] == f"op{i}" and op.name.endswith(f"_{i}")
        assert set(op.inputs) <= produced, op.name  # topological order
        produced |= set(op.outputs)
    assert set(g.outputs) <= produced


def test_conv_attrs_of_the_tiny_cnn() -> None:
    """Hand-computed from the Keras model: 49x10 input, 3x3 stride (2, 1) SAME conv ->
    out 25x10, total pad H = (25-1)*2+3-49 = 2 -> (1, 1), W = (10-1)*1+3-10 = 2 -> (1, 1)."""
    g = _graph(MODELS / "tiny_cnn_float.tflite")
    conv1, dw = g.ops[0], g.ops[1]
    assert conv1.attr("strides") == (2, 1) and conv1.attr("pads") == (1, 1, 1, 1)
    assert conv1.weights["W"].shape == (8, 1, 3, 3) and conv1.attr("groups") == 1
    assert dw.attr("groups") == 8 and dw.weights["W"].shape == (8, 1, 3, 3)
    pool = next(op for op in g.ops if op.kind == "avgpool")
    assert pool.attr("kernel") == (3, 2) and pool.attr("count_include_pad") is False
    pad = next(op for op in g.ops if op.kind == "pad")
    assert pad.attr("pads") == (0, 1, 0, 0, 0, 0, 0, 0)
    mean = next(op for op in g.ops if op.kind == "mean")
    assert mean.attr("axes") == (1, 2) and mean.attr("keepdims") is False


def test_dynamic_batch_override_matches_litert_resize() -> None:
    """sine_float's input is ``[-1, 1]``: batch 4 via ``input_shapes`` gives LiteRT's shapes."""
    path = MODELS / "sine_float.tflite"
    default = _graph(path)
    name = default.inputs[0]
    assert default.tensors[name].shape == (1, 1)
    g = load_tflite(path, input_shapes={name: (4, 1)})
    it = interpreter(path, resize={0: [4, 1]})
    names = tensor_names(tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0))
    shapes = {
        names[d["index"]]: tuple(int(x) for x in d["shape"])
        for d in it.get_tensor_details()
        if d["index"] < len(names)
    }
    for op in g.ops:
        assert g.tensors[op.outputs[0]].shape == shapes[op.outputs[0]]
    assert g.tensors[g.outputs[0]].shape == (4, 1)
