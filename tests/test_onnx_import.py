"""ONNX importer: canonical ops, folding, fusion, and every tensor shape against onnxruntime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from splitter.errors import ShapeError
from splitter.importers import load_graph, load_model
from splitter.importers.onnx_import import load_onnx
from splitter.ir import Graph
from splitter.ops import FUSED_ACT_ATTRS, OP_KINDS

RNG = np.random.default_rng(1234)


def f32(*shape: int) -> np.ndarray:
    """Random float32 array."""
    return RNG.standard_normal(shape).astype(np.float32)


def const(name: str, value: np.ndarray) -> onnx.TensorProto:
    """An initializer."""
    return numpy_helper.from_array(np.asarray(value), name)


def save_model(
    tmp_path: Path,
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, Sequence[int | str]],
    outputs: Sequence[str],
    inits: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    name: str = "model.onnx",
) -> Path:
    """Save a float32 model; output types come from onnx's (lenient) shape inference and no
    intermediate value_info is stored, so the importer must infer everything itself."""
    graph = helper.make_graph(
        list(nodes),
        "test_graph",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    del model.graph.value_info[:]
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def feeds_for(graph: Graph) -> dict[str, np.ndarray]:
    """Random inputs of the graph's (static) input shapes."""
    return {n: f32(*graph.tensors[n].shape) for n in graph.inputs}


def run_ort(
    path: Path, feeds: dict[str, np.ndarray], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """Run ``path`` in onnxruntime, exposing the tensors ``names`` as extra outputs."""
    model = onnx.load(str(path))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [o.name for o in model.graph.output]
    return dict(zip(wanted, session.run(wanted, feeds), strict=True))


def assert_shapes_match_ort(path: Path, graph: Graph) -> dict[str, np.ndarray]:
    """Every activation tensor of ``graph`` has the shape onnxruntime actually produces."""
    feeds = feeds_for(graph)
    names = [n for n in graph.tensors if n not in graph.inputs]
    values = run_ort(path, feeds, names)
    for name in names:
        assert graph.tensors[name].shape == values[name].shape, name
    return values | feeds


def assert_well_formed(graph: Graph) -> None:
    """IR invariants: canonical kinds/attrs, unique names, tensors for every op input/output."""
    assert len({op.name for op in graph.ops}) == len(graph.ops)
    known = set(graph.inputs)
    for op in graph.ops:
        assert op.kind in OP_KINDS
        assert set(op.attrs) <= set(OP_KINDS[op.kind]) | {"act"} | FUSED_ACT_ATTRS
        assert all(i in known for i in op.inputs), op
        known.update(op.outputs)
        assert op.source_nodes
    assert set(graph.tensors) == known
    assert graph.layout == "NCHW" and graph.source_format == "onnx"


def conv_bn_relu_pool(tmp_path: Path) -> tuple[Path, list[onnx.TensorProto]]:
    """Conv(8x3x3x3, bias) -> BatchNormalization -> Relu -> MaxPool 2x2 on a 1x3x16x16 input."""
    inits = [
        const("W", f32(8, 3, 3, 3)),
        const("B", f32(8)),
        const("gamma", RNG.uniform(0.5, 1.5, 8).astype(np.float32)),
        const("beta", f32(8)),
        const("mean", f32(8)),
        const("var", RNG.uniform(0.1, 2.0, 8).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], name="bn"
        ),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    return save_model(tmp_path, nodes, {"x": [1, 3, 16, 16]}, ["y"], inits), inits


def test_conv_bn_relu_maxpool_fuses_into_conv_and_pool(tmp_path: Path) -> None:
    path, _ = conv_bn_relu_pool(tmp_path)
    graph = load_graph(path)
    assert_well_formed(graph)
    assert [op.kind for op in graph.ops] == ["conv2d", "maxpool"]
    conv, pool = graph.ops
    assert conv.source_nodes == ("conv", "bn", "relu")
    assert conv.outputs == ("r",) and conv.attrs["act"] == "relu"
    assert conv.attrs["pads"] == (1, 1, 1, 1) and conv.attrs["groups"] == 1
    assert conv.weights["W"].shape == (8, 3, 3, 3) and conv.weights["B"].shape == (8,)
    assert pool.attrs == {"kernel": (2, 2), "strides": (2, 2), "pads": (0, 0, 0, 0), "act": None}
    assert graph.tensors["y"].shape == (1, 8, 8, 8) and graph.tensors["y"].dtype == "float32"
    assert_shapes_match_ort(path, graph)


def test_batchnorm_folding_matches_onnxruntime(tmp_path: Path) -> None:
    path, _ = conv_bn_relu_pool(tmp_path)
    graph = load_onnx(path)
    conv = graph.ops[0]
    folded = save_model(
        tmp_path,
        [helper.make_node("Conv", ["x", "W", "B"], ["r"], pads=list(conv.attrs["pads"]))],
        {"x": [1, 3, 16, 16]},
        ["r"],
        [const("W", conv.weights["W"]), const("B", conv.weights["B"])],
        name="folded.onnx",
    )
    x = f32(1, 3, 16, 16)
    original = run_ort(path, {"x": x}, ["bn"])["bn"]  # conv+bn before the relu
    mine = run_ort(folded, {"x": x}, [])["r"]
    assert np.max(np.abs(original - mine)) <= 1e-5


def test_gemm_batchnorm_folding_matches_onnxruntime(tmp_path: Path) -> None:
    inits = [
        const("Wg", f32(6, 4)),
        const("Bg", f32(6)),
        const("gamma", RNG.uniform(0.5, 1.5, 6).astype(np.float32)),
        const("beta", f32(6)),
        const("mean", f32(6)),
        const("var", RNG.uniform(0.1, 2.0, 6).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "Wg", "Bg"], ["g"], name="fc", transB=1),
        helper.make_node("BatchNormalization", ["g", "gamma", "beta", "mean", "var"], ["y"]),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 4]}, ["y"], inits)
    graph = load_onnx(path)
    (dense,) = graph.ops
    assert dense.kind == "dense" and dense.outputs == ("y",)
    assert dense.source_nodes == ("fc", "BatchNormalization_0")
    x = f32(1, 4)
    expected = run_ort(path, {"x": x}, [])["y"]
    got = x @ dense.weights["W"].T + dense.weights["B"]
    assert np.max(np.abs(expected - got)) <= 1e-5


