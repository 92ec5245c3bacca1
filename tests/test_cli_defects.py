"""The CLI rough edges a first user met (issue 29), one named test each.

``flash --dry-run`` building and saying "flashing" is
``tests/test_flash_cli.py::test_dry_run_prints_st_flash_lines_without_building``.
"""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import splitter
from splitter.cli import cli
from splitter.compile import CompileOptions
from splitter.hardware.boards import parse_size

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "models" / "tiny_cnn.onnx"
BOARDS = ROOT / "models" / "boards" / "e2e_tiny2.toml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_and_bench_use_the_boards_file_port(tmp_path: Path) -> None:
    """``port`` of a boards file is what run and bench connect to when no --port is given:
    here a closed local TCP port, so both name that URL in their one-line error."""
    url = f"socket://127.0.0.1:{_free_port()}"
    text = BOARDS.read_text().replace('name = "a"', f'name = "a"\nport = "{url}"')
    text = text.replace('name = "b"', f'name = "b"\nport = "{url}"')
    boards = tmp_path / "boards.toml"
    boards.write_text(text)
    out = tmp_path / "out"
    splitter.compile_model(TINY, boards, out, CompileOptions(validate=False))
    x = tmp_path / "x.npy"
    import numpy as np

    np.save(x, np.zeros((1, 1, 28, 28), np.float32))
    exe = Path(sys.executable).parent / "splitter"
    for args in (["run", str(out), "--input", str(x)], ["bench", str(out), "-n", "1"]):
        proc = subprocess.run(
            [str(exe), *args, "--timeout", "2"], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc.stderr
        assert "give --port" not in proc.stderr and "Traceback" not in proc.stderr
        assert url.split("//")[1] in proc.stderr, proc.stderr


def test_plan_takes_dash_t_like_the_other_commands() -> None:
    res = CliRunner().invoke(cli, ["plan", str(TINY), "-t", str(BOARDS)])
    assert res.exit_code == 0, res.output
    assert "proved optimal" in res.output


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("256 KB", 262144), ("256 kB", 262144), ("256KiB", 262144), ("256000", 256000),
     (256000, 256000), ("256000 B", 256000), ("1 MB", 1 << 20), ("50%", 524288)],
)  # fmt: skip
def test_sizes_people_write_are_sizes(text: object, nbytes: int) -> None:
    assert parse_size(text, 1024, "b.toml", "flash") == nbytes


def test_firmware_dir_has_the_mode_of_the_rest_of_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    splitter.compile_model(TINY, BOARDS, out, CompileOptions(validate=False))
    mode = stat.S_IMODE((out / "firmware").stat().st_mode)
    assert (
        mode == stat.S_IMODE((out / "submodels").stat().st_mode) == stat.S_IMODE(out.stat().st_mode)
    )
    assert mode & 0o055 == 0o055  # group / others may read and enter (umask 022)


def test_compile_over_an_earlier_output_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["compile", str(TINY), "-t", str(BOARDS), "-o", str(out), "--no-firmware"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0 and "replaced" not in first.output
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0
    assert f"note: replaced the earlier output in {out}" in again.output


def test_validation_line_says_what_it_checked(tmp_path: Path) -> None:
    """The sub-model files are checked against the whole model; the C is checked by run."""
    args = ["compile", str(TINY), "-t", str(BOARDS), "-o", str(tmp_path / "o"), "--no-firmware"]
    res = CliRunner().invoke(cli, args)
    assert "sub-model files validated against the whole model: passed on 8 inputs" in res.output
    assert "the firmware's C is checked by `splitter run`" in res.output


def test_torch_export_is_named_after_its_file() -> None:
    """torch.onnx.export names every graph "main_graph"; plans take the file's name."""
    import onnx

    model = ROOT / "models" / "resnet_tv_28.onnx"
    assert onnx.load(model, load_external_data=False).graph.name == "main_graph"
    assert splitter.load_chain(model).name == "resnet_tv_28"


@pytest.mark.parametrize("command", ["build", "flash", "bench"])
def test_an_output_directory_that_does_not_exist_is_named_as_such(
    tmp_path: Path, command: str
) -> None:
    """``splitter build no-such-dir`` once said the directory "has no firmware (compiled with
    --no-firmware?)" (issue 43, item 7): a typo in OUT is named as a missing directory."""
    missing = tmp_path / "no-such-dir"
    cmd = [sys.executable, "-m", "splitter", command, str(missing)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"splitter: error: {missing}: no such "), line
    assert "--no-firmware" not in line
