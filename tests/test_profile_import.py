"""Layer-profile importer: CSV and JSON parsing, units, and every bad-input case via the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from splitter.cli import main
from splitter.importers import load_chain
from splitter.importers.profile import HEADER, load_profile

THESIS = Path(__file__).resolve().parents[1] / "models" / "profiles" / "thesis_profiles.json"
GOOD_CSV = (
    "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"
    'Input,"(49, 10, 1)","(49, 10, 1)",0,1.914,0\n'
    "Conv2D,49x10x1,25x5x64,10.25,56.25,328.064\n"
    'Dense,"(1, 1, 64)",1x1x12,3.047,31.5,0.96\n'
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_units_shapes_and_kinds(tmp_path: Path) -> None:
    chain = load_profile(str(_write(tmp_path, "kws.csv", GOOD_CSV)), activation_bytes=None)
    assert chain.name == "kws" and chain.graph is None
    assert [layer.kind for layer in chain.layers] == ["input", "profile", "profile"]
    conv = chain.layers[1]
    assert conv.input is not None and conv.input.shape == (49, 10, 1)
    assert conv.output.shape == (25, 5, 64)
    assert conv.cost.flash == 10496 and conv.cost.ram == 57600 and conv.cost.macs == 328064
    assert conv.cost.out_bytes == 4 * 25 * 5 * 64
    assert chain.layers[0].cost.ram == round(1.914 * 1024) == 1960
    assert chain.layers[2].cost.flash == round(3.047 * 1024) == 3120
    assert all(layer.ops == () for layer in chain.layers)


def test_activation_bytes_override_out_bytes(tmp_path: Path) -> None:
    chain = load_chain(_write(tmp_path, "kws.csv", GOOD_CSV), activation_bytes=1)
    assert [layer.cost.out_bytes for layer in chain.layers] == [490, 8000, 12]


def test_first_row_not_named_input_is_a_profile_layer(tmp_path: Path) -> None:
    text = GOOD_CSV.replace("Input,", "Stem,", 1)
    chain = load_profile(str(_write(tmp_path, "p.csv", text)), activation_bytes=None)
    assert chain.layers[0].kind == "profile"


def test_json_list_with_csv_keys(tmp_path: Path) -> None:
    rows = [
        {
            "name": "Input",
            "input_shape": [8, 8, 3],
            "output_shape": "8x8x3",
            "flash_kb": 0,
            "ram_kb": 0.75,
            "kmacc": 0,
        },
        {
            "name": "Conv",
            "input_shape": "(8, 8, 3)",
            "output_shape": [8, 8, 4],
            "flash_kb": 0.5,
            "ram_kb": 1.75,
            "kmacc": 7.2,
        },
    ]
    chain = load_chain(_write(tmp_path, "p.json", json.dumps(rows)), activation_bytes=None)
    assert [(c.flash, c.ram, c.macs, c.out_bytes) for c in chain.costs] == [
        (0, 768, 0, 768),
        (512, 1792, 7200, 1024),
    ]


@pytest.mark.parametrize("name", sorted(json.loads(THESIS.read_text())["models"]))
def test_every_thesis_profile_loads_with_exact_units(name: str) -> None:
    rows = json.loads(THESIS.read_text())["models"][name]
    chain = load_chain(f"{THESIS}#{name}")
    assert chain.name == name and len(chain) == len(rows)
    assert chain.layers[0].kind == "input"
    for layer, row in zip(chain.layers, rows, strict=True):
        assert layer.cost.flash == round(row["flash_kb"] * 1024)
        assert layer.cost.ram == round(row["ram_kb"] * 1024)
        assert layer.cost.macs == round(row["kmac"] * 1000)
        assert list(layer.output.shape) == row["output"]


def _cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(["inspect", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


BAD_CSV = {
    "missing_column": (
        "name,input_shape,output_shape,flash_kb,ram_kb\nInput,1x1,1x1,0,0\n",
        r"line 1: bad header \(missing column\(s\) kmacc\)",
    ),
    "unknown_column": (
        ",".join(HEADER) + ",extra\n",
        r"unknown column\(s\) extra",
    ),
    "bad_shape_text": (
        ",".join(HEADER) + "\nInput,49 by 10,49x10x1,0,1,0\n",
        r"row 1 \(line 2\), column 'input_shape': bad shape '49 by 10'",
    ),
    "zero_dimension": (
        ",".join(HEADER) + "\nInput,49x0x1,49x10x1,0,1,0\n",
        r"column 'input_shape': bad shape '49x0x1'",
    ),
    "negative_size": (
        ",".join(HEADER) + "\nInput,1x1,1x1,0,1,0\nConv,1x1,1x1,-2.5,1,3\n",
        r"row 2 \(line 3\), column 'flash_kb': negative size '-2.5'",
    ),
    "non_numeric": (
        ",".join(HEADER) + "\nInput,1x1,1x1,0,lots,0\n",
        r"column 'ram_kb': 'lots' is not a number",
    ),
    "empty_file": ("", r"the profile is empty"),
    "header_only": (",".join(HEADER) + "\n", r"header but no layer rows"),
    "unquoted_commas": (
        ",".join(HEADER) + "\nInput,(49, 10, 1),49x10x1,0,1,0\n",
        r"row 1 \(line 2\): 8 values for 6 columns",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_csv_is_one_line_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, pattern = BAD_CSV[case]
    path = _write(tmp_path, f"{case}.csv", text)
    err = _cli_error(capsys, str(path))
    assert str(path) in err
    assert re.search(pattern, err), err


BAD_JSON = {
    "invalid_json": ('[{"name": ', r"not valid JSON \(line 1"),
    "not_a_list": ('{"name": "x"}', r"expected a list of layer objects"),
    "missing_key": (
        json.dumps(
            [{"name": "a", "input_shape": [1], "output_shape": [1], "flash_kb": 0, "ram_kb": 0}]
        ),
        r"row 1, column 'kmacc': missing",
    ),
    "negative_json": (
        json.dumps(
            [
                {
                    "name": "a",
                    "input": [1],
                    "output": [1],
                    "flash_kb": 0,
                    "ram_kb": -1,
                    "kmac": 0,
                }
            ]
        ),
        r"row 1, column 'ram_kb': negative size",
    ),
    "empty_list": ("[]", r"no layers"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_bad_json_is_one_line_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, pattern = BAD_JSON[case]
    path = _write(tmp_path, f"{case}.json", text)
    err = _cli_error(capsys, str(path))
    assert re.search(pattern, err), err


def test_unknown_profile_name_lists_the_available_ones(capsys: pytest.CaptureFixture[str]) -> None:
    err = _cli_error(capsys, f"{THESIS}#resnet50")
    assert "no profile named 'resnet50'" in err and "kws_cnn" in err and "tiny_cnn" in err


def test_multi_profile_file_without_a_name_asks_for_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _cli_error(capsys, str(THESIS))
    assert "#NAME" in err and "yamnet_256" in err


def test_profile_name_on_a_csv_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "p.csv", GOOD_CSV)
    assert "only selects a profile of a JSON file" in _cli_error(capsys, f"{path}#x")


def test_shape_spellings(tmp_path: Path) -> None:
    text = GOOD_CSV.replace("49x10x1,25x5x64", '49 X 10 X 1,"[25, 5, 64]"').replace(
        '"(1, 1, 64)"', '"(64,)"'
    )
    chain = load_profile(str(_write(tmp_path, "p.csv", text)), activation_bytes=None)
    assert chain.layers[1].input is not None and chain.layers[1].input.shape == (49, 10, 1)
    assert chain.layers[1].output.shape == (25, 5, 64)
    assert chain.layers[2].input is not None and chain.layers[2].input.shape == (64,)


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _cli_error(capsys, str(tmp_path / "nope.csv"))
    assert "no such file" in err


def test_installed_command_reports_bad_profile_without_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", "name,input_shape\n")
    exe = Path(sys.executable).parent / "splitter"
    proc = subprocess.run([str(exe), "inspect", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("splitter: error: ") and proc.stderr.count("\n") == 1
    assert "missing column(s) output_shape, flash_kb, ram_kb, kmacc" in proc.stderr