def test_batchnorm_not_foldable_becomes_batchnorm_op(tmp_path: Path) -> None:
    inits = [const(n, RNG.uniform(0.5, 1.5, 3).astype(np.float32)) for n in "gbmv"]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], epsilon=1e-3),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 5, 5]}, ["y"], inits)
    graph = load_onnx(path)
    (bn,) = graph.ops
    assert bn.kind == "batchnorm" and set(bn.weights) == {"scale", "shift"}
    x = f32(1, 3, 5, 5)
    expected = run_ort(path, {"x": x}, [])["y"]
    got = x * bn.weights["scale"].reshape(1, 3, 1, 1) + bn.weights["shift"].reshape(1, 3, 1, 1)
    assert np.max(np.abs(expected - got)) <= 1e-5


@pytest.mark.parametrize(
    ("auto_pad", "pads"), [("SAME_UPPER", (0, 0, 1, 1)), ("SAME_LOWER", (1, 1, 0, 0))]
)
def test_depthwise_conv_with_auto_pad(tmp_path: Path, auto_pad: str, pads: tuple) -> None:
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "W"],
            ["y"],
            group=4,
            strides=[2, 2],
            auto_pad=auto_pad,
            kernel_shape=[3, 3],
        )
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 4, 8, 8]}, ["y"], [const("W", f32(4, 1, 3, 3))])
    graph = load_onnx(path)
    (conv,) = graph.ops
    assert conv.attrs["groups"] == 4 and conv.attrs["pads"] == pads
    assert conv.weights["W"].shape == (4, 1, 3, 3) and "B" not in conv.weights
    assert conv.source_nodes == ("Conv_0",) and conv.name == "Conv_0"
    assert_shapes_match_ort(path, graph)


@pytest.mark.parametrize(("trans_b", "alpha", "beta"), [(0, 1.0, 1.0), (1, 0.5, 2.0)])
def test_gemm_to_dense(tmp_path: Path, trans_b: int, alpha: float, beta: float) -> None:
    b = f32(5, 3) if trans_b else f32(3, 5)
    nodes = [
        helper.make_node("Gemm", ["x", "B", "C"], ["y"], transB=trans_b, alpha=alpha, beta=beta)
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 3]}, ["y"], [const("B", b), const("C", f32(5))])
    graph = load_onnx(path)
    (dense,) = graph.ops
    assert dense.kind == "dense" and dense.weights["W"].shape == (5, 3)
    x = f32(1, 3)
    expected = run_ort(path, {"x": x}, [])["y"]
    assert np.max(np.abs(x @ dense.weights["W"].T + dense.weights["B"] - expected)) <= 1e-5


