"""Patterns of exported graphs (torch.onnx.export, tf2onnx): import, cost, compile, host C.

Each small model below is written with ``onnx.helper`` the way the exporters write it:

* ``gelu``: torch's erf GELU (Div, Erf, Add, Mul, Mul), Hugging Face's (Mul 0.5 first), opset
  20 ``Gelu`` (erf and tanh), and a bare ``Erf``;
* ``slices``: ``Split`` into two halves (a GLU), ``Slice`` with negative and reversed bounds;
* ``resize``: nearest (asymmetric / floor as torch's ``Upsample``, half_pixel round) and
  bilinear (half_pixel, align_corners, pytorch_half_pixel) by scales and by sizes;
* ``pads``: reflect, edge and wrap padding, ``Gemm`` with ``transB``;
* ``tf2onnx``: an NHWC Keras graph as tf2onnx writes it (Transposes after the input and in
  pairs between blocks);
* ``mobile``: HardSwish, a squeeze-excite block (GlobalAveragePool -> Conv -> Relu -> Conv ->
  HardSigmoid -> Mul broadcast), a ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``
  flatten, ``Reshape(-1)``, a Transpose pair around an NHWC region, a standalone
  BatchNormalization of constants folded away.

Every model goes through ``compile`` (validation by onnxruntime, two boards) and through the
generated C built for the host, compared sub-model by sub-model with onnxruntime
(``max|c - ref| <= 1e-4 max(1, max|ref|)``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from test_codegen_host import check_model
from test_codegen_support import Net
from test_slice_helpers import sized_boards

from splitter.compile import CompileOptions, compile_model
from splitter.cost.handlers import handler
from splitter.importers import load_chain
from splitter.importers.onnx_import import load_onnx


class OpsetNet(Net):
    """A :class:`Net` written at another opset (Gelu needs 20, Pad ``wrap`` 19)."""

    def __init__(self, name: str, shape: tuple[int, ...], opset: int, seed: int = 0) -> None:
        super().__init__(name, shape, seed)
        self.opset = opset

    def onnx_model(self) -> onnx.ModelProto:
        inp = helper.make_tensor_value_info(self.input, onnx.TensorProto.FLOAT, self.input_shape)
        out = helper.make_tensor_value_info(self.last, onnx.TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, self.name, [inp], [out], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 9
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model)
        return model


def conv(net: Net, x: str, cin: int, cout: int, k: int = 3) -> str:
    return net.node("Conv", [x, net.const(net.rand(cout, cin, k, k))], pads=[k // 2] * 4)


def scalar(net: Net, value: float) -> str:
    return net.const(np.float32(value))


def ints(net: Net, *values: int) -> str:
    return net.const(np.asarray(values, np.int64), np.int64)


def net_gelu() -> Net:
    net = OpsetNet("gelu", (1, 3, 6, 5), opset=20, seed=1)
    x = conv(net, "x", 3, 6)
    d = net.node("Div", [x, scalar(net, 2**0.5)])  # torch: x * (1 + erf(x / sqrt2)) * 0.5
    e = net.node("Erf", [d])
    a = net.node("Add", [e, scalar(net, 1.0)])
    m = net.node("Mul", [x, a])
    x = net.node("Mul", [m, scalar(net, 0.5)])
    x = conv(net, x, 6, 6)
    h = net.node("Mul", [x, scalar(net, 0.5)])  # Hugging Face: (x * 0.5) * (1 + erf(x * 1/sqrt2))
    d = net.node("Mul", [x, scalar(net, 2**-0.5)])
    a = net.node("Add", [net.node("Erf", [d]), scalar(net, 1.0)])
    x = net.node("Mul", [h, a])
    x = net.node("Gelu", [conv(net, x, 6, 5)])
    x = net.node("Gelu", [conv(net, x, 5, 4)], approximate="tanh")
    net.last = net.node("Erf", [net.node("Add", [x, scalar(net, -0.25)])])
    return net


def net_slices() -> Net:
    net = OpsetNet("slices", (1, 3, 8, 7), opset=18, seed=2)
    x = conv(net, "x", 3, 8)
    a, b = "split_a", "split_b"
    net.nodes.append(helper.make_node("Split", [x], [a, b], name="split", axis=1, num_outputs=2))
    x = net.node("Mul", [a, net.node("Sigmoid", [b])])  # GLU
    # rows 1..6 step 2, columns reversed from the last (-1) down to index 1
    starts, ends = ints(net, 1, -1), ints(net, 7, 0)
    x = net.node("Slice", [x, starts, ends, ints(net, 2, 3), ints(net, 2, -1)])
    x = conv(net, x, 4, 5)
    parts = ["s0", "s1", "s2"]
    net.nodes.append(
        helper.make_node("Split", [x, ints(net, 1, 3, 1)], parts, name="split3", axis=1)
    )
    net.last = net.node("Concat", [parts[2], parts[0]], axis=1)
    return net


def net_resize() -> Net:
    net = OpsetNet("resize", (1, 2, 5, 4), opset=18, seed=3)
    empty = net.const(np.zeros(0, np.float32))
    x = conv(net, "x", 2, 4)
    scales = net.const(np.asarray([1, 1, 2, 2], np.float32))
    x = net.node("Resize", [x, empty, scales], mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")  # fmt: skip
    x = conv(net, x, 4, 4)
    sizes = ints(net, 1, 4, 13, 7)
    x = net.node("Resize", [x, empty, empty, sizes], mode="linear")  # half_pixel
    x = net.node("Resize", [x, empty, net.const(np.asarray([1, 1, 0.6, 1.5], np.float32))],
                 mode="linear", coordinate_transformation_mode="align_corners")  # fmt: skip
    x = conv(net, x, 4, 3)
    x = net.node("Resize", [x, empty, empty, ints(net, 1, 3, 5, 6)], mode="linear",
                 coordinate_transformation_mode="pytorch_half_pixel")  # fmt: skip
    net.last = net.node("Resize", [x, empty, net.const(np.asarray([1, 1, 1.5, 0.5], np.float32))],
                        mode="nearest")  # fmt: skip
    return net


def net_pads() -> Net:
    net = OpsetNet("pads", (1, 3, 5, 6), opset=19, seed=4)
    x = conv(net, "x", 3, 4)
    x = net.node("Pad", [x, ints(net, 0, 0, 2, 1, 0, 0, 1, 3)], mode="reflect")
    x = net.node("Pad", [x, ints(net, 0, 1, 1, 0, 0, 0, 2, 2)], mode="edge")
    x = conv(net, x, 5, 4)
    x = net.node("Pad", [x, ints(net, 1, 2, 0, 1), "", ints(net, 2, 3)], mode="wrap")
    x = net.node("GlobalAveragePool", [x])
    x = net.node("Flatten", [x])
    w = net.const(net.rand(7, 4))  # Gemm with transB: B is (out, in)
    net.last = net.node("Gemm", [x, w, net.const(net.rand(7))], transB=1, alpha=0.5)
    return net


def net_mobile() -> Net:
    net = OpsetNet("mobile", (1, 3, 8, 8), opset=17, seed=5)
    x = net.node("HardSwish", [conv(net, "x", 3, 8)])
    s = net.node("GlobalAveragePool", [x])  # squeeze-excite
    s = net.node("Relu", [conv(net, s, 8, 4, k=1)])
    s = net.node("HardSigmoid", [conv(net, s, 4, 8, k=1)], alpha=1 / 6, beta=0.5)
    x = net.node("Mul", [x, s])
    t = net.node("Transpose", [x], perm=[0, 2, 3, 1])  # an NHWC region between a pair
    t = net.node("Relu", [t])
    x = net.node("Transpose", [t], perm=[0, 3, 1, 2])
    # a standalone BatchNormalization of constants (exporters leave these): folded away
    bn = [net.const(net.rand(8) + 1.5) for _ in range(4)]
    scale = net.node("BatchNormalization", [net.const(net.rand(1, 8, 1, 1)), *bn])
    x = net.node("Add", [x, scale])
    x = conv(net, x, 8, 4)
    shape = net.node("Shape", [x])  # torch's flatten: Shape -> Gather -> Unsqueeze -> Concat
    batch = net.node("Gather", [shape, net.const(np.int64(0), np.int64)], axis=0)
    batch = net.node("Unsqueeze", [batch, ints(net, 0)])
    target = net.node("Concat", [batch, ints(net, -1)], axis=0)
    x = net.node("Reshape", [x, target])
    x = net.node("Gemm", [x, net.const(net.rand(16, 4 * 8 * 8) * 0.2)], transB=1)
    x = net.node("Reshape", [x, ints(net, -1)])  # Flatten via Reshape(-1)
    net.last = net.node("Softmax", [x], axis=0)
    return net


def net_tf2onnx() -> Net:
    """tf2onnx's form of an NHWC Keras model (KWS DS-CNN-like): a Transpose to NCHW right
    after the (1, 49, 10, 1) input (it moves only an axis of length 1: a reshape that joins the
    input layer), Transpose pairs left between blocks, an NHWC ReduceMean, MatMul + Add."""
    net = OpsetNet("tf2onnx", (1, 49, 10, 1), opset=13, seed=9)
    x = net.node("Transpose", ["x"], perm=[0, 3, 1, 2])
    w, b = net.const(net.rand(8, 1, 10, 4)), net.const(net.rand(8))
    x = net.node("Relu", [net.node("Conv", [x, w, b], strides=[2, 2], pads=[4, 1, 5, 2])])
    for _ in range(2):
        w, b = net.const(net.rand(8, 1, 3, 3)), net.const(net.rand(8))
        x = net.node("Relu", [net.node("Conv", [x, w, b], group=8, pads=[1, 1, 1, 1])])
        x = net.node("Transpose", [x], perm=[0, 2, 3, 1])
        x = net.node("Transpose", [x], perm=[0, 3, 1, 2])
        x = net.node("Relu", [conv(net, x, 8, 8, k=1)])
    x = net.node("Transpose", [x], perm=[0, 2, 3, 1])
    x = net.node("ReduceMean", [x], axes=[1, 2], keepdims=0)
    x = net.node(
        "Add", [net.node("MatMul", [x, net.const(net.rand(8, 12))]), net.const(net.rand(12))]
    )
    net.last = net.node("Softmax", [x], axis=-1)
    return net


NETS: dict[str, Callable[[], Net]] = {
    "tf2onnx": net_tf2onnx,
    "gelu": net_gelu,
    "slices": net_slices,
    "resize": net_resize,
    "pads": net_pads,
    "mobile": net_mobile,
}


def save(net: Net, tmp_path: Path) -> Path:
    path = tmp_path / f"{net.name}.onnx"
    onnx.save(net.onnx_model(), str(path))
    return path


@pytest.mark.parametrize("name", sorted(NETS))
def test_host_c_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    """Three sub-models over two devices through the real importer, each against onnxruntime."""
    check_model(NETS[name](), tmp_path, "importer")


@pytest.mark.parametrize("name", sorted(NETS))
def test_compile_validates(name: str, tmp_path: Path) -> None:
    path = save(NETS[name](), tmp_path)
    chain = load_chain(path)
    target = tmp_path / "boards.toml"
    target.write_text(sized_boards(chain, "fastslow"))
    result = compile_model(path, target, tmp_path / "out", CompileOptions(firmware=False))
    assert result.validation is not None and result.validation.passed
    assert len(result.submodels) >= 2


def kinds(name: str, tmp_path: Path) -> list[str]:
    return [op.kind for op in load_onnx(save(NETS[name](), tmp_path)).ops]


def test_import_gelu_patterns(tmp_path: Path) -> None:
    graph = load_onnx(save(net_gelu(), tmp_path))
    convs = [op for op in graph.ops if op.kind == "conv2d"]
    # both exported GELUs and both Gelu ops fuse into the convolution before them
    assert [op.attrs["act"] for op in convs] == ["gelu", "gelu", "gelu", "gelu_tanh"]
    assert len(convs[0].source_nodes) == 6  # Conv, Div, Erf, Add, Mul, Mul
    assert [op.kind for op in graph.ops][-1] == "add"  # x - 0.25, then erf fused into it
    assert graph.ops[-1].attrs["act"] == "erf"


def test_import_slices_and_cost(tmp_path: Path) -> None:
    graph = load_onnx(save(net_slices(), tmp_path))
    slices = [op for op in graph.ops if op.kind == "slice"]
    assert len(slices) == 5  # 2 + 1 + 2 used outputs of the 3-way split
    rev = next(op for op in slices if op.attrs["steps"] == (1, 1, 2, -1))
    assert rev.attrs["starts"] == (0, 0, 1, 6) and rev.attrs["ends"] == (1, 4, 7, 0)
    out = graph.tensor(rev.outputs[0])
    assert out.shape == (1, 4, 3, 6)
    ins = [graph.tensor(rev.inputs[0])]
    assert handler(rev).infer_shape(rev, [ins[0].shape], "NCHW") == out.shape
    assert handler(rev).macs(rev, ins, out) == 4 * 3 * 6


def test_import_resize_and_cost(tmp_path: Path) -> None:
    graph = load_onnx(save(net_resize(), tmp_path))
    resizes = [op for op in graph.ops if op.kind == "resize"]
    assert [op.attrs["mode"] for op in resizes] == [
        "nearest",
        "linear",
        "linear",
        "linear",
        "nearest",
    ]
    up = resizes[0]
    assert up.attrs["scales"] == (1.0, 1.0, 2.0, 2.0) and up.attrs["nearest_mode"] == "floor"
    by_size = resizes[1]
    assert by_size.attrs["sizes"] == (1, 4, 13, 7)
    assert by_size.attrs["scales"][2] == pytest.approx(13 / 10)
    out = graph.tensor(by_size.outputs[0])
    assert handler(by_size).macs(by_size, [graph.tensor(by_size.inputs[0])], out) == 4 * 4 * 13 * 7


def test_import_pads_gemm_and_mobile(tmp_path: Path) -> None:
    graph = load_onnx(save(net_pads(), tmp_path))
    modes = [op.attrs["mode"] for op in graph.ops if op.kind == "pad_mode"]
    assert modes == ["reflect", "edge", "wrap"]
    dense = graph.ops[-1]
    assert dense.kind == "dense" and dense.weights["W"].shape == (7, 4)
    ops = load_onnx(save(net_mobile(), tmp_path)).ops
    got = [op.kind for op in ops]
    # the Transpose pair around the Relu goes, the Relu fuses into the squeeze-excite Mul;
    # Shape/Gather/Concat fold into the Reshape's constant shape; the BatchNormalization of
    # constants folds into the Add's constant
    assert got.count("transpose") == 0 and got.count("add") == 1
    assert next(op for op in ops if op.kind == "mul").attrs["act"] == "relu"
    assert "C" in next(op for op in ops if op.kind == "add").weights
    assert "batchnorm" not in got and "hardswish" not in got  # fused into the conv
    assert [op.attrs.get("act") for op in ops if op.kind == "conv2d"][:3] == [
        "hardswish",
        "relu",
        "hardsigmoid",
    ]
    assert got[-3:] == ["dense", "reshape", "softmax"]


def test_tf2onnx_input_transpose_joins_the_input_layer(tmp_path: Path) -> None:
    """The sub-model that starts the chain reads the graph input itself (1, 49, 10, 1), not the
    transposed view the input layer ends with (the tf2onnx KWS crash: "Got: 49 Expected: 1")."""
    path = save(net_tf2onnx(), tmp_path)
    chain = load_chain(path)
    assert chain.layers[0].input.shape == (1, 49, 10, 1)
    assert chain.layers[0].output.shape == (1, 1, 49, 10)
    assert [op.kind for op in chain.layers[0].ops] == ["reshape"]
    assert sum(op.kind == "transpose" for op in chain.graph.ops) == 1  # the pairs folded
    target = tmp_path / "boards.toml"
    target.write_text(sized_boards(chain, "three"))
    result = compile_model(path, target, tmp_path / "out", CompileOptions(firmware=False))
    assert result.manifest.submodels[0].inputs[0].shape == (1, 49, 10, 1)


def test_transpose_pair_is_zero_cost(tmp_path: Path) -> None:
    """Transpose, Transpose back (tf2onnx's pairs) fold to a reshape; moving only axes of
    length 1 is a reshape as well."""
    net = OpsetNet("pair", (1, 4, 3, 5), opset=17)
    t = net.node("Transpose", [conv(net, "x", 4, 4)], perm=[0, 2, 3, 1])
    t = net.node("Transpose", [t], perm=[0, 3, 1, 2])
    g = net.node("GlobalAveragePool", [t])
    net.last = net.node("Transpose", [g], perm=[0, 2, 3, 1])  # (1, 4, 1, 1) -> (1, 1, 1, 4)
    ops = load_onnx(save(net, tmp_path)).ops
    assert [op.kind for op in ops] == ["conv2d", "reshape", "global_avgpool", "reshape"]
    chain = load_chain(tmp_path / "pair.onnx")
    assert all(layer.cost.macs == 0 for layer in chain.layers if layer.kind == "reshape")


ERF_MAIN = r"""
#include <stdio.h>
#include "kernels.h"
int main(int argc, char **argv)
{
    float x, r[2];
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    (void)argc;
    while (fread(&x, sizeof x, 1, in) == 1) {
        r[0] = k_erff(x);
        k_act(&x, &r[1], 1, K_ACT_GELU, 0.0f, 0.0f);
        fwrite(r, sizeof r, 1, out);
    }
    fclose(in); fclose(out);
    return 0;
}
"""


def test_erf_and_gelu_accuracy(tmp_path: Path) -> None:
    """k_erff against float64 erf on a dense grid: absolute error <= 3e-7 everywhere, relative
    <= 1e-6 near 0 (the Taylor branch); GELU's x/2 (1 + erf(x / sqrt 2)) within
    ``5e-7 max(1, |x|)`` (the erfc branch for x << 0 has no cancellation)."""
    import math
    import subprocess

    from splitter.codegen.model_c import KERNELS_DIR

    (tmp_path / "main.c").write_text(ERF_MAIN)
    exe = tmp_path / "kerf"
    flags = ["-std=c99", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined"]
    srcs = [str(tmp_path / "main.c"), str(KERNELS_DIR / "kernels.c")]
    subprocess.run(["gcc", *flags, f"-I{KERNELS_DIR}", "-o", str(exe), *srcs], check=True)
    x = np.concatenate([np.linspace(-6, 6, 24001), np.linspace(-0.6, 0.6, 2401)]).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    subprocess.run([str(exe), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], check=True)
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), np.float32).reshape(-1, 2)
    xs = x.astype(np.float64)
    erf = np.array([math.erf(v) for v in xs])
    assert np.max(np.abs(y[:, 0] - erf)) <= 3e-7
    small = (np.abs(xs) < 0.5) & (xs != 0)
    assert np.max(np.abs(y[small, 0] - erf[small]) / np.abs(erf[small])) <= 1e-6
    gelu = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in xs])
    assert np.max(np.abs(y[:, 1] - gelu) / np.maximum(1.0, np.abs(xs))) <= 5e-7


def net_emulated() -> Net:
    """The exported patterns in one small model for the emulated boards: torch GELU, a Split
    GLU, a reversed Slice, nearest and linear Resize, reflect / edge Pad, HardSwish with a
    squeeze-excite block, a Transpose pair, torch's Shape-Gather-Concat flatten, Gemm transB."""
    net = OpsetNet("exported", (1, 3, 12, 10), opset=19, seed=6)
    x = conv(net, "x", 3, 8)
    d = net.node("Div", [x, scalar(net, 2**0.5)])
    a = net.node("Add", [net.node("Erf", [d]), scalar(net, 1.0)])
    x = net.node("Mul", [net.node("Mul", [x, a]), scalar(net, 0.5)])
    net.nodes.append(
        helper.make_node("Split", [x], ["ga", "gb"], name="glu", axis=1, num_outputs=2)
    )
    x = net.node("Mul", ["ga", net.node("Sigmoid", ["gb"])])
    x = net.node("Slice", [x, ints(net, -1), ints(net, -1000), ints(net, 3), ints(net, -1)])
    empty = net.const(np.zeros(0, np.float32))
    up = net.const(np.asarray([1, 1, 2, 2], np.float32))
    x = net.node("Resize", [x, empty, up], mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")  # fmt: skip
    x = net.node("Pad", [x, ints(net, 0, 0, 1, 2, 0, 0, 2, 1)], mode="reflect")
    x = net.node("HardSwish", [conv(net, x, 4, 6)])
    x = net.node("Resize", [x, empty, empty, ints(net, 1, 6, 9, 8)], mode="linear")
    x = net.node("Pad", [x, ints(net, 0, 0, 1, 1, 0, 0, 0, 1)], mode="edge")
    s = net.node("GlobalAveragePool", [x])
    s = net.node("HardSigmoid", [conv(net, s, 6, 6, k=1)], alpha=1 / 6, beta=0.5)
    x = net.node("Mul", [x, s])
    t = net.node("Transpose", [x], perm=[0, 2, 3, 1])
    x = net.node("Transpose", [t], perm=[0, 3, 1, 2])
    x = net.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    shape = net.node("Shape", [x])
    batch = net.node(
        "Unsqueeze", [net.node("Gather", [shape, net.const(np.int64(0), np.int64)]), ints(net, 0)]
    )
    x = net.node("Reshape", [x, net.node("Concat", [batch, ints(net, -1)], axis=0)])
    x = net.node("Gemm", [x, net.const(net.rand(10, 6 * 5 * 5) * 0.3)], transB=1)
    net.last = net.node("Softmax", [x], axis=1)
    return net


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_emulated_boards_equal_onnxruntime(tmp_path: Path) -> None:
    """The model compiled over two emulated F405 boards (QEMU netduinoplus2), built with
    arm-none-eabi-gcc and run: the boards' output equals onnxruntime's."""
    import onnxruntime as ort
    from test_e2e_support import cli, qemu_pids, random_input

    from splitter.toolchain.build import run_make

    path = save(net_emulated(), tmp_path)
    chain = load_chain(path)
    assert chain.graph is not None
    got = {op.kind for op in chain.graph.ops} | {op.attrs.get("act") for op in chain.graph.ops}
    assert {"gelu", "slice", "resize", "pad_mode", "hardswish", "hardsigmoid", "dense"} <= got
    assert {op.attrs["mode"] for op in chain.graph.ops if op.kind == "resize"} == {
        "nearest",
        "linear",
    }
    n = len(chain)
    boards = tmp_path / "boards.toml"
    boards.write_text(
        "[link]\nbaud = 115200\n"
        + "".join(f'[[device]]\nname = "{d}"\nmcu = "STM32F405RG"\n' for d in "ab")
    )
    out = tmp_path / "out"
    half = (0,) * (n // 2) + (1,) * (n - n // 2)  # layers 0..n/2-1 on a, the rest on b
    result = compile_model(path, boards, out, CompileOptions(assignment=half))
    assert len(result.submodels) == 2 and result.validation is not None
    for device in ("a", "b"):
        run_make(out / "firmware" / device, emulator=True)
    x = random_input((1, 3, 12, 10), seed=4)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
               "--output", str(tmp_path / "y.npy"), "--model", str(path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    assert float(np.max(np.abs(np.load(tmp_path / "y.npy") - ref))) <= 1e-4
    assert qemu_pids(str(out)) == []


@pytest.mark.parametrize(
    "coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
)
@pytest.mark.parametrize(
    "mode", ["linear", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
def test_resize_index_formulas_match_onnxruntime(coord: str, mode: str) -> None:
    """codegen.ops.gather's source indices / taps, applied in numpy, equal onnxruntime's Resize
    for every supported coordinate and nearest mode, up- and down-scaling, by scales and sizes."""
    import onnxruntime as ort

    from splitter.codegen.ops.gather import resize_index
    from splitter.ir import Op

    x = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    for scales, sizes in (((1, 1, 1.6, 0.6), None), (None, (1, 2, 9, 3)), (None, (1, 2, 1, 4))):
        linear = mode == "linear"
        attrs = {"mode": "linear" if linear else "nearest", "coordinate_transformation_mode": coord}
        if not linear:
            attrs["nearest_mode"] = mode
        inputs = ["x", "", "s"] if scales else ["x", "", "", "n"]
        value = np.asarray(scales, np.float32) if scales else np.asarray(sizes, np.int64)
        graph = helper.make_graph(
            [helper.make_node("Resize", inputs, ["y"], **attrs)],
            "r",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
            [onnx.numpy_helper.from_array(value, "s" if scales else "n")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x})[0]
        ys = ref.shape
        eff = (
            tuple(float(np.float32(v)) for v in scales)
            if scales
            else tuple(o / i for o, i in zip(ys, x.shape, strict=True))
        )  # what the importer stores: the file's float32 scales, or the exact size ratio
        op = Op("r", "resize", ("x",), ("y",),
                {"mode": attrs["mode"], "coord_mode": coord, "nearest_mode": mode,
                 "scales": eff, "sizes": ys})  # fmt: skip
        index = resize_index(op, x.shape, ys)
        if not linear:
            got = x[np.ix_(*index)]  # type: ignore[arg-type]
        else:
            (h0, h1, fh), (w0, w1, fw) = index[2], index[3]  # type: ignore[misc]
            top = x[:, :, h0][..., w0] + fw * (x[:, :, h0][..., w1] - x[:, :, h0][..., w0])
            bot = x[:, :, h1][..., w0] + fw * (x[:, :, h1][..., w1] - x[:, :, h1][..., w0])
            got = top + fh[:, None] * (bot - top)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=f"{scales} {sizes}")


@pytest.mark.parametrize("name", sorted(NETS))
def test_handlers_infer_the_imported_shapes(name: str, tmp_path: Path) -> None:
    """Every op's cost-handler shape equals the shape the importer recorded (new kinds too)."""
    from splitter.graph.builder import check_shapes

    assert check_shapes(load_onnx(save(NETS[name](), tmp_path))) == []
