"""Unit tests of codegen/model_c.py: unsupported ops, byte counts, ping-pong offsets, packing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_codegen_support import Net, planner

from splitter.codegen.model_c import (
    device_arena_bytes,
    generate_device_c,
    kernel_sources,
    missing_ops,
)
from splitter.codegen.ops.conv import pack4
from splitter.codegen.ops.literals import c_float
from splitter.errors import SplitterError, UnsupportedOpError
from splitter.ir import Chain, Layer, Op, SubModel

MODELS = Path(__file__).resolve().parent.parent / "models"


def small_chain() -> Chain:
    """input -> conv -> conv -> global avgpool -> flatten -> dense (5 layers + input)."""
    n = Net("small", (1, 3, 8, 8))
    x = n.conv("x", 3, 8, 3, pad=1, act="relu")
    x = n.conv(x, 8, 6, 3, stride=2, pad=1)
    x = n.global_avgpool(x)
    x = n.reshape(x, (1, 6))
    n.dense(x, 6, 5)
    return n.chain(n.onnx_model())


def with_op(chain: Chain, j: int, op: Op) -> Chain:
    """``chain`` with layer j's ops replaced by ``op`` (same boundary tensors)."""
    old = chain.layers[j]
    layer = Layer(old.index, old.name, op.kind, (op,), old.input, old.output, old.cost)
    layers = (*chain.layers[:j], layer, *chain.layers[j + 1 :])
    return Chain(chain.name, layers, chain.graph)


def test_codegen_weights_bytes_are_the_emitted_arrays() -> None:
    chain = small_chain()
    gen = generate_device_c(chain, [(1, 3), (5, 5)], "d0", planner=planner())
    expected = sum(
        int(w.nbytes)
        for j in (1, 2, 3, 5)
        for op in chain.layers[j].ops
        for w in op.weights.values()
    )
    assert gen.weights_bytes == expected
    sizes = [
        int(n)
        for n in re.findall(r"static const float w_\w+\[(\d+)\] WEIGHTS", gen.files["model.c"])
    ]
    assert sum(sizes) * 4 == expected
    assert f"#define MODEL_WEIGHTS_BYTES {expected}u" in gen.files["model.h"]
    assert '__attribute__((section(".weights"), aligned(4)))' in gen.files["model.c"]


def test_codegen_arena_is_max_layer_ram() -> None:
    chain = small_chain()
    plan = planner()
    rams = [plan(ly.ops, chain.graph.tensors, ly.input.name, ly.output.name, lambda s: 4).size
            for ly in chain.layers[1:]]  # fmt: skip
    gen = generate_device_c(chain, [(0, 0, 2), (3, 4, 5)], "d0", planner=plan)
    assert gen.arena_bytes == max(rams[0], rams[1], rams[3], rams[4], chain.layers[0].output.nbytes)
    assert gen.arena_bytes == device_arena_bytes(chain, [(0, 2), (4, 5)], plan)
    assert f"float model_arena[{gen.arena_bytes // 4}]" in gen.files["model.c"]


def test_codegen_ping_pong_offsets() -> None:
    """Sub-model input at 0; output at A - out after an odd number of op layers, else at 0."""
    chain = small_chain()
    gen = generate_device_c(chain, [(0, 0, 1), (1, 1, 2), (2, 3, 5)], "d", planner=planner())
    a = gen.arena_bytes
    (i0, in0, inb0, out0, outb0), (_, in1, _, out1, _), (_, _, _, out2, outb2) = gen.submodels
    assert (i0, in0, inb0) == (0, 0, chain.layers[0].output.nbytes)
    assert out0 == a - outb0 == a - chain.layers[1].output.nbytes
    assert in1 == 0 and out1 == 0  # two op layers: bottom -> top -> bottom
    assert out2 == a - outb2  # layers 3..5: three op layers
    assert outb2 == chain.layers[5].output.nbytes


def test_codegen_submodel_numbering_from_submodels() -> None:
    chain = small_chain()
    gen = generate_device_c(
        chain, [SubModel(3, 0, 1, 2), SubModel(7, 0, 4, 5)], "d", planner=planner()
    )
    assert "int sm_03(float *arena)" in gen.files["model.c"]
    assert "int sm_07(float *arena)" in gen.files["model.c"]
    assert [row[0] for row in gen.submodels] == [3, 7]


def test_codegen_missing_ops_lists_every_problem() -> None:
    chain = small_chain()
    t = chain.layers[2]
    chain = with_op(chain, 2, Op("q", "quantize", (t.input.name,), (t.output.name,)))
    t4 = chain.layers[4]
    chain = with_op(chain, 4, Op("mystery", "mystery", (t4.input.name,), (t4.output.name,)))
    problems = missing_ops(chain, [(0, 5)])
    assert len(problems) == 2 and "q (quantize)" in problems[0]
    assert "mystery (mystery)" in problems[1]
    assert missing_ops(chain, [(0, 1)]) == []
    with pytest.raises(UnsupportedOpError) as err:
        generate_device_c(chain, [(0, 2), (3, 5)], "d", planner=planner())
    msg = str(err.value)
    assert "2 op(s)" in msg and "quantize" in msg and "mystery" in msg and "\n" not in msg


