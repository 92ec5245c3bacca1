"""ConvTranspose (``conv_transpose``, ``k_conv_transpose``): the op added after issue #28 made an
op class carry its importer, cost features and grid (this test, ``codegen/ops/conv_transpose.py``,
``kernels.c`` and ``kernels.h`` are all it touched).

* importer: an ONNX ConvTranspose becomes one ``conv_transpose`` op with ONNX's attributes and
  weights; the variants it refuses (groups, ``output_shape``, ``SAME_*``) are reported with the
  importer's other unsupported nodes;
* shape and MACs against hand-computed numbers;
* float32 NCHW: one-op models and a conv -> ConvTranspose -> relu decoder split over two
  devices, the generated C built for the host (ASan + UBSan) against onnxruntime;
* the registry: ``splitter ops`` lists it after conv2d, the cost table's features and the grid
  come from the class.
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

from splitter.codegen.model_c import generate_device_c
from splitter.codegen.ops import KINDS, check
from splitter.errors import UnsupportedOpError
from splitter.importers import load_chain, load_graph
from splitter.ir import Op, TensorSpec


def _model(
    path: Path, c: int, h: int, w: np.ndarray, out: tuple[int, ...], **attrs: object
) -> Path:
    """A one-node ConvTranspose model with weights ``w`` and a bias."""
    rng = np.random.default_rng(3)
    bias = rng.standard_normal(w.shape[1]).astype(np.float32)
    inits = [
        helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel()),
        helper.make_tensor("B", TensorProto.FLOAT, bias.shape, bias),
    ]
    node = helper.make_node("ConvTranspose", ["x", "W", "B"], ["y"], name="up", **attrs)
    graph = helper.make_graph(
        [node],
        "ct",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, h, h))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_importer_output(tmp_path: Path) -> None:
    """Kind, attributes (ONNX defaults filled), weights as ONNX stores them, output shape."""
    w = np.ones((3, 5, 3, 3), np.float32)
    path = _model(tmp_path / "m.onnx", 3, 4, w, (1, 5, 9, 9), strides=[2, 2], pads=[1, 1, 0, 0],
                  output_padding=[1, 1])  # fmt: skip
    graph = load_graph(path)
    (op,) = graph.ops
    assert op.kind == "conv_transpose"
    assert op.attrs == {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 0, 0),
                        "dilations": (1, 1), "output_padding": (1, 1), "groups": 1,
                        "act": None}  # fmt: skip
    assert op.weights["W"].shape == (3, 5, 3, 3) and op.weights["B"].shape == (5,)
    # 2 * (4 - 1) + 1 + (3 - 1) + 1 - 1 - 0 = 9 (pads: top 1, bottom 0)
    assert graph.tensors["y"].shape == (1, 5, 9, 9)


@pytest.mark.parametrize(
    ("attrs", "reason"),
    [
        ({"group": 3}, "group=3 (group 1 only)"),
        ({"auto_pad": "SAME_UPPER"}, "auto_pad=SAME_UPPER (explicit pads only)"),
        ({"output_shape": [8, 8]}, "output_shape (give pads and output_padding instead)"),
    ],
)
def test_importer_refuses_with_the_reason(tmp_path: Path, attrs: dict, reason: str) -> None:
    """An unsupported variant is one line of the importer's UnsupportedOpError."""
    groups = int(attrs.get("group", 1))
    w = np.ones((3, 3 // groups, 2, 2), np.float32)
    path = _model(tmp_path / "m.onnx", 3, 4, w, (1, 3 // groups * groups, 8, 8), strides=[2, 2],
                  **attrs)  # fmt: skip
    with pytest.raises(UnsupportedOpError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        load_graph(path)


def _op(**attrs: object) -> tuple[Op, dict[str, TensorSpec]]:
    """conv_transpose of a 1 x 4 x 5 x 5 input, W (4, 6, 3, 3), bias."""
    full = {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "dilations": (1, 1),
            "output_padding": (1, 1), "groups": 1, "act": None, **attrs}  # fmt: skip
    w = {"W": np.zeros((4, 6, 3, 3), np.float32), "B": np.zeros(6, np.float32)}
    op = Op("up", "conv_transpose", ("x",), ("y",), full, w)
    out = KINDS["conv_transpose"].infer_shape(op, [(1, 4, 5, 5)], "NCHW")
    return op, {"x": TensorSpec("x", (1, 4, 5, 5)), "y": TensorSpec("y", out)}


def test_shape_and_macs_by_hand() -> None:
    """OH = 2 (5 - 1) + 1 + (3 - 1) + 1 - 2 = 10; MACs = 5*5 * 4*6*3*3 + 6*10*10 (bias)."""
    kind = KINDS["conv_transpose"]
    op, tensors = _op()
    assert tensors["y"].shape == (1, 6, 10, 10)
    assert kind.macs(op, [tensors["x"]], tensors["y"]) == 25 * 216 + 600 == 6000
    _, t2 = _op(dilations=(2, 2), output_padding=(0, 0))
    assert t2["y"].shape == (1, 6, 11, 11)  # 8 + 0 + 4 + 1 - 2
    assert check(op, tensors) is None
    assert check(_op(groups=2)[0], tensors) == "conv_transpose with groups 2 (groups 1 only)"


CASES = [  # C, H, O, k, stride, pads, output_padding, dilation
    (3, 5, 4, 3, 2, (1, 1, 1, 1), (1, 1), 1),  # the usual x2 decoder step
    (2, 4, 3, 4, 2, (1, 1, 1, 1), (0, 0), 1),  # DCGAN's k4 s2 p1
    (4, 6, 2, 3, 1, (0, 0, 0, 0), (0, 0), 1),  # stride 1, no padding: a full convolution
    (2, 3, 3, 3, 3, (2, 0, 1, 1), (2, 1), 2),  # uneven pads and output padding, dilation 2
    (1, 4, 5, 2, 2, (0, 0, 0, 0), (0, 0), 1),  # k = s: each input pixel a 2x2 block
]


@pytest.mark.parametrize("case", CASES, ids=[str(c[:5]) for c in CASES])
def test_generated_c_matches_onnxruntime(case: tuple, tmp_path: Path) -> None:
    """A one-op model: the host build of the generated C (``k_conv_transpose``) against
    onnxruntime, within float rounding (the sums run in another order)."""
    c, h, o, k, s, pads, opad, d = case
    w = np.random.default_rng(9).standard_normal((c, o, k, k)).astype(np.float32)
    oh = s * (h - 1) + opad[0] + (k - 1) * d + 1 - pads[0] - pads[2]
    ow = s * (h - 1) + opad[1] + (k - 1) * d + 1 - pads[1] - pads[3]
    path = _model(tmp_path / "ct.onnx", c, h, w, (1, o, oh, ow), strides=[s, s], pads=list(pads),
                  output_padding=list(opad), dilations=[d, d])  # fmt: skip
    chain = load_chain(path)
    gen = generate_device_c(chain, [(0, 0, len(chain) - 1)], "solo", planner=planner())
    assert "k_conv_transpose(&p, " in gen.files["model.c"]
    exe = build_host(gen, tmp_path / "solo")
    x = np.random.default_rng(5).standard_normal((1, c, h, h)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    assert ref.shape == (1, o, oh, ow)
    got = run_host(exe, 0, x, tmp_path / "solo")
    np.testing.assert_allclose(got, ref.ravel(), rtol=1e-5, atol=1e-5)


def decoder() -> Net:
    """conv 3 -> 8 stride 2, ConvTranspose 8 -> 4 x2 with a fused relu, conv 4 -> 2."""
    net = Net("decoder", (1, 3, 8, 8), seed=4)
    y = net.node("Conv", ["x", net.const(net.rand(8, 3, 3, 3))], pads=[1, 1, 1, 1], strides=[2, 2])
    w, b = net.const(net.rand(8, 4, 3, 3)), net.const(net.rand(4))
    y = net.node("ConvTranspose", [y, w, b], strides=[2, 2], pads=[1, 1, 1, 1],
                 output_padding=[1, 1])  # fmt: skip
    y = net.node("Relu", [y])
    net.last = net.node("Conv", [y, net.const(net.rand(2, 4, 1, 1))])
    return net


def test_decoder_split_over_two_devices_matches_onnxruntime(tmp_path: Path) -> None:
    """The relu fuses into the transposed conv; three sub-models on two devices against
    onnxruntime (``check_model``)."""
    net = decoder()
    onnx.save(net.onnx_model(), str(tmp_path / "d.onnx"))
    chain = load_chain(tmp_path / "d.onnx")
    (up,) = [op for layer in chain.layers for op in layer.ops if op.kind == "conv_transpose"]
    assert up.attr("act") == "relu"
    check_model(net, tmp_path, "importer")


def test_the_class_declares_cost_features_and_grid() -> None:
    """The kernel cost table's features and grid come from the class: the loop counts of
    ``k_conv_transpose`` by hand for a k2 s2 layer (every output pixel takes exactly one tap)."""
    from splitter.cost.kernels import feature_names, op_features, op_variant
    from splitter.measure.kernel_grid import declared_chains

    op, tensors = _op(kernel=(2, 2), pads=(0, 0, 0, 0), output_padding=(0, 0))
    op.weights["W"] = np.zeros((4, 6, 2, 2), np.float32)
    tensors["y"] = TensorSpec("y", KINDS["conv_transpose"].infer_shape(op, [(1, 4, 5, 5)], "NCHW"))
    assert tensors["y"].shape == (1, 6, 10, 10)
    variant = op_variant(op, tensors, "NCHW")
    assert variant == "conv_transpose/NCHW/float32"
    assert feature_names(variant) == ("call", "out", "edge", "pix", "inner", "mac")
    assert op_features(op, tensors, "NCHW") == {
        "call": 1, "out": 600, "edge": 600 * 2, "pix": 6 * 10 * 10 * 2, "inner": 600,
        "mac": 600 * 4}  # fmt: skip
    grid = [c for c in declared_chains() if c.graph.ops[0].kind == "conv_transpose"]
    assert len(grid) == 4


@pytest.mark.slow
@pytest.mark.toolchain
def test_decoder_compiles_and_builds_firmware_on_three_cores(tmp_path: Path) -> None:
    """``compile`` the decoder over a Cortex-M0+, M4F and M7 board (``m0_m4_m7.toml``) and build
    every device's image with arm-none-eabi-gcc (the M0+ links the kernel's divisions from
    libgcc); the transposed conv is called from the generated firmware."""
    from splitter.compile import CompileOptions, compile_model
    from splitter.toolchain.build import build_all

    net = decoder()
    onnx.save(net.onnx_model(), str(tmp_path / "d.onnx"))
    boards = Path(__file__).resolve().parent.parent / "models" / "boards" / "m0_m4_m7.toml"
    out = tmp_path / "out"
    result = compile_model(tmp_path / "d.onnx", boards, out, CompileOptions(samples=1))
    assert result.validation is not None and result.validation.passed
    assert result.firmware.startswith("generated"), result.firmware
    sources = [p.read_text() for p in (out / "firmware").rglob("*.c")]
    assert sum(text.count("k_conv_transpose(&p, A + ") for text in sources) == 1
    builds = build_all(out, emulator=False)
    assert {b.device for b in builds} == {sm.device for sm in result.manifest.submodels}
    assert all(b.elf.is_file() for b in builds)