def test_matmul_constant_is_dense_and_activations_are_matmul(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "Wm"], ["h"], name="fc"),
        helper.make_node("Add", ["h", "bias"], ["hb"], name="fc_bias"),
        helper.make_node("Transpose", ["hb"], ["ht"], perm=[1, 0]),
        helper.make_node("MatMul", ["ht", "hb"], ["y"], name="outer"),
    ]
    inits = [const("Wm", f32(4, 6)), const("bias", f32(6))]
    path = save_model(tmp_path, nodes, {"x": [1, 4]}, ["y"], inits)
    graph = load_onnx(path)
    assert_well_formed(graph)
    # (1, 6) -> (6, 1) moves only an axis of length 1: a zero-cost reshape
    assert [op.kind for op in graph.ops] == ["dense", "reshape", "matmul"]
    dense = graph.ops[0]
    assert dense.source_nodes == ("fc", "fc_bias") and dense.outputs == ("hb",)
    assert graph.ops[1].attrs == {"shape": (6, 1)}
    assert graph.ops[2].inputs == ("ht", "hb")
    values = assert_shapes_match_ort(path, graph)
    got = values["x"] @ dense.weights["W"].T + dense.weights["B"]
    assert np.max(np.abs(got - values["hb"])) <= 1e-5


def test_residual_add_with_relu(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "x"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["y"], name="out_relu"),
    ]
    inits = [const("W1", f32(4, 4, 3, 3)), const("W2", f32(4, 4, 3, 3))]
    path = save_model(tmp_path, nodes, {"x": [1, 4, 6, 6]}, ["y"], inits)
    graph = load_onnx(path)
    assert_well_formed(graph)
    assert [(op.kind, op.attrs["act"]) for op in graph.ops] == [
        ("conv2d", "relu"),
        ("conv2d", None),
        ("add", "relu"),
    ]
    add = graph.ops[2]
    assert add.inputs == ("c2", "x") and add.outputs == ("y",) and not add.weights
    assert add.source_nodes == ("residual", "out_relu")
    assert_shapes_match_ort(path, graph)


def test_concat_with_negative_axis(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "Wa"], ["a"]),
        helper.make_node("Conv", ["x", "Wb"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["y"], axis=-3),
    ]
    inits = [const("Wa", f32(2, 3, 1, 1)), const("Wb", f32(5, 3, 1, 1))]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 4, 4]}, ["y"], inits)
    graph = load_onnx(path)
    assert graph.ops[2].kind == "concat" and graph.ops[2].attrs == {"axis": 1}
    assert graph.tensors["y"].shape == (1, 7, 4, 4)
    assert_shapes_match_ort(path, graph)


def test_pad_constant_mode(tmp_path: Path) -> None:
    pads = np.array([0, 0, 1, 2, 0, 0, 3, 0], dtype=np.int64)
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")]
    inits = [const("pads", pads), const("value", np.array(0.5, dtype=np.float32))]
    path = save_model(tmp_path, nodes, {"x": [1, 2, 4, 4]}, ["y"], inits, opset=11)
    graph = load_onnx(path)
    (op,) = graph.ops
    assert op.kind == "pad" and op.attrs == {"pads": tuple(pads.tolist()), "value": 0.5}
    assert graph.tensors["y"].shape == (1, 2, 8, 6)
    assert_shapes_match_ort(path, graph)