def test_codegen_unsupported_variants() -> None:
    chain = small_chain()
    t = chain.layers[3]
    bad = Op("m", "mean", (t.input.name,), (t.output.name,), {"axes": (1, 3), "keepdims": 1})
    chain = with_op(chain, 3, bad)
    (problem,) = missing_ops(chain, [(3, 3)])
    assert "non-contiguous axes" in problem


def test_codegen_int8_op_without_an_int8_kernel_is_rejected() -> None:
    """int8 TFLite models now run (tests/test_codegen_tflite.py); an int8 op kind the int8
    kernels lack (hardswish here) is still one UnsupportedOpError naming it."""
    from splitter.importers import load_chain

    chain = load_chain(MODELS / "tiny_cnn_int8.tflite")
    j = next(k for k, layer in enumerate(chain.layers) if layer.kind == "relu")
    t = chain.layers[j]
    chain = with_op(chain, j, Op("hs", "hardswish", (t.input.name,), (t.output.name,)))
    assert missing_ops(chain, [(j, j)]) == ["hs (hardswish): no int8 kernel for this op kind"]
    with pytest.raises(UnsupportedOpError) as err:
        generate_device_c(chain, [(0, len(chain) - 1)], "d", planner=planner())
    assert isinstance(err.value, SplitterError)
    assert "hardswish" in str(err.value)


def test_codegen_profile_chain_is_rejected() -> None:
    chain = small_chain()
    bare = Chain("profile", chain.layers, None)
    assert missing_ops(bare, [(0, 1)])
    with pytest.raises(UnsupportedOpError):
        generate_device_c(bare, [(0, 1)], "d", planner=planner())


def test_codegen_kernel_sources_ship_the_library() -> None:
    src = kernel_sources()
    assert {"kernels.h", "kernels.c", "k_libc.c"} <= set(src)
    assert "TensorFlow Lite Micro" in src["kernels.h"] and "NCHW" in src["kernels.h"]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 13), st.integers(1, 9))
def test_codegen_pack4_layout(o: int, k: int) -> None:
    """Block b of 4 rows stores w[4b + r, i] at (b*K + i)*4 + r; leftover rows row-major."""
    w = np.arange(o * k, dtype=np.float32).reshape(o, k)
    p = pack4(w)
    assert p.size == w.size
    for row in range(o):
        for i in range(k):
            b, r = divmod(row, 4)
            idx = (b * k + i) * 4 + r if row < (o // 4) * 4 else row * k + i
            assert p[idx] == w[row, i]


@pytest.mark.parametrize("v", [0.0, 1.0, -2.5, 1e-30, 3.4e38, 0.1, float("inf"), -float("inf")])
def test_codegen_c_float_round_trips(v: float) -> None:
    text = c_float(v)
    assert (
        text.endswith("f")
        and text[:-1].replace("e", "").replace(".", "").replace("-", "").replace("+", "").isdigit()
    )
    if np.isfinite(v):
        assert np.float32(float(text[:-1])) == np.float32(v)


def test_codegen_model_c_cross_compiles_warning_free(tmp_path: Path) -> None:
    """Generated C of a real model builds for the Cortex-M4F with -Wall -Wextra -Werror."""
    import shutil
    import subprocess

    from splitter.codegen.model_c import KERNELS_DIR
    from splitter.importers import load_chain

    gcc = shutil.which("arm-none-eabi-gcc")
    assert gcc, (
        "apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi"
    )
    chain = load_chain(MODELS / "resnet8.onnx")
    gen = generate_device_c(chain, [(0, 0, 2), (2, 4, len(chain) - 1)], "m4")
    for name, text in gen.files.items():
        (tmp_path / name).write_text(text)
    flags = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-std=c99",
             "-O2", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS_DIR}", "-c"]  # fmt: skip
    cmd = [gcc, *flags, str(tmp_path / "model.c"), "-o", str(tmp_path / "model.o")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    from elftools.elf.elffile import ELFFile

    with open(tmp_path / "model.o", "rb") as fh:
        sections = {s.name: s.data_size for s in ELFFile(fh).iter_sections()}
    assert sections[".weights"] == gen.weights_bytes
    assert sections[".bss"] >= gen.arena_bytes


def test_codegen_rejects_chain_costed_with_other_activation_bytes() -> None:
    """--activation-bytes 1 makes RAM_j disagree with the float32 arena: fail at compile time."""
    from splitter.importers import load_chain

    chain = load_chain(MODELS / "tiny_cnn.onnx", activation_bytes=1)
    with pytest.raises(UnsupportedOpError, match="activation-bytes"):
        generate_device_c(chain, [(0, len(chain) - 1)], "d")
    ok = load_chain(MODELS / "tiny_cnn.onnx")
    assert generate_device_c(ok, [(0, len(ok) - 1)], "d").weights_bytes > 0


def test_codegen_nan_constant_is_an_error() -> None:
    with pytest.raises(UnsupportedOpError, match="NaN"):
        c_float(float("nan"))
