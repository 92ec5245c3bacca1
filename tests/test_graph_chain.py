"""build_chain: input layer, reshape and pool merging, costs, and the real models in models/."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from splitter.cost.handlers import op_flash
from splitter.graph.builder import GraphBuilder, check_shapes
from splitter.graph.chain import build_chain
from splitter.importers import load_chain, load_graph
from splitter.ir import Graph

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
THESIS = Path(__file__).resolve().parents[1] / "models" / "profiles" / "thesis_profiles.json"


def _models_build() -> ModuleType:
    """models/build.py (models/ is not a package), imported once."""
    if "models_build" in sys.modules:
        return sys.modules["models_build"]
    spec = importlib.util.spec_from_file_location("models_build", MODELS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_build"] = module
    spec.loader.exec_module(module)
    return module


def tiny_cnn() -> Graph:
    """The thesis's Tiny-CNN: 3 x (conv3x3 + ReLU + maxpool2) of 16/32/48, flatten, dense 10."""
    b = GraphBuilder((1, 1, 28, 28))
    x = b.input
    for i, ch in enumerate((16, 32, 48)):
        x = b.conv(x, ch, 3, act="relu", name=f"conv{i + 1}", seed=i)
        x = b.op("maxpool", x, kernel=(2, 2), strides=(2, 2), name=f"pool{i + 1}")
    x = b.op("reshape", x, shape=(1, -1), name="flatten")
    x = b.dense(x, 10)
    return b.build(b.op("softmax", x, axis=-1, name="softmax"))


def test_input_layer_is_explicit_and_free() -> None:
    chain = build_chain(tiny_cnn())
    layer0 = chain.layers[0]
    assert (layer0.kind, layer0.name, layer0.ops) == ("input", "input", ())
    assert layer0.input is not None and layer0.input.shape == layer0.output.shape == (1, 1, 28, 28)
    assert (layer0.cost.flash, layer0.cost.macs) == (0, 0)
    assert layer0.cost.ram == layer0.cost.out_bytes == 28 * 28 * 4


def test_tiny_cnn_matches_the_thesis_table() -> None:
    chain = build_chain(tiny_cnn())
    assert [layer.kind for layer in chain.layers] == [
        "input",
        "conv2d",
        "conv2d",
        "conv2d",
        "dense",
    ]
    thesis = json.loads(THESIS.read_text())["models"]["tiny_cnn"]
    for layer, row in zip(chain.layers[1:4], thesis[1:4], strict=True):
        assert layer.cost.macs == round(row["kmac"] * 1000)  # conv + bias + Cout + fused pool
        assert abs(layer.cost.flash - row["flash_kb"] * 1024) < 1  # table rounds to 3 decimals
    # Thesis Dense row = dense 490 + softmax 150: the softmax is fused into the dense layer.
    assert chain.layers[4].cost.macs == 640
    assert [op.kind for op in chain.layers[4].ops] == ["dense", "softmax"]
    assert chain.layers[1].cost.macs_by_class == (("conv", 108176), ("other", 10816))


def test_pool_and_reshape_join_the_preceding_layer() -> None:
    chain = build_chain(tiny_cnn())
    conv3 = chain.layers[3]
    assert [op.name for op in conv3.ops] == ["conv3", "pool3", "flatten"]
    assert conv3.op_label == "conv2d"
    assert conv3.output.shape == (1, 48)
    assert conv3.cost.out_bytes == 48 * 4
    assert chain.layers[4].input is not None and chain.layers[4].input.name == conv3.output.name


def test_pool_after_a_plain_activation_stays_a_layer() -> None:
    b = GraphBuilder((1, 4, 8, 8))
    x = b.op("relu", b.input)
    b.op("maxpool", x, kernel=(2, 2), strides=(2, 2))
    chain = build_chain(b.build(b.ops[-1].outputs[0]))
    assert [layer.kind for layer in chain.layers] == ["input", "relu", "maxpool"]


def test_second_pool_is_not_fused_again() -> None:
    b = GraphBuilder((1, 4, 8, 8))
    x = b.conv(b.input, 4, 1)
    x = b.op("maxpool", x, kernel=(2, 2), strides=(2, 2))
    x = b.op("avgpool", x, kernel=(2, 2), strides=(2, 2))
    chain = build_chain(b.build(x))
    assert [layer.op_label for layer in chain.layers] == ["input", "conv2d", "avgpool"]
    assert len(chain.layers[1].ops) == 2


def test_reshape_right_after_the_input_joins_the_input_layer() -> None:
    b = GraphBuilder((1, 1, 4, 4))
    x = b.op("reshape", b.input, shape=(1, 16))
    chain = build_chain(b.build(b.dense(x, 3)))
    assert [layer.kind for layer in chain.layers] == ["input", "dense"]
    assert chain.layers[0].output.shape == (1, 16)
    assert chain.layers[0].cost.ram == 64


def test_activation_bytes_override_changes_ram_and_out_only() -> None:
    f32 = build_chain(tiny_cnn())
    i8 = build_chain(tiny_cnn(), activation_bytes=1)
    for a, b in zip(f32.layers, i8.layers, strict=True):
        assert (a.cost.flash, a.cost.macs) == (b.cost.flash, b.cost.macs)
        assert a.cost.out_bytes == 4 * b.cost.out_bytes
        assert a.cost.ram == 4 * b.cost.ram


def test_mobilenet_v2_224_peak_is_the_pex_1505_kb_layer() -> None:
    path = _models_build().ensure_model("mobilenet_v2_224")
    chain = load_chain(path, activation_bytes=1)
    peak = max(chain.layers, key=lambda layer: layer.cost.ram)
    assert peak.cost.ram == 1_505_280  # PEX paper: 112x112x96 in + 56x56x96 out at 8 bits
    assert peak.kind == "conv2d" and peak.input is not None
    assert peak.input.shape == (1, 96, 112, 112) and peak.output.shape == (1, 96, 56, 56)
    supers = [layer for layer in chain.layers if layer.kind == "super"]
    assert len(supers) == 10  # inverted residual blocks with a skip connection
    assert all(layer.op_label == "super(4 ops)" for layer in supers)


def test_resnet8_residual_blocks_are_super_nodes() -> None:
    chain = load_chain(MODELS / "resnet8.onnx")
    assert [layer.op_label for layer in chain.layers].count("super(4 ops)") == 2
    stage1 = [layer for layer in chain.layers if layer.kind == "super"]
    assert stage1 and all(layer.cost.ram > 0 for layer in stage1)


MODEL_FILES = sorted(p.name for p in MODELS.glob("*.onnx")) + sorted(
    p.name for p in MODELS.glob("*.tflite")
)


@pytest.mark.parametrize("name", MODEL_FILES)
def test_handlers_agree_with_the_importers_shapes(name: str) -> None:
    graph = load_graph(MODELS / name)
    assert check_shapes(graph) == []
    chain = build_chain(graph)
    assert sum(len(layer.ops) for layer in chain.layers) == len(graph.ops)
    flash = sum(layer.cost.flash for layer in chain.layers)
    assert flash == sum(op_flash(op) for op in graph.ops)
    nbytes = sum(int(w.nbytes) for op in graph.ops for w in op.weights.values())
    quantised = any(op.attr("w_scale") for op in graph.ops)
    assert flash > nbytes if quantised else flash == nbytes  # float: arena rule, exact nbytes
