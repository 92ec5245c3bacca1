"""The MAC convention reproduces the thesis's X-CUBE-AI tables on the rebuilt models/*.onnx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from splitter.importers import load_chain

ROOT = Path(__file__).resolve().parent.parent
THESIS = json.loads(
    (
        Path(__file__).resolve().parents[1] / "models" / "profiles" / "thesis_profiles.json"
    ).read_text()
)["models"]


def _thesis_macs(name: str) -> list[int]:
    return [round(row["kmac"] * 1000) for row in THESIS[name]]


@pytest.mark.parametrize(
    "name", ["mobilenet_v1_025", "mobilenet_v1_030", "mobilenet_v1_035", "yamnet_256"]
)
def test_every_layer_matches_the_thesis_table(name: str) -> None:
    chain = load_chain(ROOT / "models" / f"{name}.onnx")
    assert [layer.cost.macs for layer in chain.layers] == _thesis_macs(name)


def test_tiny_cnn_conv_blocks_and_head() -> None:
    macs = [layer.cost.macs for layer in load_chain(ROOT / "models" / "tiny_cnn.onnx").layers]
    thesis = _thesis_macs("tiny_cnn")
    # input + three conv+ReLU+maxpool blocks + dense with the softmax fused, as the table
    assert macs == thesis


def test_kws_cnn_with_batchnorm_folded() -> None:
    macs = [layer.cost.macs for layer in load_chain(ROOT / "models" / "kws_cnn.onnx").layers]
    thesis = _thesis_macs("kws_cnn")
    # thesis rows: Input, Conv2D, BatchNorm, Conv2D, BatchNorm, Dense, Dense, Dense(+softmax);
    # the ONNX importer folds each BatchNorm into its conv, so its 2 MAC/element rows vanish.
    assert [macs[0], macs[1], macs[2], macs[3], macs[4]] == [
        thesis[0],
        thesis[1],
        thesis[3],
        thesis[5],
        thesis[6],
    ]
    assert macs[5] == thesis[7]  # the last Dense row includes the fused softmax
    assert len(macs) == 6
