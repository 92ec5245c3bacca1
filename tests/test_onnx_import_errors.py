"""ONNX importer on bad input: one clear SplitterError line naming the file, the thing, the fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from splitter.errors import InputFileError, ShapeError, SplitterError, UnsupportedOpError
from splitter.importers import load_graph


def save(
    tmp_path: Path,
    nodes: Sequence[onnx.NodeProto],
    x_shape: Sequence[int | str] | None = (1, 3, 8, 8),
    inits: Sequence[onnx.TensorProto] = (),
    opsets: Sequence[tuple[str, int]] = (("", 17),),
    outputs: Sequence[str] = ("y",),
) -> Path:
    """Save a one-input model without running the checker (bad models must reach the importer)."""
    graph = helper.make_graph(
        list(nodes),
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    if x_shape is not None and opsets[0][1] <= 21:  # declare output types like exporters do
        model = onnx.shape_inference.infer_shapes(model)
        del model.graph.value_info[:]
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def good_model_bytes(tmp_path: Path) -> bytes:
    """A valid conv + relu model, serialised."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    return save(tmp_path, nodes, inits=[w]).read_bytes()


def load_error(path: Path, **kwargs: object) -> SplitterError:
    """The SplitterError load_graph raises; it must be one line naming the file."""
    with pytest.raises(SplitterError) as info:
        load_graph(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    return info.value


def test_good_model_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.onnx"
    path.write_bytes(good_model_bytes(tmp_path))
    assert [op.kind for op in load_graph(path).ops] == ["conv2d"]


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert isinstance(load_error(tmp_path / "nope.onnx"), InputFileError)
    folder = tmp_path / "folder.onnx"
    folder.mkdir()
    assert isinstance(load_error(folder), InputFileError)


@pytest.mark.parametrize(
    "content",
    [b"", b"this is not an onnx model\n", bytes(range(256)) * 4, b"\x08\x07" + b"\xff" * 64],
)
def test_corrupt_bytes(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(content)
    err = load_error(path)
    assert isinstance(err, InputFileError)


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.5, 0.9, 0.999])
def test_truncated_file(tmp_path: Path, fraction: float) -> None:
    data = good_model_bytes(tmp_path)
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: int(len(data) * fraction)])
    err = load_error(path)
    assert isinstance(err, InputFileError)


def test_all_unsupported_ops_listed_at_once(tmp_path: Path) -> None:
    err = load_error(unsupported(tmp_path))
    assert isinstance(err, UnsupportedOpError)
    message = str(err)
    for label in ("Sin (sin_node)", "Floor (Floor_0)", "com.acme.Magic (magic)"):
        assert label in message
    assert "3 unsupported" in message and "Relu (" not in message and "supported" in message


def test_unsupported_forms_of_supported_ops_listed_at_once(tmp_path: Path) -> None:
    pads = numpy_helper.from_array(np.array([0, 0, 1, 8, 0, 0, 1, 1], np.int64), "pads")
    bounds = numpy_helper.from_array(np.array([1.0], np.float32), "k")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], name="reflect_pad", mode="reflect"),
        helper.make_node("Sub", ["k", "p"], ["s"], name="rsub"),
        helper.make_node("Resize", ["s", "", "scales"], ["r"], name="cubic", mode="cubic"),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    err = load_error(save(tmp_path, nodes, inits=[pads, bounds, scales]))
    assert isinstance(err, UnsupportedOpError)
    message = str(err)
    assert "Pad (reflect_pad): reflect pad of 8 on an axis of length 8" in message
    assert "Sub (rsub)" in message and "Resize (cubic): mode=cubic" in message


def test_dynamic_input_without_override(tmp_path: Path) -> None:
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], x_shape=("N", 3, 8, 8))
    err = load_error(path)
    assert isinstance(err, ShapeError)
    assert "'x'" in str(err) and "--input-shape x=" in str(err)


def test_input_without_any_shape(tmp_path: Path) -> None:
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], x_shape=(1, 4))
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.ClearField("shape")
    onnx.save(model, str(path))
    assert isinstance(load_error(path), (ShapeError, InputFileError))
    assert len(load_graph(path, input_shapes={"x": (1, 4)}).ops) == 1


def test_override_of_unknown_input(tmp_path: Path) -> None:
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])])
    err = load_error(path, input_shapes={"image": (1, 3, 8, 8)})
    assert isinstance(err, ShapeError) and "'image'" in str(err)


def test_inconsistent_override_is_a_shape_error(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    conv = [helper.make_node("Conv", ["x", "W"], ["y"])]
    path = save(tmp_path, conv, x_shape=(1, "c", 8, 8), inits=[w])  # channels left dynamic
    err = load_error(path, input_shapes={"x": (1, 5, 8, 8)})  # 5 channels vs W's 3
    assert isinstance(err, ShapeError) and "5 channels" in str(err)
    static = save(tmp_path, conv, inits=[w])  # the file says 3 channels: the override clashes
    err = load_error(static, input_shapes={"x": (1, 5, 8, 8)})
    assert isinstance(err, ShapeError) and "contradicts the input's shape 1x3x8x8" in str(err)


@pytest.mark.parametrize("opset", [6, 23])
def test_opset_out_of_range(tmp_path: Path, opset: int) -> None:
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], opsets=[("", opset)])
    err = load_error(path)
    assert isinstance(err, InputFileError)
    assert f"opset {opset}" in str(err) and "version_converter" in str(err)