def test_reshape_target_from_shape_subgraph_is_folded(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"]),
        helper.make_node("Shape", ["c"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["c", "target"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "Wd"], ["y"], transB=1),
    ]
    inits = [
        const("W", f32(4, 3, 3, 3)),
        const("zero", np.array(0, dtype=np.int64)),
        const("axes", np.array([0], dtype=np.int64)),
        const("Wd", f32(10, 4 * 6 * 6)),
    ]
    path = save_model(tmp_path, nodes, {"x": ["N", 3, 8, 8]}, ["y"], inits)
    graph = load_onnx(path, input_shapes={"x": (1, 3, 8, 8)})
    assert [op.kind for op in graph.ops] == ["conv2d", "reshape", "dense"]
    assert graph.ops[1].attrs == {"shape": (1, 144)} and graph.ops[1].name == "flatten"
    assert not {"s", "n", "n1", "minus1", "target"} & set(graph.tensors)
    assert_shapes_match_ort(path, graph)


@pytest.mark.parametrize("opset", [11, 13])
def test_clip_zero_six_fuses_as_relu6(tmp_path: Path, opset: int) -> None:
    if opset == 11:  # bounds as initializers
        bounds: list[onnx.NodeProto] = []
        inits = [const("lo", np.array(0.0, np.float32)), const("hi", np.array(6.0, np.float32))]
    else:  # bounds as Constant nodes, as the PyTorch exporter writes them
        bounds = [
            helper.make_node("Constant", [], ["lo"], value=const("v0", np.array(0.0, np.float32))),
            helper.make_node("Constant", [], ["hi"], value=const("v6", np.array(6.0, np.float32))),
        ]
        inits = []
    nodes = [
        *bounds,
        helper.make_node("Conv", ["x", "W"], ["c"]),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"]),
    ]
    inits.append(const("W", f32(4, 3, 1, 1)))
    path = save_model(tmp_path, nodes, {"x": [1, 3, 4, 4]}, ["y"], inits, opset=opset)
    graph = load_onnx(path)
    (conv,) = graph.ops
    assert conv.attrs["act"] == "relu6" and conv.outputs == ("y",)
    assert conv.source_nodes == ("Conv_0", "Clip_0")
    assert_shapes_match_ort(path, graph)


def test_general_clip_and_unfusable_activations(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),  # graph input: nothing to fuse into
        helper.make_node("Conv", ["c", "W"], ["k"]),
        helper.make_node("Clip", ["k", "lo", "hi"], ["y"]),
        helper.make_node("Sigmoid", ["k"], ["z"]),  # k has two consumers: no fusion
    ]
    inits = [
        const("lo", np.array(-1.0, np.float32)),
        const("hi", np.array(1.0, np.float32)),
        const("W", f32(2, 3, 1, 1)),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 4, 4]}, ["y", "z"], inits)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["clip", "conv2d", "clip", "sigmoid"]
    assert graph.ops[0].attrs == {"act_min": -1.0, "act_max": 1.0}
    assert graph.ops[1].attrs["act"] is None
    assert_shapes_match_ort(path, graph)


def test_dynamic_batch_needs_override(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    path = save_model(tmp_path, nodes, {"x": ["batch", 3, 4, 4]}, ["y"])
    with pytest.raises(ShapeError, match=r"'x'.*--input-shape x="):
        load_onnx(path)
    graph = load_onnx(path, input_shapes={"x": (1, 3, 4, 4)})
    assert graph.tensors["x"].shape == (1, 3, 4, 4) and graph.tensors["y"].shape == (1, 3, 4, 4)
    assert_shapes_match_ort(path, graph)


def test_constant_identity_dropout_removed_and_names_kept(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Constant", [], ["W"], value=const("W", f32(4, 3, 3, 3))),
        helper.make_node("Identity", ["x"], ["xi"]),
        helper.make_node("Conv", ["xi", "W"], ["c"], name="conv"),
        helper.make_node("Dropout", ["c"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("Identity", ["r"], ["y"], name="final_identity"),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 6, 6]}, ["y"])
    graph = load_onnx(path)
    (conv,) = graph.ops
    assert conv.kind == "conv2d" and conv.inputs == ("x",) and conv.outputs == ("y",)
    assert conv.attrs["act"] == "relu" and conv.weights["W"].shape == (4, 3, 3, 3)
    assert set(graph.tensors) == {"x", "y"}
    assert_shapes_match_ort(path, graph)


def test_elementwise_constant_operands(tmp_path: Path) -> None:
    scale = f32(1, 3, 1, 1)
    nodes = [
        helper.make_node("Mul", ["scale", "x"], ["m"]),  # constant on the left, commutative
        helper.make_node("Sub", ["m", "offset"], ["s"]),
        helper.make_node("Div", ["s", "x"], ["y"]),
    ]
    inits = [const("scale", scale), const("offset", np.array(0.25, np.float32))]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 2, 2]}, ["y"], inits)
    graph = load_onnx(path)
    mul, sub, div = graph.ops
    assert mul.kind == "mul" and mul.inputs == ("x",) and mul.weights["C"].shape == (1, 3, 1, 1)
    np.testing.assert_array_equal(mul.weights["C"], scale)
    assert sub.kind == "sub" and sub.inputs == ("m",) and sub.weights["C"].shape == ()
    assert div.kind == "div" and div.inputs == ("s", "x") and not div.weights
    assert_shapes_match_ort(path, graph)


