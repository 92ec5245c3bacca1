"""Numeric check of the whole ONNX import: the canonical graph, written back as plain ONNX from
its folded/fused ops and weights, computes what the original model computes (onnxruntime)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from splitter.importers.onnx_import import load_onnx
from splitter.ir import Graph, Op

#: QDQ int8 models are compared in quantisation steps by tests/test_qdq.py.
MODELS = sorted(
    p
    for p in (Path(__file__).resolve().parent.parent / "models").glob("*.onnx")
    if not p.stem.endswith("_qdq")
)
SIMPLE = {
    "relu": "Relu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "hardswish": "HardSwish",
    "global_avgpool": "GlobalAveragePool",
    "matmul": "MatMul",
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "div": "Div",
}


class Emitter:
    """Writes canonical ops as ONNX opset-18 nodes (test-only reference semantics)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, value: object) -> str:
        name = f"k{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type: str, inputs: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def act(self, op: Op, x: str, out: str) -> str:
        """The activation ``act`` (or a standalone activation op) from ``x`` to ``out``."""
        kind = op.attrs.get("act", op.kind if op.kind in ("relu6", "clip", "leaky_relu") else None)
        if kind is None:
            return self.node("Identity", [x], out)
        if kind == "relu6":
            return self.node("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))], out)
        if kind == "clip":
            lo, hi = (np.float32(op.attrs[k]) for k in ("act_min", "act_max"))
            return self.node("Clip", [x, self.const(lo), self.const(hi)], out)
        if kind == "leaky_relu":
            return self.node("LeakyRelu", [x], out, alpha=op.attrs["alpha"])
        if kind == "hardsigmoid":  # fused (MobileNetV3's SE gate after its second conv)
            alpha, beta = op.attrs["alpha"], op.attrs["beta"]
            return self.node("HardSigmoid", [x], out, alpha=alpha, beta=beta)
        return self.node(SIMPLE[kind], [x], out)

    def emit(self, op: Op, graph: Graph) -> None:
        out, pre = op.outputs[0], op.outputs[0] + "__pre"
        x, w = op.inputs[0], op.weights
        if op.kind in ("relu6", "clip", "leaky_relu"):
            self.act(op, x, out)
            return
        if op.kind == "conv2d":
            ins = [x, self.const(w["W"])] + ([self.const(w["B"])] if "B" in w else [])
            a = op.attrs
            self.node(
                "Conv",
                ins,
                pre,
                kernel_shape=list(a["kernel"]),
                strides=list(a["strides"]),
                pads=list(a["pads"]),
                dilations=list(a["dilations"]),
                group=a["groups"],
            )
        elif op.kind == "dense":
            self.node("MatMul", [x, self.const(np.ascontiguousarray(w["W"].T))], pre + "m")
            self.node(
                "Add",
                [pre + "m", self.const(w.get("B", np.zeros(w["W"].shape[0], np.float32)))],
                pre,
            )
        elif op.kind in ("maxpool", "avgpool"):
            a = op.attrs
            extra = {"count_include_pad": int(a.get("count_include_pad", 0))}
            self.node(
                "MaxPool" if op.kind == "maxpool" else "AveragePool",
                [x],
                pre,
                kernel_shape=list(a["kernel"]),
                strides=list(a["strides"]),
                pads=list(a["pads"]),
                **(extra if op.kind == "avgpool" else {}),
            )
        elif op.kind == "mean":
            axes = self.const(np.array(op.attrs["axes"], np.int64))
            self.node("ReduceMean", [x, axes], pre, keepdims=int(op.attrs["keepdims"]))
        elif op.kind == "batchnorm":
            rank = len(graph.tensors[x].shape)
            per_channel = (-1,) + (1,) * (rank - 2)
            self.node("Mul", [x, self.const(w["scale"].reshape(per_channel))], pre + "s")
            self.node("Add", [pre + "s", self.const(w["shift"].reshape(per_channel))], pre)
        elif op.kind in SIMPLE:
            ins = list(op.inputs) + ([self.const(w["C"])] if "C" in w else [])
            self.node(SIMPLE[op.kind], ins, pre if "act" in op.attrs else out)
            if "act" not in op.attrs:
                return
        else:
            self.emit_shape_op(op)
            return
        self.act(op, pre, out)

    def emit_shape_op(self, op: Op) -> None:
        x, out, a = op.inputs[0], op.outputs[0], op.attrs
        if op.kind == "reshape":
            self.node("Reshape", [x, self.const(np.array(a["shape"], np.int64))], out)
        elif op.kind == "concat":
            self.node("Concat", list(op.inputs), out, axis=a["axis"])
        elif op.kind == "softmax":
            self.node("Softmax", [x], out, axis=a["axis"])
        elif op.kind == "transpose":
            self.node("Transpose", [x], out, perm=list(a["perm"]))
        elif op.kind == "hardsigmoid":
            self.node("HardSigmoid", [x], out, alpha=a["alpha"], beta=a["beta"])
        elif op.kind == "pad":
            pads = self.const(np.array(a["pads"], np.int64))
            self.node("Pad", [x, pads, self.const(np.float32(a["value"]))], out)
        else:
            raise AssertionError(f"no emitter for {op.kind}")


def to_onnx(graph: Graph) -> bytes:
    """The canonical graph as a serialised opset-18 ONNX model."""
    emitter = Emitter()
    for op in graph.ops:
        emitter.emit(op, graph)

    def info(name: str) -> onnx.ValueInfoProto:
        spec = graph.tensors[name]
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(spec.shape))

    model = helper.make_model(
        helper.make_graph(
            emitter.nodes,
            "roundtrip",
            [info(n) for n in graph.inputs],
            [info(n) for n in graph.outputs],
            emitter.inits,
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    model.ir_version = 8
    return model.SerializeToString()


def assert_same_outputs(path: Path, graph: Graph) -> None:
    """Original model vs the canonical graph re-emitted, on one random input."""
    rng = np.random.default_rng(7)
    feeds = {
        n: rng.standard_normal(graph.tensors[n].shape).astype(np.float32) for n in graph.inputs
    }
    providers = ["CPUExecutionProvider"]
    original = ort.InferenceSession(str(path), providers=providers).run(list(graph.outputs), feeds)
    mine = ort.InferenceSession(to_onnx(graph), providers=providers).run(list(graph.outputs), feeds)
    for ref, got in zip(original, mine, strict=True):
        scale = max(1.0, float(np.max(np.abs(ref))))
        assert np.max(np.abs(ref - got)) <= 1e-4 * scale


if MODELS:  # no models: nothing collected (not a skip)

    @pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
    def test_reference_model_canonical_graph_matches_onnxruntime(path: Path) -> None:
        assert_same_outputs(path, load_onnx(path))


def _save(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    shape: list[int],
    inits: list[onnx.TensorProto],
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def test_ceil_mode_pooling_and_auto_pad_match_onnxruntime(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "W")
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], group=4, strides=[2, 2], auto_pad="SAME_LOWER"),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node(
            "AveragePool",
            ["m"],
            ["a"],
            kernel_shape=[2, 2],
            strides=[2, 2],
            ceil_mode=1,
            count_include_pad=0,
        ),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    path = _save(tmp_path, nodes, [1, 4, 21, 21], [w])
    assert_same_outputs(path, load_onnx(path))


def test_clip_leaky_pad_softmax_match_onnxruntime(tmp_path: Path) -> None:
    pads = numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64), "pads")
    lo = numpy_helper.from_array(np.array(-0.5, np.float32), "lo")
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"]),
        helper.make_node("Clip", ["p", "lo"], ["c"]),
        helper.make_node("LeakyRelu", ["c"], ["l"], alpha=0.3),
        helper.make_node("Transpose", ["l"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["t"], ["y"], axis=-1),
    ]
    path = _save(tmp_path, nodes, [1, 3, 4, 4], [pads, lo])
    assert_same_outputs(path, load_onnx(path))
