"""The loaded ONNX model is the folded one: constant subgraphs are initializers in the stored
proto and in every sub-model, tensor names stay, and validation checks the folding against the
file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from splitter.errors import ValidationError
from splitter.importers import load_chain, load_model
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.onnx_slice import slice_onnx
from splitter.slicing.validate import require_pass, validate_models

#: Ops of the constant subgraphs in :func:`shape_chain_model`; none may survive the import.
FOLDED_OPS = {"Shape", "Gather", "Unsqueeze", "Concat", "Constant", "Transpose", "Mul"}


def shape_chain_model() -> onnx.ModelProto:
    """Conv -> Relu -> Reshape(Concat(Unsqueeze(Gather(Shape(r), 0)), [-1])) -> MatMul -> Relu,
    batch dimension ``N`` dynamic; the MatMul weight is ``Transpose(W2t) * Constant(0.5)``."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["b"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["bu"], name="unsq"),
        helper.make_node("Concat", ["bu", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"], name="reshape"),
        helper.make_node(
            "Constant", [], ["half"], name="half", value=numpy_helper.from_array(np.float32(0.5))
        ),
        helper.make_node("Transpose", ["W2t"], ["W2h"], name="wt", perm=[1, 0]),
        helper.make_node("Mul", ["W2h", "half"], ["W2"], name="wscale"),
        helper.make_node("MatMul", ["flat", "W2"], ["m"], name="fc"),
        helper.make_node("Relu", ["m"], ["y"], name="out"),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal((2, 3, 3, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((5, 32)).astype(np.float32), "W2t"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes0"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    graph = helper.make_graph(
        nodes,
        "shape_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def chain_path(tmp_path: Path) -> Path:
    path = tmp_path / "shape_chain.onnx"
    onnx.save(shape_chain_model(), str(path))
    return path


SHAPES = {"x": (1, 3, 4, 4)}


def test_stored_proto_holds_folded_values_not_nodes(chain_path: Path) -> None:
    loaded = load_model(chain_path, input_shapes=SHAPES)
    proto = loaded.onnx_model()
    assert [n.name for n in proto.graph.node] == ["conv", "relu", "reshape", "fc", "out"]
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    assert set(inits) == {"W", "target", "W2"}  # zero/axes0/minus1/W2t only fed folded nodes
    assert inits["target"].tolist() == [1, -1]  # batch from Shape under --input-shape
    w2t = numpy_helper.to_array(
        next(t for t in shape_chain_model().graph.initializer if t.name == "W2t")
    )
    np.testing.assert_array_equal(inits["W2"], w2t.T * np.float32(0.5))
    assert [i.name for i in proto.graph.input] == ["x"]
    onnx.checker.check_model(proto, full_check=True)
    # the graph's tensor names are the proto's
    produced = {o for n in proto.graph.node for o in n.output} | {"x"}
    assert set(loaded.graph.tensors) <= produced


def test_submodels_hold_no_folded_nodes_and_validate(chain_path: Path) -> None:
    loaded = load_model(chain_path, input_shapes=SHAPES)
    chain = load_chain(chain_path, input_shapes=SHAPES)
    n = len(chain)
    ranges = [(k % 2, k * n // 3, (k + 1) * n // 3 - 1) for k in range(3)]
    subs = slice_onnx(loaded, cuts_from_ranges(chain, ranges, ["a", "b"]))
    for sub in subs:
        model = onnx.load_from_string(sub.data)
        assert not {node.op_type for node in model.graph.node} & FOLDED_OPS
    report = validate_models(loaded, [(s.file_name, s.data) for s in subs])
    require_pass(report, chain_path)
    assert report.outputs[0].max_abs == 0.0
    assert [s.name for s in report.normalisation] == ["y"]  # the folding was checked too
    assert report.normalisation[0].passed and report.to_dict()["normalisation"][0]["passed"]


def test_wrong_folding_fails_validation(chain_path: Path) -> None:
    """A folded weight that does not match what the file computes is caught, even though the
    sub-models agree with the (wrong) normalised model."""
    loaded = load_model(chain_path, input_shapes=SHAPES)
    proto = loaded.onnx_model()
    w2 = next(t for t in proto.graph.initializer if t.name == "W2")
    w2.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w2) * 2, "W2"))
    bad = replace(loaded, data=proto.SerializeToString())
    chain = load_chain(chain_path, input_shapes=SHAPES)
    subs = slice_onnx(bad, cuts_from_ranges(chain, [(0, 0, len(chain) - 1)], ["a"]))
    report = validate_models(bad, [(s.file_name, s.data) for s in subs])
    assert report.outputs[0].passed and not report.normalisation[0].passed
    with pytest.raises(ValidationError, match="normalised model") as info:
        require_pass(report, chain_path)
    assert "\n" not in str(info.value)
