"""Progress on long steps (splitter/cli/progress.py), ``splitter ops``, and ``splitter build``
building what can be built.

Progress goes to stderr only: rich bars on a terminal, plain lines otherwise, nothing with
``SPLITTER_PROGRESS=off`` (the test suite's default, tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_plan_cli import run_cli

from splitter.cli.progress import Progress, progress_mode

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def test_mode_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for mode in ("rich", "plain", "off"):
        monkeypatch.setenv("SPLITTER_PROGRESS", mode)
        assert progress_mode() == mode
    monkeypatch.delenv("SPLITTER_PROGRESS")
    assert progress_mode() == "plain"  # stderr is not a terminal under pytest


def test_plain_steps_and_byte_bars(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("plain") as progress:
        progress.step("building h7")
        sent = progress.transfers()
        for done in (1024, 2048, 3136):
            sent("send", done, 3136)
        bar = progress.bar("timed runs", 3, "runs")
        for k in (1, 2, 3):
            bar.update(k)
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert lines[0] == "splitter: building h7"
    # a bar prints when it completes (and every few seconds before): bytes, percent and rate
    assert lines[1].startswith("splitter: sending the input: 3136/3136 B (100%), ")
    assert lines[1].endswith(" KiB/s")
    assert lines[2] == "splitter: timed runs: 3/3 runs (100%)"
    assert len(lines) == 3


def test_segment_weight_loads_are_byte_bars(capsys: pytest.CaptureFixture[str]) -> None:
    """A segmented run's weight loads (HostLink.on_bytes "load", splitter/segments/server.py):
    one bar per segment, with bytes and rate, the next segment a new bar."""
    with Progress("plain") as progress:
        loads = progress.transfers()
        for total in (19200, 57448):
            for done in (total // 2, total):
                loads("load", done, total)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (100%)")[0] for line in lines] == [
        "splitter: loading segment weights: 19200/19200 B",
        "splitter: loading segment weights: 57448/57448 B",
    ]
    assert all(line.endswith(" KiB/s") for line in lines)


def test_off_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("off") as progress:
        progress.step("x")
        progress.bar("y", 1, "B").update(1)
    assert capsys.readouterr() == ("", "")


def test_compile_piped_prints_plain_steps_and_clean_json(tmp_path: Path) -> None:
    """Not a terminal: one line per step on stderr, stdout stays one JSON object."""
    env = {k: v for k, v in os.environ.items() if k != "SPLITTER_PROGRESS"}
    env["PYTHONPATH"] = str(ROOT)
    args = [sys.executable, "-m", "splitter", "compile", str(MODELS / "tiny_cnn.onnx"), "-t",
            str(MODELS / "boards/e2e_tiny2.toml"), "-o", str(tmp_path / "o"), "--json"]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["out_dir"] == str(tmp_path / "o")
    assert r.stderr.splitlines() == [
        "splitter: importing tiny_cnn.onnx",
        "splitter: solving the partition",
        "splitter: slicing into 2 sub-models",
        "splitter: validating on 8+ inputs",
        f"splitter: writing {tmp_path / 'o'}",
        "splitter: generating the firmware projects",
        "splitter: drawing report.html",
    ]


def test_one_board_slices_into_one_sub_model(tmp_path: Path) -> None:
    """The step line counts in the singular on one board ("1 sub-models": issue 43, item 8)."""
    env = {k: v for k, v in os.environ.items() if k != "SPLITTER_PROGRESS"}
    env["PYTHONPATH"] = str(ROOT)
    one = tmp_path / "one.toml"
    one.write_text('[link]\nbaud = 115200\n[[device]]\nname = "f4"\nmcu = "STM32F405RG"\n')
    args = [sys.executable, "-m", "splitter", "compile", str(MODELS / "tiny_cnn.onnx"), "-t",
            str(one), "-o", str(tmp_path / "o"), "--no-firmware", "--no-validate"]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert "splitter: slicing into 1 sub-model" in r.stderr.splitlines(), r.stderr


def test_segment_piped_prints_plain_steps_and_clean_json(tmp_path: Path) -> None:
    """``segment -o`` not on a terminal: one line per step on stderr (import, units, the
    CP-SAT solve, firmware, report), stdout stays one JSON object."""
    env = {k: v for k, v in os.environ.items() if k != "SPLITTER_PROGRESS"}
    env["PYTHONPATH"] = str(ROOT)
    one = tmp_path / "one.toml"
    one.write_text('[link]\nbaud = 115200\n[[device]]\nname = "f4"\nmcu = "STM32F405RG"\n')
    model = str(MODELS / "tiny_cnn.onnx")
    args = [sys.executable, "-m", "splitter", "segment", model, "--target", str(one),
            "--segment-memory", "80 KiB", "-o", str(tmp_path / "o"), "--json"]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["out"] == str(tmp_path / "o")
    assert r.stderr.splitlines() == [
        f"splitter: importing {model}",
        "splitter: cutting the model into units",
        "splitter: solving the LO-SC segmentation (cpsat)",
        "splitter: generating the segment firmware",
        f"splitter: writing {tmp_path / 'o'}",
        "splitter: drawing report.html",
    ]


def test_ops_listing(capsys: pytest.CaptureFixture[str]) -> None:
    """Derived from splitter/ops.py, the emitters and the families: spot checks against what
    those tables say, and every listed ONNX / TFLite operator has an importer converter."""
    from splitter.importers.onnx_ops import CONVERTERS as ONNX_CONVERTERS
    from splitter.importers.onnx_qdq import INT8_KINDS
    from splitter.importers.tflite_ops import CONVERTERS as TFLITE_CONVERTERS

    code, out, err = run_cli(capsys, "ops", "--json")
    assert code == 0, err
    listing = json.loads(out)
    sections = {(s["format"], s["dtype"]): s for s in listing["formats"]}
    assert set(sections) == {("onnx", "float32"), ("onnx", "int8"), ("tflite", "float32"),
                             ("tflite", "int8")}  # fmt: skip
    kinds = {key: {op["kind"]: op for op in s["ops"]} for key, s in sections.items()}
    assert kinds[("tflite", "int8")]["conv2d"]["operators"] == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    assert "sub" in kinds[("tflite", "float32")] and "sub" not in kinds[("tflite", "int8")]
    assert "batchnorm" in kinds[("onnx", "float32")]
    qdq = kinds[("onnx", "int8")]  # QDQ graphs, lowered by splitter.importers.onnx_qdq
    assert qdq["mean"]["operators"] == ["GlobalAveragePool"] and "softmax" not in qdq
    assert qdq["quantize"]["operators"] == ["QuantizeLinear"]
    conv = kinds[("onnx", "float32")]["conv2d"]["kernels"]
    assert conv["cortex-m0plus"] == "float32 software (no FPU)"
    assert conv["cortex-m4"] == "float32 hardware (fpv4-sp-d16)"
    for (fmt, dtype), ops in kinds.items():
        table = ONNX_CONVERTERS if fmt == "onnx" else TFLITE_CONVERTERS
        table = INT8_KINDS if (fmt, dtype) == ("onnx", "int8") else table
        for op in ops.values():
            assert all(name in table for name in op["operators"]), (fmt, op)
    code, out, _ = run_cli(capsys, "ops", "--format", "tflite", "--dtype", "int8")
    assert code == 0 and "tflite int8 (NHWC)" in out and "onnx" not in out
    # PEX loops: float32 NCHW (conv2d and the loop activations) and int8 NHWC (conv2d only)
    from splitter.cost.pex_chain import LOOP_ACTIVATIONS

    looped = {key: {k for k, op in ops.items() if op["partial_execution"]}
              for key, ops in kinds.items()}  # fmt: skip
    onnx_float = set(kinds[("onnx", "float32")])
    assert looped[("onnx", "float32")] == {"conv2d"} | (LOOP_ACTIVATIONS & onnx_float)
    assert looped[("onnx", "int8")] == looped[("tflite", "int8")] == {"conv2d"}
    assert looped[("tflite", "float32")] == set()


def test_ops_listing_covers_the_loops_a_plan_runs() -> None:
    """Every op inside the PEX loops the planner fuses for models/pex_irb_48.onnx (float32
    NCHW) and models/mlperf_vww_mobilenet_v1_025_int8.tflite (int8 NHWC) is listed as loopable."""
    from splitter.cli.ops_cmd import pex_roles
    from splitter.cost.pex_chain import partial_chain
    from splitter.importers import load_chain
    from splitter.ops import F32_NCHW, I8_NHWC

    for name, variant in (("pex_irb_48.onnx", F32_NCHW),
                          ("mlperf_vww_mobilenet_v1_025_int8.tflite", I8_NHWC)):  # fmt: skip
        chain = load_chain(MODELS / name)
        assert chain.graph is not None
        kind = {op.name: op.kind for op in chain.graph.ops}
        loops = [loop for layer in partial_chain(chain).layers for loop in layer.loops]
        assert loops, name
        assert all(pex_roles(kind[op], variant) for loop in loops for op in loop.ops), name


@pytest.fixture(scope="module")
def too_big_for_qemu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """resnet8 on one H743: a 256 KiB arena, more than the emulated F405's 128 KiB RAM."""
    base = tmp_path_factory.mktemp("h7")
    boards = base / "h7.toml"
    boards.write_text('[link]\nbaud = 115200\n[[device]]\nname = "h7"\nmcu = "STM32H743ZI"\n')
    out = base / "r8 int8"  # a space in OUT: make's $(CC) once broke on it (issue 43, item 2)
    with pytest.raises(SystemExit) as info:
        from splitter.cli import main

        main(["compile", str(MODELS / "resnet8.onnx"), "-t", str(boards), "-o", str(out),
              "--no-validate"])  # fmt: skip
    assert info.value.code in (0, None)
    return out


