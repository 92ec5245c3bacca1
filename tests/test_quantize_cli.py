"""``splitter compile --quantize int8 --calibration-data X.npy``: a float ONNX model quantised by
onnxruntime's static quantiser (``splitter.slicing.quantize``), then the usual pipeline.

On ``models/boards/f401rb.toml`` (one STM32F401RB, 128 KiB flash) the float
``models/kws_ds_cnn.onnx`` (153 KiB of weights) does not fit; its error names the int8 remedy,
and the remedy applied plans. The accuracy cost against the float model is printed, stored in
``validation.json`` and shown in ``report.md`` / ``report.html``. Bad inputs are one line, exit 2,
and write nothing.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from splitter.cli import main
from splitter.compile import CompileOptions, compile_model
from splitter.slicing.quantize import quantization_cost

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
FLOAT = MODELS / "kws_ds_cnn.onnx"
BOARDS = MODELS / "boards" / "f401rb.toml"
SHAPE = (1, 1, 49, 10)


def _calibration(path: Path, n: int = 8, shape: tuple[int, ...] = SHAPE) -> Path:
    np.save(path, np.random.default_rng(3).standard_normal((n, *shape)).astype(np.float32))
    return path


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    got = capsys.readouterr()
    return int(info.value.code or 0), got.out, got.err


def test_float_does_not_fit_the_int8_remedy_applied_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(["compile", str(FLOAT), "-t", str(BOARDS), "-o", str(tmp_path / "f")],
                        capsys)  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "not enough flash" in err
    advice = re.search(r"int8 quantisation: splitter compile \S+ --target \S+ "
                       r"(--quantize int8 --calibration-data X\.npy)", err)  # fmt: skip
    assert advice is not None, err
    cal = _calibration(tmp_path / "X.npy")
    out = tmp_path / "q"
    args = ["compile", str(FLOAT), "-t", str(BOARDS), "-o", str(out), "--no-firmware"]
    args += shlex.split(advice.group(1).replace("X.npy", str(cal)))
    code, stdout, err = _cli(args, capsys)
    assert code == 0, err
    line = next(x for x in stdout.splitlines() if x.startswith("int8 quantisation"))
    assert "against the float model on 8 samples" in line and "top-1 agreement" in line
    plan = json.loads((out / "plan.json").read_text())
    assert plan["model"]["path"] == str((out / "kws_ds_cnn_int8.onnx").resolve())
    assert (out / "kws_ds_cnn_int8.onnx").is_file()
    assert [s["device"] for s in plan["submodels"]] == ["a"]
    validation = json.loads((out / "validation.json").read_text())
    assert validation["passed"] is True
    cost = validation["quantization"]
    assert cost["samples"] == 8 and cost["source"] == f"calibration {cal}"
    assert 0.0 <= cost["top1_agreement"] <= 1.0 and 0 < cost["mean_abs"] <= cost["max_abs"]
    assert line.endswith(f"max-abs {cost['max_abs']:.3g}, mean-abs {cost['mean_abs']:.3g}")
    assert "int8 quantisation against the float model" in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "Quantisation (int8)" in html and "top-1 agreement" in html


def test_cost_is_measured_on_the_data_set_when_given(tmp_path: Path) -> None:
    """``--data``: the cost's samples are the labelled set's inputs, and the figures are what
    onnxruntime gives for the float and the written int8 model on them."""
    x = np.random.default_rng(4).standard_normal((6, *SHAPE[1:])).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(6) % 12)
    opts = CompileOptions(quantize="int8", calibration_data=str(_calibration(tmp_path / "c.npy")),
                          data_file=str(tmp_path / "d.npz"), firmware=False)  # fmt: skip
    result = compile_model(FLOAT, BOARDS, tmp_path / "o", opts)
    cost = result.quantization
    assert cost is not None and cost["samples"] == 6 and cost["source"].startswith("--data")
    again = quantization_cost(FLOAT, tmp_path / "o" / "kws_ds_cnn_int8.onnx",
                              [a[None] for a in x], "")  # fmt: skip
    assert again["max_abs"] == cost["max_abs"] and again["top1_agreement"] == cost["top1_agreement"]
    assert result.validation is not None
    assert result.validation.labelled is not None  # accuracy of the int8 split on the set


def _bad_cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """case -> (extra arguments, text the one-line error must hold)."""
    wrong = _calibration(tmp / "wrong.npy", shape=(1, 1, 28, 28))
    ints = tmp / "ints.npy"
    np.save(ints, np.zeros((2, *SHAPE), np.int8))
    cal = _calibration(tmp / "ok.npy")
    return {
        "missing file": (
            ["--quantize", "int8", "--calibration-data", str(tmp / "nope.npy")],
            "nope.npy",
        ),
        "wrong shape": (["--quantize", "int8", "--calibration-data", str(wrong)], "1x1x49x10"),
        "int8 samples": (["--quantize", "int8", "--calibration-data", str(ints)], "float32"),
        "no calibration": (["--quantize", "int8"], "--calibration-data"),
        "calibration alone": (["--calibration-data", str(cal)], "--quantize int8"),
        "already quantised": (
            [
                "--quantize",
                "int8",
                "--calibration-data",
                str(cal),
                "--model",
                str(MODELS / "tiny_cnn_qdq.onnx"),
            ],
            "already quantised",
        ),
        "tflite": (
            [
                "--quantize",
                "int8",
                "--calibration-data",
                str(cal),
                "--model",
                str(MODELS / "tiny_cnn_float.tflite"),
            ],
            "TFLite converter",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing file",
        "wrong shape",
        "int8 samples",
        "no calibration",
        "calibration alone",
        "already quantised",
        "tflite",
    ],
)
def test_bad_quantize_input_is_one_line_exit_2_and_nothing_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra, text = _bad_cases(tmp_path)[case]
    model = str(FLOAT)
    if "--model" in extra:
        i = extra.index("--model")
        model, extra = extra[i + 1], extra[:i] + extra[i + 2 :]
    out = tmp_path / "out"
    code, _, err = _cli(["compile", model, "-t", str(BOARDS), "-o", str(out), *extra], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert text in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.toolchain
def test_int8_plan_builds_within_its_estimates(tmp_path: Path) -> None:
    """The quantised DS-CNN on the F401RB: the ELF built by arm-none-eabi-gcc fits the part, its
    weights and arena equal the plan's, and its code is within the code table's 2 % (the int8
    op keys of a QDQ ONNX graph are the NHWC kernels' measured ones, ``splitter.cost.code``).
    """
    opts = CompileOptions(quantize="int8", calibration_data=str(_calibration(tmp_path / "c.npy")))
    result = compile_model(FLOAT, BOARDS, tmp_path / "o", opts)
    assert result.firmware == "generated in firmware/"
    code, out, err = _build(tmp_path / "o")
    assert code == 0, err
    dev = json.loads(out)["devices"][0]
    assert dev["weights_actual"] == dev["weights_estimate"]
    assert dev["arena_actual"] == dev["arena_estimate"]
    assert dev["flash_total"] <= dev["flash_capacity"] and dev["ram_total"] <= dev["ram_capacity"]
    estimate = result.manifest.devices[0].code_bytes
    assert abs(dev["code_bytes"] - estimate) <= 0.02 * dev["code_bytes"], (estimate, dev)


def _build(out: Path) -> tuple[int, str, str]:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "splitter", "build", str(out), "--json"],
                          capture_output=True, text=True, cwd=ROOT, check=False)  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr
