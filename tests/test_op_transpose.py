"""Transpose of rank 5 and 6 (``k_transpose_nd``): ShuffleNet's channel shuffle and any perm.

* cost and checks: the op class's shape, MACs and kernel check at ranks 4 to 7;
* float NCHW: ONNX models imported with ``load_chain``, built for the host (ASan + UBSan) and
  compared with onnxruntime: the channel shuffle of the zoo ShuffleNet (Reshape to 5-D,
  Transpose ``[0, 2, 1, 3, 4]``, Reshape back) between two convs split over two devices, and
  one-op models of every rank-5 perm class worth telling apart (reversed, rotated, interleaved,
  a rank-6 perm, axes of size 1);
* the zoo ShuffleNet itself: every op now has a kernel (it had none for its 16 transposes) and
  ``compile`` builds its firmware with the real arm-none-eabi-gcc.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_codegen_host import check_model
from test_codegen_support import Net, build_host, planner, run_host
from test_zoo_graphs import BOARDS, random_weights, zoo_path

from splitter.codegen.model_c import generate_device_c
from splitter.codegen.ops import KINDS, check
from splitter.codegen.ops.shape import TRANSPOSE_MAX_RANK
from splitter.importers import load_chain, load_graph
from splitter.ir import Op, TensorSpec


def _op(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[Op, dict[str, TensorSpec]]:
    out = tuple(shape[p] for p in perm)
    op = Op("t", "transpose", ("x",), ("y",), {"perm": perm})
    return op, {"x": TensorSpec("x", shape), "y": TensorSpec("y", out)}


def test_transpose_shape_macs_and_rank_limit() -> None:
    """Shape ``x.shape[perm[d]]``, one MAC per element; ranks up to 6 have a kernel, 7 not."""
    kind = KINDS["transpose"]
    op, tensors = _op((1, 3, 4, 8, 8), (0, 2, 1, 3, 4))
    assert kind.infer_shape(op, [(1, 3, 4, 8, 8)], "NCHW") == (1, 4, 3, 8, 8)
    assert kind.macs(op, [tensors["x"]], tensors["y"]) == 3 * 4 * 8 * 8
    for rank in range(1, TRANSPOSE_MAX_RANK + 1):
        perm = tuple(reversed(range(rank)))
        assert check(*_op(tuple(range(2, rank + 2)), perm)) is None, rank
    reason = check(*_op((2,) * 7, tuple(range(7))))
    assert reason == "transpose of rank 7 > 6"


def shuffle_net() -> Net:
    """conv 3 -> 12 channels, channel shuffle in 3 groups (ShuffleNet), conv 12 -> 6, relu."""
    net = Net("shuffle", (1, 3, 8, 8), seed=11)
    y = net.node("Conv", ["x", net.const(net.rand(12, 3, 3, 3))], pads=[1, 1, 1, 1])
    y = net.node("Reshape", [y, net.const(np.array([1, 3, 4, 8, 8]), np.int64)])
    y = net.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = net.node("Reshape", [y, net.const(np.array([1, 12, 8, 8]), np.int64)])
    y = net.node("Conv", [y, net.const(net.rand(6, 12, 1, 1))])
    net.last = net.node("Relu", [y])
    return net


def test_channel_shuffle_matches_onnxruntime(tmp_path: Path) -> None:
    """The shuffle between two convs, imported, split over two devices, against onnxruntime."""
    net = shuffle_net()
    model = net.onnx_model()
    onnx.save(model, str(tmp_path / "shuffle.onnx"))
    chain = load_chain(tmp_path / "shuffle.onnx")
    ops = [op for layer in chain.layers for op in layer.ops if op.kind == "transpose"]
    assert [len(chain.graph.tensors[op.inputs[0]].shape) for op in ops] == [5]
    check_model(net, tmp_path, "importer")


PERMS = [
    ((2, 3, 4, 5, 3), (4, 3, 2, 1, 0)),  # reversed
    ((2, 3, 4, 5, 3), (1, 2, 3, 4, 0)),  # rotated
    ((2, 3, 4, 5, 3), (0, 3, 1, 4, 2)),  # interleaved
    ((3, 1, 4, 1, 5), (2, 4, 0, 3, 1)),  # axes of size 1
    ((2, 3, 2, 2, 3, 2), (5, 0, 3, 1, 4, 2)),  # rank 6
]


@pytest.mark.parametrize(("shape", "perm"), PERMS, ids=[str(p) for _, p in PERMS])
def test_transpose_nd_matches_onnxruntime(
    shape: tuple[int, ...], perm: tuple[int, ...], tmp_path: Path
) -> None:
    """A one-op Transpose model: the generated C (``k_transpose_nd``) is onnxruntime's bits."""
    out = tuple(shape[p] for p in perm)
    node = helper.make_node("Transpose", ["x"], ["y"], perm=list(perm), name="t")
    graph = helper.make_graph(
        [node],
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "t.onnx"
    onnx.save(model, str(path))
    chain = load_chain(path)
    gen = generate_device_c(chain, [(0, 1, len(chain) - 1)], "solo", planner=planner())
    assert "k_transpose_nd(" in gen.files["model.c"]
    exe = build_host(gen, tmp_path / "solo")
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(run_host(exe, 0, x, tmp_path / "solo"), ref.ravel())


def test_zoo_shufflenet_has_a_kernel_for_every_op(tmp_path: Path) -> None:
    """The 16 rank-5 transposes were the only ops of the zoo ShuffleNet without a kernel."""
    model = tmp_path / "shufflenet.onnx"
    random_weights(zoo_path("shufflenet"), model)
    graph = load_graph(model)
    rank5 = [op for op in graph.ops if op.kind == "transpose"]
    assert len(rank5) == 16 and all(len(graph.tensors[op.inputs[0]].shape) == 5 for op in rank5)
    assert {op.name: check(op, graph.tensors) for op in graph.ops if check(op, graph.tensors)} == {}


@pytest.mark.slow
@pytest.mark.toolchain
def test_zoo_shufflenet_compiles_and_builds_firmware(tmp_path: Path) -> None:
    """``compile`` writes firmware for every device (it wrote none before: no kernel for the
    rank-5 transposes), and every device's image builds with arm-none-eabi-gcc and links
    within its part (``splitter build``'s :func:`~splitter.toolchain.build.build_all`)."""
    from splitter.compile import CompileOptions, compile_model
    from splitter.toolchain.build import build_all

    model = tmp_path / "shufflenet.onnx"
    random_weights(zoo_path("shufflenet"), model)
    # zoo_large.toml's planning-only 100 Mbaud link is beyond every USART divisor: 1 Mbaud
    boards = tmp_path / "boards.toml"
    boards.write_text(BOARDS.read_text().replace("baud = 100000000", "baud = 1000000"))
    out = tmp_path / "out"
    result = compile_model(model, boards, out, CompileOptions(samples=1))
    assert result.validation is not None and result.validation.passed
    assert result.firmware.startswith("generated"), result.firmware
    sources = [p.read_text() for p in (out / "firmware").rglob("*.c")]
    assert sum(text.count("k_transpose_nd(A + ") for text in sources) == 16  # the calls
    builds = build_all(out, emulator=False)
    assert {b.device for b in builds} == {sm.device for sm in result.manifest.submodels}
    assert all(b.elf.is_file() for b in builds)


def test_code_size_estimate_counts_the_rank_general_kernel(tmp_path: Path) -> None:
    """The code-size table measures no rank-5 transpose (no model of models/ has one): its op
    key is apart (``.nd``), so the estimate takes the table's upper bound, which links
    ``k_transpose_nd``: never less than the rank-4 transpose's."""
    from splitter.cost.code import kernel_bytes, op_key
    from splitter.hardware.boards import load_boards

    net = shuffle_net()
    onnx.save(net.onnx_model(), str(tmp_path / "shuffle.onnx"))
    chain = load_chain(tmp_path / "shuffle.onnx")
    ops = [op for layer in chain.layers for op in layer.ops if op.kind == "transpose"]
    key = op_key(ops[0], chain)
    assert key == "transpose.nd/NCHW/float32>float32"
    part = load_boards(BOARDS.parent / "demo.toml").devices[0].part
    nd = kernel_bytes(part, [key])
    assert nd > kernel_bytes(part, ["transpose/NCHW/float32>float32"])
