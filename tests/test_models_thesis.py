"""The thesis's eight models rebuilt in models/*.onnx, imported as chains, against Tables 7-14.

For every model the chain (``splitter.importers.load_chain``) is walked next to the thesis table
(``models/profiles/thesis_profiles.json``, X-CUBE-AI 7.1 "optimized model" rows), row by row:

* ``Conv2D``, ``Conv2D_dw``, ``Conv2D_pw``, ``Conv2D_preds``, ``Dense``: one chain layer whose
  FLASH (weights + bias, float32) equals the row's FLASH (exact parameter counts, compared at
  the table's printed precision);
* ``SepConv2D``: two chain layers, a depthwise conv and a pointwise 1x1 conv, whose FLASH sum
  equals the row's (X-CUBE-AI prints a Keras SeparableConv2D as one row);
* ``BatchNorm``: no chain layer; the importer folds it into the conv before it (that conv has a
  bias, so folding adds no constants and the row's 2*C scale/offset floats disappear);
* ``AVGPool2D``: no chain layer; the pooling is fused into the conv layer before it;
* ``Predictions`` (MobileNet's softmax): one chain layer of kind ``softmax``, no FLASH;
* a ``Dense`` row whose MACs include a softmax (X-CUBE-AI merged the model's final softmax into
  the Dense row: its kMACC is ``in*out + out + 15*out``, 15 being the per-element softmax cost of
  the ``Predictions`` rows): one dense layer whose ops end with the softmax, as splitter's chain
  builder fuses a softmax into a directly preceding dense layer the same way.

So ``expected_depth = table_depth - #BatchNorm + #SepConv2D - #AVGPool2D``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from math import prod
from pathlib import Path
from typing import Any

import pytest

from splitter.importers import load_chain
from splitter.ir import Chain, Layer, Op

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "models" / "profiles" / "thesis_profiles.json"
TABLES: dict[str, list[dict[str, Any]]] = json.loads(PROFILES.read_text())["models"]
THESIS_MODELS = sorted(TABLES)

WEIGHTED_ROWS = ("Conv2D", "Conv2D_dw", "Conv2D_pw", "Conv2D_preds", "Dense")
ABSORBED_ROWS = ("BatchNorm", "AVGPool2D")
#: X-CUBE-AI's MACC per element of a softmax (every ``Predictions`` row: 15.0 kMACC for 1000).
SOFTMAX_MACC = 15


def kib_matches(nbytes: int, table_kib: float) -> bool:
    """``nbytes / 1024`` within half a unit of the table's last printed decimal (3, or 2 for
    the few values the text copy rounded to 2 decimals, e.g. ``1003.91`` for 1003.906)."""
    text = repr(float(table_kib))
    decimals = len(text.split(".")[1]) if "." in text else 0
    half_unit = 0.005 if decimals == 2 else 0.0005
    return abs(nbytes / 1024 - table_kib) <= half_unit + 1e-9


def has_merged_softmax(row: dict[str, Any]) -> bool:
    """A Dense row whose MACs are ``in*out`` products + ``out`` biases + a softmax."""
    n_in, n_out = prod(row["input"]), prod(row["output"])
    macs = round(row["kmac"] * 1000)
    return row["name"] == "Dense" and macs == n_in * n_out + n_out + SOFTMAX_MACC * n_out


def expected_depth(rows: Sequence[dict[str, Any]]) -> int:
    """Table depth - BatchNorm rows (folded) + SepConv2D rows (dw + pw layers) - AVGPool2D rows
    (fused into the conv); a softmax merged into a Dense row is fused into the dense layer too."""
    count = {kind: sum(r["name"] == kind for r in rows) for kind in ("SepConv2D", *ABSORBED_ROWS)}
    return len(rows) - count["BatchNorm"] + count["SepConv2D"] - count["AVGPool2D"]


def hwc(shape: Sequence[int]) -> tuple[int, ...]:
    """An ONNX NCHW shape as the table's HWC; (1, N) as (1, 1, N)."""
    if len(shape) == 4:
        return (shape[2], shape[3], shape[1])
    return (1, 1, prod(shape[1:]))


def main_op(layer: Layer) -> Op:
    """The layer's conv2d / dense op (the one carrying the weights)."""
    ops = [op for op in layer.ops if op.kind in ("conv2d", "dense")]
    assert len(ops) == 1, f"{layer.name}: expected one conv/dense op, got {layer.ops}"
    return ops[0]


def is_depthwise(op: Op, layer: Layer) -> bool:
    assert layer.input is not None
    channels = layer.input.shape[1]
    return op.kind == "conv2d" and channels > 1 and op.attr("groups", 1) == channels


def is_pointwise(op: Op) -> bool:
    return op.kind == "conv2d" and tuple(op.attr("kernel")) == (1, 1) and op.attr("groups") == 1


@pytest.fixture(scope="module", params=THESIS_MODELS)
def model(request: pytest.FixtureRequest) -> tuple[str, Chain, list[dict[str, Any]]]:
    name: str = request.param
    return name, load_chain(ROOT / "models" / f"{name}.onnx"), TABLES[name]


def test_chain_depth_is_explained(model: tuple[str, Chain, list[dict[str, Any]]]) -> None:
    name, chain, rows = model
    assert len(chain) == expected_depth(rows), (
        f"{name}: chain depth {len(chain)}, table depth {len(rows)}: "
        f"{[(layer.name, layer.op_label) for layer in chain.layers]}"
    )