def test_pooling_mean_softmax_and_more_kinds(tmp_path: Path) -> None:
    nodes = [
        helper.make_node(
            "AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1
        ),
        helper.make_node("HardSwish", ["a"], ["h"]),
        helper.make_node("MaxPool", ["h"], ["p"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("LeakyRelu", ["g"], ["l"], alpha=0.2),
        helper.make_node("ReduceMean", ["l"], ["r"], axes=[2, 3], keepdims=0),
        helper.make_node("HardSigmoid", ["r"], ["hs"]),
        helper.make_node("Tanh", ["hs"], ["t"]),
        helper.make_node("Softmax", ["t"], ["y"], axis=1),
        helper.make_node("GlobalMaxPool", ["x"], ["gm"]),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 7, 7]}, ["y", "gm"])
    graph = load_onnx(path)
    assert_well_formed(graph)
    kinds = [(op.kind, op.attrs.get("act")) for op in graph.ops]
    assert kinds == [
        ("avgpool", "hardswish"),
        ("maxpool", None),
        ("global_avgpool", "leaky_relu"),
        ("mean", "hardsigmoid"),  # hardsigmoid is an activation (splitter/ops.py): it fuses
        ("tanh", None),
        ("softmax", None),
        ("maxpool", None),
    ]
    avg, pool, gap, mean, _, soft, gmax = graph.ops
    assert avg.attrs["count_include_pad"] is True and avg.attrs["pads"] == (1, 1, 1, 1)
    assert pool.attrs["pads"] == (0, 0, 1, 1)  # ceil_mode as extra end padding: 7 -> 4
    assert gap.attrs["alpha"] == pytest.approx(0.2)
    assert mean.attrs == {
        "axes": (2, 3),
        "keepdims": False,
        "act": "hardsigmoid",
        "alpha": pytest.approx(0.2),
        "beta": pytest.approx(0.5),
    }
    assert soft.attrs == {"axis": 1} and gmax.attrs["kernel"] == (7, 7)
    assert_shapes_match_ort(path, graph)


def test_reduce_mean_axes_input_opset18_and_squeeze_flatten(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Squeeze", ["m", "sq"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "sq"], ["u"]),
        helper.make_node("Flatten", ["u"], ["y"], axis=1),
    ]
    inits = [const("axes", np.array([-1, -2], np.int64)), const("sq", np.array([2, 3], np.int64))]
    path = save_model(tmp_path, nodes, {"x": [1, 5, 3, 3]}, ["y"], inits, opset=18)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["mean", "reshape", "reshape", "reshape"]
    assert graph.ops[0].attrs["axes"] == (2, 3)
    assert [op.attrs["shape"] for op in graph.ops[1:]] == [(1, 5), (1, 5, 1, 1), (1, 5)]
    assert_shapes_match_ort(path, graph)


def test_unnamed_nodes_get_stable_unique_names(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"], name="Relu_0"),  # clashes with a generated name
        helper.make_node("Relu", ["b"], ["c"]),
        helper.make_node("Tanh", ["c"], ["y"], name="Relu_0"),  # duplicate explicit name
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 4]}, ["y"])
    names = [op.name for op in load_onnx(path).ops]
    assert names == ["Relu_1", "Relu_0", "Relu_2", "Relu_0_1"]
    assert names == [op.name for op in load_onnx(path).ops]


def test_metadata_and_graph_fields(tmp_path: Path) -> None:
    path = save_model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], {"x": [1, 2]}, ["y"])
    model = onnx.load(str(path))
    model.producer_name, model.producer_version = "pytest", "1.0"
    helper.set_model_props(model, {"author": "me"})
    onnx.save(model, str(path))
    graph = load_onnx(path)
    assert graph.metadata["author"] == "me" and graph.metadata["producer"] == "pytest 1.0"
    assert graph.name == "test_graph" and graph.source_path == str(path)
    assert graph.inputs == ("x",) and graph.outputs == ("y",)