def unconvertible(tmp_path: Path) -> Path:
    """An opset-9 model onnx.version_converter cannot convert (IR version 3 without the
    initializer among the graph inputs, as old files written by hand often are)."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="act"),
        helper.make_node("Conv", ["r", "W"], ["y"], name="conv_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "old",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    path = tmp_path / "old.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_opset_conversion_failure_names_the_op(tmp_path: Path) -> None:
    """One line naming node, op and opsets, before anything else runs."""
    err = load_error(unconvertible(tmp_path))
    assert isinstance(err, InputFileError)
    assert "cannot upgrade Conv (conv_1) from opset 9 to 17" in str(err)


def unsupported(tmp_path: Path) -> Path:
    """Three unsupported ops (one in a custom domain) around a supported one."""
    nodes = [
        helper.make_node("Sin", ["x"], ["a"], name="sin_node"),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Floor", ["b"], ["c"]),
        helper.make_node("Magic", ["c"], ["y"], name="magic", domain="com.acme"),
    ]
    return save(tmp_path, nodes, opsets=[("", 17), ("com.acme", 1)])


@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (unsupported, ["3 unsupported", "Sin (sin_node)", "Floor (Floor_0)",
                       "com.acme.Magic (magic)"]),
        (unconvertible, ["cannot upgrade Conv (conv_1) from opset 9 to 17"]),
    ],
    ids=["unsupported-ops", "failed-upgrade"],
)  # fmt: skip
def test_compile_refuses_in_one_line_before_anything_runs(
    make: Callable[[Path], Path],
    needles: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through ``splitter compile`` (progress shown): the import step, then the one error line
    (exit 2); no planning step ran and no OUT was written. With ``--json`` the error object."""
    from splitter.cli import main

    path = make(tmp_path)
    boards = Path(__file__).resolve().parents[1] / "models" / "boards" / "e2e_tiny2.toml"
    out = tmp_path / "out"
    monkeypatch.setenv("SPLITTER_PROGRESS", "plain")
    for extra in ([], ["--json"]):
        with pytest.raises(SystemExit) as info:
            main(["compile", str(path), "-t", str(boards), "-o", str(out), *extra])
        captured = capsys.readouterr()
        assert info.value.code == 2
        importing, error = captured.err.splitlines()
        assert importing == f"splitter: importing {path.name}"
        assert error.startswith(f"splitter: error: {path}: ")
        assert all(needle in error for needle in needles), error
        assert not out.exists()
        if extra:
            assert json.loads(captured.out)["error"] == error.removeprefix("splitter: error: ")
        else:
            assert captured.out == ""


def test_unsupported_ops_listed_before_opset_upgrade(tmp_path: Path) -> None:
    nodes = [helper.make_node("Scan", ["x"], ["y"], name="loop_1")]
    err = load_error(save(tmp_path, nodes, opsets=[("", 9)]))
    assert isinstance(err, UnsupportedOpError) and "Scan (loop_1)" in str(err)


def test_empty_graph(tmp_path: Path) -> None:
    err = load_error(save(tmp_path, [], outputs=("x",)))
    assert isinstance(err, InputFileError) and "no nodes" in str(err)


def test_tensor_whose_shape_stays_unknown(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "target"], ["y"], name="dyn_reshape")],
        "dyn",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("target", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "dyn.onnx"
    onnx.save(model, str(path))
    err = load_error(path)
    assert isinstance(err, ShapeError) and "'y'" in str(err) and "--input-shape" in str(err)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_corruption_is_a_splitter_error_or_loads(
    tmp_path: Path, data: st.DataObject
) -> None:
    """Flipped or deleted bytes anywhere in a valid file: a clean SplitterError or a valid graph,
    never another exception."""
    blob = bytearray(good_model_bytes(tmp_path))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        if data.draw(st.booleans()):
            blob[pos] = data.draw(st.integers(0, 255))
        else:
            del blob[pos : pos + data.draw(st.integers(1, 16))]
    path = tmp_path / "fuzzed.onnx"
    path.write_bytes(bytes(blob))
    try:
        graph = load_graph(path)
    except SplitterError as err:
        assert str(path) in str(err) and "\n" not in str(err)
    else:
        assert graph.ops


def test_names_with_newlines_stay_on_one_line(tmp_path: Path) -> None:
    """Regression (hypothesis found it): a tensor name holding a newline, in the dynamic-shape
    error, is printed escaped (``repr``), so the message stays one line and names the input."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["in\nput"], ["y"])],
        "nl",
        [helper.make_tensor_value_info("in\nput", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "nl.onnx"
    path.write_bytes(model.SerializeToString())
    err = load_error(path)
    assert isinstance(err, ShapeError) and r"'in\nput'" in str(err)
    err = load_error(path, input_shapes={"in\nput": (0, 4)})
    assert isinstance(err, ShapeError) and r"in\nput" in str(err)
    err = load_error(path, input_shapes={"x\ry": (1, 4)})
    assert r"'x\ry'" in str(err)


def test_unsupported_op_with_newline_in_its_name(tmp_path: Path) -> None:
    """Node names and op types from the file are escaped in the unsupported-op list."""
    node = helper.make_node("Foo\nBar", ["x"], ["y"], name="bad\nnode", domain="my\ndomain")
    path = save(tmp_path, [node], opsets=[("", 17), ("my\ndomain", 1)])
    err = load_error(path)
    assert isinstance(err, UnsupportedOpError) and r"bad\nnode" in str(err)
