"""``splitter compile`` on the command line: outputs, --json, --input, and one-line errors."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

import splitter.outputs as outputs
from splitter.cli import main

MODELS = Path(__file__).resolve().parent.parent / "models"
MODEL = MODELS / "resnet8.onnx"
BOARDS = """
[link]
baud = 921600
[[device]]
name = "h7"
mcu = "STM32H743ZI"
flash = "200 KiB"
[[device]]
name = "f4"
mcu = "STM32F446RE"
"""


@pytest.fixture
def boards(tmp_path: Path) -> Path:
    path = tmp_path / "boards.toml"
    path.write_text(BOARDS)
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["compile", *args])
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out, captured.err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("splitter: error: "), err
    return lines[0]


def test_default_out_dir_json_summary_and_files(
    tmp_path: Path,
    boards: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run([str(MODEL), "--target", str(boards), "--json", "--no-firmware"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    out_dir = tmp_path / "resnet8-split"
    assert summary["out_dir"] == str(out_dir)
    assert summary["validation"]["passed"] is True and summary["validation"]["max_abs"] == 0.0
    files = sorted(p.name for p in (out_dir / "submodels").iterdir())
    assert files == [Path(s["file"]).name for s in summary["submodels"]]
    assert files[0].startswith("00_") and all(f.endswith(".onnx") for f in files)
    for name in ("plan.json", "validation.json", "report.md", outputs.MARKER):
        assert (out_dir / name).is_file()


def test_user_input_file_is_validated_too(
    tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "x.npy"
    np.save(good, np.random.default_rng(1).standard_normal((3, 3, 32, 32)).astype(np.float32))
    out_dir = tmp_path / "o"
    args = [str(MODEL), "-t", str(boards), "-o", str(out_dir), "--input", str(good)]
    code, _, err = run([*args, "--no-firmware"], capsys)
    assert code == 0, err
    report = json.loads((out_dir / "validation.json").read_text())
    assert len(report["samples"]) == 8 + 3 and report["samples"][-1].startswith("file:")


def test_no_validate_writes_a_skipped_report(
    tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "o"
    args = [str(MODEL), "-t", str(boards), "-o", str(out_dir), "--no-validate", "--no-firmware"]
    code, _, err = run(args, capsys)
    assert code == 0, err
    assert json.loads((out_dir / "validation.json").read_text()) == {"skipped": True}
    assert "Skipped" in (out_dir / "report.md").read_text()


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((1, 3, 16, 16), np.float32), "needs shape [1, 3, 32, 32]"),
        (np.zeros((1, 3, 32, 32), np.float64), "needs dtype float32, the file has float64"),
    ],
)
def test_wrong_input_file_is_one_line_exit_2(
    tmp_path: Path,
    boards: Path,
    capsys: pytest.CaptureFixture[str],
    array: np.ndarray,
    message: str,
) -> None:
    bad = tmp_path / "bad.npy"
    np.save(bad, array)
    out_dir = tmp_path / "o"
    args = [str(MODEL), "-t", str(boards), "-o", str(out_dir), "--input", str(bad)]
    line = one_line_error(*run(args, capsys)[::2])
    assert message in line and str(bad) in line
    assert not out_dir.exists()


def test_out_is_a_file(tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "taken"
    out_file.write_text("x")
    line = one_line_error(*run([str(MODEL), "-t", str(boards), "-o", str(out_file)], capsys)[::2])
    assert "is a file" in line and out_file.read_text() == "x"


def test_out_not_writable(tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:  # root ignores mode bits; /sys refuses new entries even to root
        parent = Path("/sys")
    else:
        parent = tmp_path / "ro"
        parent.mkdir()
        parent.chmod(0o555)
    args = [str(MODEL), "-t", str(boards), "-o", str(parent / "splitter-out")]
    line = one_line_error(*run(args, capsys)[::2])
    assert "not writable" in line or "cannot create" in line


def test_foreign_out_needs_force(
    tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "docs"
    out_dir.mkdir()
    (out_dir / "thesis.tex").write_text("keep me")
    args = [str(MODEL), "-t", str(boards), "-o", str(out_dir), "--no-firmware"]
    line = one_line_error(*run(args, capsys)[::2])
    assert "--force" in line and (out_dir / "thesis.tex").exists()
    code, _, err = run([*args, "--force"], capsys)
    assert code == 0, err
    assert not (out_dir / "thesis.tex").exists()


def test_disk_full_mid_write_keeps_previous_out(
    tmp_path: Path,
    boards: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out_dir = tmp_path / "o"
    args = [str(MODEL), "-t", str(boards), "-o", str(out_dir), "--no-firmware"]
    assert run(args, capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in (out_dir / "submodels").iterdir()}
    plan_before = (out_dir / "plan.json").read_text()
    real_write, calls = os.write, {"n": 0}

    def fill_up(fd: int, data: memoryview) -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data[:4096])

    monkeypatch.setattr(outputs, "_os_write", fill_up)
    line = one_line_error(*run([*args, "--objective", "throughput"], capsys)[::2])
    assert "No space left on device" in line and "previous output is unchanged" in line
    assert {p.name: p.read_bytes() for p in (out_dir / "submodels").iterdir()} == before
    assert (out_dir / "plan.json").read_text() == plan_before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".o.")] == []


def test_profile_is_not_compilable(
    tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text("name,flash,ram,macs,out\n")
    line = one_line_error(
        *run([str(profile), "-t", str(boards), "-o", str(tmp_path / "o")], capsys)[::2]
    )
    assert "needs an .onnx or .tflite model" in line


def test_int8_model_takes_int8_input_files(
    tmp_path: Path, boards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = MODELS / "tiny_cnn_int8.tflite"
    good, bad = tmp_path / "q.npy", tmp_path / "f.npy"
    np.save(good, np.arange(490, dtype=np.int64).astype(np.int8).reshape(1, 49, 10, 1))
    np.save(bad, np.zeros((1, 49, 10, 1), np.float32))
    out_dir = tmp_path / "o"
    base = [str(model), "-t", str(boards), "-o", str(out_dir), "--no-firmware"]
    code, _, err = run([*base, "--input", str(good)], capsys)
    assert code == 0, err
    assert len(json.loads((out_dir / "validation.json").read_text())["samples"]) == 9
    line = one_line_error(*run([*base, "--input", str(bad)], capsys)[::2])
    assert "needs dtype int8, the file has float32" in line