def test_build_builds_what_it_can(
    too_big_for_qemu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The part firmware builds; the emulator variant does not fit QEMU's F405: by default a
    note naming --no-emulator (exit 0), with --emulator one error line saying so (exit 2)."""
    out = str(too_big_for_qemu)
    code, stdout, err = run_cli(capsys, "build", out)
    assert code == 0, err
    assert "built 1 device(s)" in stdout
    (note,) = err.strip().splitlines()
    assert note.startswith("note: emulator variant of h7 not built: device h7: firmware does ")
    assert "--no-emulator skips it" in note
    code, _, err = run_cli(capsys, "build", out, "--emulator")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "does not fit the emulated STM32F405" in line
    assert line.endswith("`splitter build --no-emulator` builds only that")
    code, stdout, err = run_cli(capsys, "build", out, "--no-emulator", "--json")
    assert code == 0 and json.loads(stdout)["devices"][0]["emulator"] == "skipped"


def test_solver_reports_best_and_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long solve shows its progress: bnb's nodes, best value and gap to its root bound
    (MobileNet v1 0.30 over four boards, where bnb alone does not prove in a second)."""
    boards = tmp_path / "four.toml"
    parts = ("STM32H743ZI", "STM32F446RE", "STM32F401RE", "STM32H723ZG")
    devices = "".join(f'[[device]]\nname = "d{k}"\nmcu = "{p}"\n' for k, p in enumerate(parts))
    boards.write_text("[link]\nbaud = 115200\n" + devices)
    profile = f"{MODELS / 'profiles/thesis_profiles.json'}#mobilenet_v1_030"
    monkeypatch.setenv("SPLITTER_PROGRESS", "plain")
    code, out, err = run_cli(capsys, "plan", profile, "--target", str(boards), "--objective",
                             "throughput", "--solver", "bnb", "--time-limit", "1.5")  # fmt: skip
    assert code == 0, err
    lines = err.splitlines()
    assert lines[1] == "splitter: solving (bnb, throughput)"
    assert any(
        line.startswith("splitter: bnb: ") and " nodes, best " in line and ", gap " in line
        for line in lines[2:]
    ), err
    assert "not proved optimal (stopped by the time limit), gap " in out