def test_shape_found_only_after_folding_is_resolved(tmp_path: Path) -> None:
    """Inference's data propagation stops at float arithmetic on a Shape; folding + a second
    inference round must still give the Reshape a static shape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sf", "one"], ["sm"]),
        helper.make_node("ReduceProd", ["sm"], ["n"], keepdims=1),
        helper.make_node("Cast", ["n"], ["ni"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["x", "ni"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "W"], ["y"]),
    ]
    inits = [const("one", np.array([1.0], np.float32)), const("W", f32(24, 4))]
    path = save_model(tmp_path, nodes, {"x": [1, 2, 3, 4]}, ["y"], inits)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["reshape", "dense"]
    assert graph.tensors["flat"].shape == (24,)
    assert_shapes_match_ort(path, graph)


def test_no_fusion_into_a_graph_output(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    path = save_model(
        tmp_path, nodes, {"x": [1, 3, 4, 4]}, ["c", "y"], [const("W", f32(2, 3, 1, 1))]
    )
    graph = load_onnx(path)
    assert [(op.kind, op.outputs) for op in graph.ops] == [("conv2d", ("c",)), ("relu", ("y",))]
    assert graph.ops[0].attrs["act"] is None and graph.outputs == ("c", "y")


@pytest.mark.parametrize("opset", [11, 15, 21])
def test_accepted_opset_range(tmp_path: Path, opset: int) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    path = save_model(
        tmp_path, nodes, {"x": [1, 3, 5, 5]}, ["y"], [const("W", f32(6, 3, 3, 3))], opset=opset
    )
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["conv2d", "global_avgpool", "reshape"]
    assert graph.metadata["opset"] == str(opset)
    assert_shapes_match_ort(path, graph)


@pytest.mark.parametrize("opset", [7, 9, 10])
def test_old_opset_upgraded_on_load(tmp_path: Path, opset: int) -> None:
    """Opsets 7..10 are converted to 17 (onnx.version_converter); the normalised model
    load_model returns is the upgraded one and computes what the file computes."""
    bn = [const(n, np.linspace(0.5, 1.5, 6, dtype=np.float32)) for n in ("s", "b", "m", "v")]
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["y"]),
    ]
    inits = [const("W", f32(6, 3, 3, 3)), *bn]
    path = save_model(tmp_path, nodes, {"x": [1, 3, 6, 6]}, ["y"], inits, opset=opset)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["conv2d", "maxpool", "reshape"]
    assert graph.metadata["opset"] == "17"
    assert graph.metadata["upgraded_from_opset"] == str(opset)
    loaded = load_model(path)
    assert loaded.onnx_model().opset_import[0].version == 17
    x = np.random.default_rng(0).standard_normal((1, 3, 6, 6), np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(loaded.data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_opset9_upsample_becomes_resize(tmp_path: Path) -> None:
    """Upsample (deprecated at opset 10) is upgraded to Resize and imported as resize."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Upsample", ["r", "scales"], ["y"], name="up", mode="nearest"),
    ]
    inits = [const("scales", np.asarray([1, 1, 2, 3], np.float32))]
    path = save_model(tmp_path, nodes, {"x": [1, 2, 3, 4]}, ["y"], inits, opset=9)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["relu", "resize"]
    assert graph.tensor("y").shape == (1, 2, 6, 12)
    loaded = load_model(path)
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4), np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(loaded.data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])


def test_sum_of_two_is_add(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Sum", ["r", "x"], ["s"], name="sum2"),
        helper.make_node("Sum", ["s"], ["y"], name="sum1"),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 2, 3, 3]}, ["y"])
    graph = load_onnx(path)
    assert [(op.kind, op.inputs, op.name) for op in graph.ops] == [
        ("relu", ("x",), "Relu_0"),
        ("add", ("r", "x"), "sum2"),
        ("reshape", ("s",), "sum1"),
    ]
    assert_shapes_match_ort(path, graph)


def test_batchnorm_after_3d_matmul_is_not_folded(tmp_path: Path) -> None:
    """BN normalises axis 1 (here T=4), not the dense output axis (also 4): no folding."""
    inits = [const("W", f32(3, 4))] + [
        const(n, RNG.uniform(0.5, 1.5, 4).astype(np.float32)) for n in "gbmv"
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("BatchNormalization", ["h", "g", "b", "m", "v"], ["y"]),
    ]
    path = save_model(tmp_path, nodes, {"x": [1, 4, 3]}, ["y"], inits)
    graph = load_onnx(path)
    assert [op.kind for op in graph.ops] == ["dense", "batchnorm"]
    assert_shapes_match_ort(path, graph)