def test_softmax_macc_constant_from_the_tables() -> None:
    """Every Predictions row costs 15 MACC per element, and the Dense rows detected as carrying
    a merged softmax are exactly the last Dense of the four classifiers that end in one."""
    for rows in TABLES.values():
        for row in rows:
            if row["name"] == "Predictions":
                assert round(row["kmac"] * 1000) == SOFTMAX_MACC * prod(row["output"])
    merged = {name for name, rows in TABLES.items() if any(map(has_merged_softmax, rows))}
    assert merged == {"kws_ds_cnn", "kws_cnn", "tiny_cnn", "voxceleb"}
    assert all(has_merged_softmax(rows[-1]) for name, rows in TABLES.items() if name in merged)


def test_input_and_output_shapes(model: tuple[str, Chain, list[dict[str, Any]]]) -> None:
    _, chain, rows = model
    assert chain.layers[0].kind == "input"
    assert hwc(chain.layers[0].output.shape) == tuple(rows[0]["output"])
    assert prod(chain.layers[-1].output.shape) == prod(rows[-1]["output"])


def test_flash_of_every_conv_and_dense_layer(
    model: tuple[str, Chain, list[dict[str, Any]]],
) -> None:
    """Walk table rows and chain layers together (see the module docstring)."""
    name, chain, rows = model
    layers = list(chain.layers[1:])
    pos = 0
    for i, row in enumerate(rows[1:], start=1):
        where = f"{name} row {row['name']} {tuple(row['input'])}->{tuple(row['output'])}"
        if row["name"] in ABSORBED_ROWS:
            _check_absorbed(row, layers[pos - 1], where)
            continue
        if row["name"] == "Predictions":
            _check_softmax(layers[pos], where)
            assert hwc(layers[pos].output.shape) == tuple(row["output"]), where
            pos += 1
            continue
        if row["name"] == "SepConv2D":
            dw, pw = layers[pos], layers[pos + 1]
            assert is_depthwise(main_op(dw), dw), f"{where}: {dw.name} is not depthwise"
            assert is_pointwise(main_op(pw)), f"{where}: {pw.name} is not pointwise"
            flash, last = dw.cost.flash + pw.cost.flash, pw
            pos += 2
        else:
            assert row["name"] in WEIGHTED_ROWS, where
            last = layers[pos]
            op = main_op(last)
            if row["name"] == "Conv2D_dw":
                assert is_depthwise(op, last), f"{where}: {last.name} is not depthwise"
            if row["name"] in ("Conv2D_pw", "Conv2D_preds"):
                assert is_pointwise(op), f"{where}: {last.name} is not pointwise"
            assert op.kind == ("dense" if row["name"] == "Dense" else "conv2d"), where
            flash = last.cost.flash
            pos += 1
        assert kib_matches(flash, row["flash_kb"]), f"{where}: {flash} B vs {row['flash_kb']} KiB"
        _check_output(last, rows[i:], where)
        if has_merged_softmax(row):
            assert last.ops[-1].kind == "softmax", f"{where}: softmax not fused into {last.name}"
            assert last.cost.macs == round(row["kmac"] * 1000), f"{where}: MACs differ"
    assert pos == len(layers), f"{name}: {len(layers) - pos} chain layers left unmatched"


def _check_absorbed(row: dict[str, Any], layer: Layer, where: str) -> None:
    """A BatchNorm / pool row left no layer: its op sits folded or fused in ``layer``."""
    kinds = {op.kind for op in layer.ops}
    assert "batchnorm" not in kinds, f"{where}: BatchNorm not folded into {layer.name}"
    if row["name"] == "AVGPool2D":
        assert kinds & {"avgpool", "global_avgpool", "mean"}, f"{where}: pool not in {layer.name}"


def _check_softmax(layer: Layer, where: str) -> None:
    """The softmax layer: kind ``softmax``, no constants."""
    assert layer.kind == "softmax", f"{where}: expected a softmax layer, got {layer.name}"
    assert layer.cost.flash == 0, f"{where}: softmax {layer.name} has FLASH"


def _check_output(layer: Layer, rows: list[dict[str, Any]], where: str) -> None:
    """The layer's output is the output of the last table row it absorbs (``rows[0]`` itself or
    the BatchNorm / pool / softmax rows right after it): same HWC shape, or for a flattened
    vector the same element count."""
    last_row = rows[0]
    for nxt in rows[1:]:
        if nxt["name"] not in ABSORBED_ROWS:
            break
        last_row = nxt
    want = tuple(last_row["output"])
    got = layer.output.shape
    assert prod(got) == prod(want), f"{where}: {layer.name} outputs {got}, table {want}"
    if want[0] * want[1] > 1:
        assert hwc(got) == want, f"{where}: {layer.name} outputs {got}, table {want}"


def test_total_flash_is_table_3_minus_folded_batchnorm(
    model: tuple[str, Chain, list[dict[str, Any]]],
) -> None:
    """Sum of chain FLASH = sum of the table's rows without the BatchNorm rows (Table 3's
    'Tot FLASH' for the six models without BN rows), within the rows' printing precision."""
    name, chain, rows = model
    want = sum(r["flash_kb"] for r in rows if r["name"] != "BatchNorm")
    got = sum(layer.cost.flash for layer in chain.layers) / 1024
    assert abs(got - want) <= 0.005 * len(rows), f"{name}: {got:.3f} KiB vs {want:.3f} KiB"
