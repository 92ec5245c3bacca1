"""``splitter inspect`` on every thesis profile and every file in models/, in all three formats."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from splitter.cli import main
from splitter.cost.layer_table import COLUMNS, chain_report, partial_report
from splitter.importers import load_chain

ROOT = Path(__file__).resolve().parent.parent
THESIS = Path(__file__).resolve().parents[1] / "models" / "profiles" / "thesis_profiles.json"
PROFILES = sorted(json.loads(THESIS.read_text())["models"])
MODEL_FILES = sorted(
    p.name for p in (ROOT / "models").iterdir() if p.suffix in (".onnx", ".tflite")
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the CLI in-process; returns stdout, asserts exit code 0."""
    with pytest.raises(SystemExit) as info:
        main(["inspect", *args])
    out, err = capsys.readouterr()
    assert info.value.code == 0, err
    return out


def check_totals(report: dict) -> None:
    """Totals are the table's sums (FLASH, MACs), maximum (RAM) and row count. A model with
    several inputs is chained at op granularity: the report says so and lists each cut's
    tensors (``crossing``)."""
    layers = report["layers"]
    op = report.get("granularity") == "op"
    assert set(report) == {"layers", "totals", "partial_execution"} | (
        {"granularity"} if op else set()
    )
    pex = report["partial_execution"]  # None for a profile: no graph to schedule
    assert pex is None or pex["peak_bytes"] <= pex["ordinary_peak_bytes"]
    if pex is not None:
        assert pex["ordinary_peak_bytes"] <= report["totals"]["max_ram_bytes"]
    assert all(tuple(layer) == COLUMNS + (("crossing",) if op else ()) for layer in layers)
    assert [layer["index"] for layer in layers] == list(range(len(layers)))
    assert report["totals"] == {
        "flash_bytes": sum(layer["flash_bytes"] for layer in layers),
        "max_ram_bytes": max(layer["ram_bytes"] for layer in layers),
        "macs": sum(layer["macs"] for layer in layers),
        "layers": len(layers),
    }


@pytest.mark.parametrize("name", PROFILES)
def test_inspect_thesis_profile_json_totals(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(run(capsys, f"{THESIS}#{name}", "--format", "json"))
    check_totals(report)
    rows = json.loads(THESIS.read_text())["models"][name]
    assert report["totals"]["layers"] == len(rows)
    assert report["totals"]["macs"] == sum(round(r["kmac"] * 1000) for r in rows)
    assert report["layers"][0]["op"] == "input"
    assert report["layers"][1]["input_shape"] == rows[1]["input"]


@pytest.mark.parametrize("name", MODEL_FILES)
def test_inspect_every_model_file(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "models" / name)
    report = json.loads(run(capsys, path, "--format", "json"))
    check_totals(report)
    assert report["layers"][0]["op"] == "input"
    assert report["totals"]["macs"] > 0 and report["totals"]["flash_bytes"] > 0
    rows = list(csv.DictReader(io.StringIO(run(capsys, path, "--format", "csv"))))
    assert len(rows) == report["totals"]["layers"]
    assert [int(r["ram_bytes"]) for r in rows] == [x["ram_bytes"] for x in report["layers"]]
    table = run(capsys, path)
    assert "total" in table and f"{report['totals']['macs']:,}" in table


def test_table_lists_every_layer_and_super_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    table = run(capsys, str(ROOT / "models" / "resnet8.onnx"))
    chain = load_chain(ROOT / "models" / "resnet8.onnx")
    assert "super(4 ops)" in table
    for layer in chain.layers:
        assert layer.name in table
    assert f"max {max(c.ram for c in chain.costs):,}" in table


def test_activation_bytes_flag(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "models" / "tiny_cnn.onnx")
    f32 = json.loads(run(capsys, path, "--format", "json"))
    i8 = json.loads(run(capsys, path, "--format", "json", "--activation-bytes", "1"))
    assert [x["out_bytes"] for x in f32["layers"]] == [4 * x["out_bytes"] for x in i8["layers"]]
    chain_i8 = load_chain(path, activation_bytes=1)
    assert i8 == {**chain_report(chain_i8), "partial_execution": partial_report(chain_i8, 1)}


def test_input_shape_option_reaches_the_importer(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "models" / "tiny_cnn.onnx")
    graph_input = load_chain(path).layers[0].name
    report = json.loads(
        run(capsys, path, "--format", "json", "--input-shape", f"{graph_input}=1x1x28x28")
    )
    assert report["layers"][0]["output_shape"] == [1, 1, 28, 28]


@pytest.mark.parametrize("value", ["x=1xAx3", "=1x2", "noequals", "x=1x0x3"])
def test_bad_input_shape_text_is_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["inspect", str(ROOT / "models" / "tiny_cnn.onnx"), "--input-shape", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "NAME=DIMS" in err and "Traceback" not in err


def test_bad_activation_bytes_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["inspect", f"{THESIS}#tiny_cnn", "--activation-bytes", "0"])
    assert info.value.code == 2


def test_multi_output_onnx_ends_in_one_sink_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("p", "q")]
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="trunk"),
        helper.make_node("Sigmoid", ["h"], ["p"], name="head_p"),
        helper.make_node("Tanh", ["h"], ["q"], name="head_q"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "two_heads", [x], outs),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    path = tmp_path / "two_heads.onnx"
    onnx.save(model, path)
    report = json.loads(run(capsys, str(path), "--format", "json"))
    check_totals(report)
    assert [layer["op"] for layer in report["layers"]] == ["input", "relu", "super(2 ops)"]
    assert report["layers"][-1]["out_bytes"] == 2 * 8 * 4  # both outputs leave the last layer
