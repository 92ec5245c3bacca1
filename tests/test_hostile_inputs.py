"""Hostile input files (issue 18, items 3 and 5): each case is the real CLI in a subprocess and
must end with exit code 2, exactly one line on stderr, no traceback and no hang.

Inputs must be regular files of bounded size (no FIFO, device, directory or symlink to one),
parsed with depth limits; numbers in boards files and profiles finite and in range; corrupt
models and odd output paths are one-line errors, never ``internal error``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from splitter.errors import InputFileError
from splitter.inputs import MAX_DEPTH, MODEL_MAX_BYTES, TEXT_MAX_BYTES

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
TINY = MODELS / "tiny_cnn.onnx"
TINY_TFLITE = MODELS / "tiny_cnn_float.tflite"
BOARDS = MODELS / "boards" / "e2e_tiny2.toml"
#: Every case must finish well within this (a FIFO or /dev/zero used to block forever).
TIMEOUT = 60


def splitter(*args: str | Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python -m splitter ARGS`` from the repository root; fails the test on a hang."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "splitter", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"splitter {' '.join(map(str, args))} hung for {timeout} s")


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit code 2, one ``splitter: error:`` line on stderr containing every needle."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert lines[0].startswith("splitter: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def compile_(model: Path, boards: Path, out: Path, *extra: str | Path) -> Any:
    return splitter("compile", model, "--target", boards, "-o", out, "--no-firmware", *extra)


def boards_text(device: str, link: str = "") -> str:
    """A one-device boards file; ``device`` is the body of its [[device]] table."""
    return f'[link]\nbaud = 115200\n{link}\n[[device]]\nname = "a"\n{device}\n'


INLINE = (
    'part = {{ name = "X1", flash_kib = {flash}, ram_kib = 128, clock_mhz = 84, cpm = 5, '
    'family = "F4"{extra} }}'
)


def inline(flash: str = "1024", extra: str = "") -> str:
    return INLINE.format(flash=flash, extra=extra)


# --- not regular files: FIFOs, devices, directories, symlinks to them --------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _named(tmp_path: Path, target: Path, name: str) -> Path:
    link = tmp_path / name
    link.symlink_to(target)
    return link


@pytest.mark.parametrize("suffix", [".onnx", ".tflite"])
def test_fifo_as_model(tmp_path: Path, fifo: Path, suffix: str) -> None:
    model = _named(tmp_path, fifo, f"model{suffix}")
    assert_one_line_error(compile_(model, BOARDS, tmp_path / "out"), "FIFO", "regular file")


@pytest.mark.parametrize("suffix", [".onnx", ".tflite"])
def test_dev_zero_as_model(tmp_path: Path, suffix: str) -> None:
    model = _named(tmp_path, Path("/dev/zero"), f"zero{suffix}")
    assert_one_line_error(compile_(model, BOARDS, tmp_path / "out"), "character device")


def test_directory_as_model(tmp_path: Path) -> None:
    (tmp_path / "dir.onnx").mkdir()
    assert_one_line_error(compile_(tmp_path / "dir.onnx", BOARDS, tmp_path / "out"), "directory")


def test_fifo_as_boards_file(tmp_path: Path, fifo: Path) -> None:
    boards = _named(tmp_path, fifo, "boards.toml")
    assert_one_line_error(compile_(TINY, boards, tmp_path / "out"), "FIFO")


def test_dev_zero_as_boards_file(tmp_path: Path) -> None:
    boards = _named(tmp_path, Path("/dev/zero"), "boards.toml")
    assert_one_line_error(splitter("plan", TINY, "--target", boards), "character device")


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_fifo_as_profile(tmp_path: Path, fifo: Path, suffix: str) -> None:
    profile = _named(tmp_path, fifo, f"profile{suffix}")
    assert_one_line_error(splitter("plan", profile, "--target", BOARDS), "FIFO")


def test_dev_zero_as_profile(tmp_path: Path) -> None:
    profile = _named(tmp_path, Path("/dev/zero"), "profile.csv")
    assert_one_line_error(splitter("plan", profile, "--target", BOARDS), "character device")


@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
def test_fifo_or_device_as_input_npy(tmp_path: Path, fifo: Path, target: str) -> None:
    x = _named(tmp_path, fifo if target == "fifo" else Path(target), "x.npy")
    r = compile_(TINY, BOARDS, tmp_path / "out", "--input", x)
    assert_one_line_error(r, str(x), "not a regular file")


def test_onnx_external_data_is_a_fifo(tmp_path: Path) -> None:
    import onnx

    model = tmp_path / "m.onnx"
    onnx.save(onnx.load(str(TINY)), str(model), save_as_external_data=True,
              all_tensors_to_one_file=True, location="w.bin", size_threshold=0)  # fmt: skip
    (tmp_path / "w.bin").unlink()
    os.mkfifo(tmp_path / "w.bin")
    assert_one_line_error(splitter("inspect", model), "w.bin", "not regular file")


@pytest.mark.parametrize("name", ["plan.json", "firmware/wiring.json"])
def test_fifo_in_a_compile_output(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    r = splitter("compile", TINY, "--target", BOARDS, "-o", out)
    assert r.returncode == 0, r.stderr
    (out / name).unlink()
    os.mkfifo(out / name)
    assert_one_line_error(splitter("build", out), name, "edited")  # files.sha256 (not opened)
    assert_one_line_error(splitter("build", out, "--allow-edited"), name, "FIFO")


# --- size limits ---------------------------------------------------------------------------------


def _sparse(path: Path, size: int, head: bytes = b"") -> Path:
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def test_boards_file_above_the_size_limit(tmp_path: Path) -> None:
    boards = _sparse(tmp_path / "boards.toml", TEXT_MAX_BYTES + 1, b"# big\n")
    assert_one_line_error(compile_(TINY, boards, tmp_path / "out"), "above the limit")


def test_model_above_the_size_limit(tmp_path: Path) -> None:
    model = _sparse(tmp_path / "huge.onnx", MODEL_MAX_BYTES + 1)
    assert_one_line_error(compile_(model, BOARDS, tmp_path / "out"), "above the limit")


# --- nesting limits ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deeply_nested_toml(tmp_path: Path, depth: int) -> None:
    boards = tmp_path / "boards.toml"
    boards.write_text(
        "x = " + "[" * depth + "]" * depth + "\n" + boards_text('mcu = "STM32F405RG"')
    )
    assert_one_line_error(compile_(TINY, boards, tmp_path / "out"), str(boards), "nested")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deeply_nested_json_profile(tmp_path: Path, depth: int) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text("[" * depth + "]" * depth)
    assert_one_line_error(splitter("plan", profile, "--target", BOARDS), "nested")


# --- numbers in boards files and profiles --------------------------------------------------------

BAD_BOARDS = {
    "clock_mhz_nan": ('mcu = "STM32F405RG"\nclock_mhz = nan', "clock_mhz"),
    "clock_mhz_inf": ('mcu = "STM32F405RG"\nclock_mhz = inf', "clock_mhz"),
    "cpm_1e308": ('mcu = "STM32F405RG"\ncpm = 1e308', "cpm"),
    "cpm_by_class_nan": ('mcu = "STM32F405RG"\ncpm_by_class = { conv = nan }', "conv"),
    "flash_kib_inf": (inline(flash="inf"), "flash_kib"),
    "flash_kib_1e308": (inline(flash="1e308"), "flash_kib"),
    "ram_regions_int": (inline(extra=", ram_regions = 5"), "ram_regions"),
    "ram_regions_bad_row": (inline(extra=', ram_regions = [["SRAM", "x", 128]]'), "ram_regions"),
    "ram_region_size_nan": (
        inline(extra=', ram_regions = [["SRAM", 0x20000000, nan]]'),
        "ram_regions",
    ),
    "flash_origin_string": (inline(extra=', flash_origin = "0x08000000"'), "flash_origin"),
    "flash_origin_negative": (inline(extra=", flash_origin = -1"), "flash_origin"),
    "usarts_int": (inline(extra=", usarts = 3"), "usarts"),
    "fpu_int": (inline(extra=", fpu = 1"), "fpu"),
}


@pytest.mark.parametrize("case", sorted(BAD_BOARDS))
def test_boards_numbers_and_types(tmp_path: Path, case: str) -> None:
    device, needle = BAD_BOARDS[case]
    boards = tmp_path / "boards.toml"
    boards.write_text(boards_text(device))
    assert_one_line_error(compile_(TINY, boards, tmp_path / "out"), str(boards), needle)


@pytest.mark.parametrize("link", ["baud = 1e12", "baud = 100000000000", "bits_per_byte = 1000"])
def test_boards_link_numbers(tmp_path: Path, link: str) -> None:
    boards = tmp_path / "boards.toml"
    boards.write_text(boards_text('mcu = "STM32F405RG"').replace("baud = 115200", link))
    assert_one_line_error(compile_(TINY, boards, tmp_path / "out"), link.split()[0])


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "1e300", "-1"])
def test_profile_numbers(tmp_path: Path, value: str) -> None:
    profile = tmp_path / "p.csv"
    header = "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"
    profile.write_text(header + f"conv,1x8x8x1,1x8x8x4,{value},1,1\n")
    assert_one_line_error(splitter("plan", profile, "--target", BOARDS), "flash_kb")


def test_profile_huge_shape(tmp_path: Path) -> None:
    profile = tmp_path / "p.csv"
    header = "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"
    profile.write_text(header + "conv,1x8x8x1,1x99999999999x99999999999,1,1,1\n")
    assert_one_line_error(splitter("plan", profile, "--target", BOARDS), "too large")


# --- corrupt models and odd command lines (used to be internal errors) --------------------------


def _edited_tflite(path: Path, edit: str) -> Path:
    from ai_edge_litert import schema_py_generated as schema

    from splitter.importers.tflite_writer import aligned, pack_model
    from splitter.slicing.tflite_slice import load_tflite_model

    _, model = load_tflite_model(TINY_TFLITE)
    model.buffers = [aligned(b) for b in model.buffers]
    sg = model.subgraphs[0]
    if edit == "stride0":
        codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
        conv = next(
            op for op in sg.operators if codes[op.opcodeIndex] == schema.BuiltinOperator.CONV_2D
        )
        conv.builtinOptions.strideH = 0
    else:  # the subgraph's output is its input
        sg.outputs = list(sg.inputs)
    path.write_bytes(pack_model(model))
    return path


def test_tflite_conv_with_stride_0(tmp_path: Path) -> None:
    model = _edited_tflite(tmp_path / "stride0.tflite", "stride0")
    assert_one_line_error(compile_(model, BOARDS, tmp_path / "out"), "CONV_2D", "strides (0, 1)")


def test_tflite_subgraph_output_is_its_input(tmp_path: Path) -> None:
    model = _edited_tflite(tmp_path / "selfout.tflite", "selfout")
    assert_one_line_error(compile_(model, BOARDS, tmp_path / "out"), "is a graph input")


@pytest.mark.parametrize("shape", ["input=0x1x28x28", "input=1x1x28x0", "input=x", "=1x1"])
def test_input_shape_with_zero_or_garbage(tmp_path: Path, shape: str) -> None:
    r = compile_(TINY, BOARDS, tmp_path / "out", "--input-shape", shape)
    assert_one_line_error(r, "--input-shape")


def test_npz_named_npy(tmp_path: Path) -> None:
    x = tmp_path / "x.npy"
    with x.open("wb") as fh:
        np.savez(fh, x=np.zeros((1, 1, 28, 28), np.float32))
    assert_one_line_error(compile_(TINY, BOARDS, tmp_path / "out", "--input", x), ".npz")


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert_one_line_error(compile_(TINY, BOARDS, tmp_path / "out", "--input", x), str(x))


@pytest.mark.parametrize("length", [256, 300])
def test_long_output_name(tmp_path: Path, length: int) -> None:
    out = tmp_path / ("o" * length)
    assert_one_line_error(compile_(TINY, BOARDS, out), "too long")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_out_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("keep me")
    assert_one_line_error(compile_(TINY, BOARDS, out), "is a file")
    assert out.read_text() == "keep me"


def test_hand_edited_part_ld(tmp_path: Path) -> None:
    """``part.ld`` is read back after the build to get the part's FLASH and RAM lengths."""
    from splitter.toolchain.build import _capacities

    ld = tmp_path / "part.ld"
    ld.write_text("MEMORY\n{\n  FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 1024K\n"
                  "  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 0x20000\n}\n")  # fmt: skip
    assert _capacities(tmp_path) == (1024 * 1024, 0x20000)  # ld's own spellings are read
    ld.write_text("MEMORY\n{\n  FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 1M - 4\n}\n")
    with pytest.raises(InputFileError, match=r"part\.ld: MEMORY region FLASH: LENGTH = '1M - 4'"):
        _capacities(tmp_path)  # an expression ld would evaluate is named, not guessed at
    ld.write_text("MEMORY\n{\n  FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 1M\n}\n")
    with pytest.raises(InputFileError, match=r"part\.ld: no 'FLASH .*regenerate"):
        _capacities(tmp_path)  # no RAM region
    ld.unlink()
    os.mkfifo(ld)
    with pytest.raises(InputFileError, match="FIFO"):
        _capacities(tmp_path)


def test_usage_errors_are_one_line() -> None:
    assert_one_line_error(splitter("compile"), "Missing argument", "--help")
    assert_one_line_error(splitter("no-such-command"), "No such command")


# --- Ctrl-C during compile -----------------------------------------------------------------------

BIG = MODELS / "mobilenet_v1_025.onnx"
BIG_BOARDS = MODELS / "boards" / "m0_m4_m7.toml"


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal gives it, whatever the test runner's own handling."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_compile(out: Path, when: str) -> subprocess.CompletedProcess[str]:
    """SIGINT a real ``splitter compile`` of MobileNet: after 0.3 s (importing/planning) or as
    soon as its temporary output directory appears (writing OUT)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "splitter", "compile", str(BIG), "--target", str(BIG_BOARDS),
         "-o", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    if when == "early":
        time.sleep(0.3)
    else:
        while proc.poll() is None and time.monotonic() < deadline:
            if any(".tmp-" in p.name for p in out.parent.iterdir()):
                break
            time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=TIMEOUT)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("when", ["early", "writing"])
def test_sigint_during_compile_exits_130_without_output(tmp_path: Path, when: str) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    r = _interrupt_compile(parent / "out", when)
    if r.returncode == 0:
        pytest.fail(f"compile finished before the SIGINT ({when}); the test needs a bigger model")
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "splitter: interrupted"
    assert list(parent.iterdir()) == []  # no OUT, no temporary directory


def test_sigint_during_recompile_keeps_the_previous_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert compile_(TINY, BOARDS, out).returncode == 0
    before = json.loads((out / "plan.json").read_text())
    r = _interrupt_compile(out, "writing")
    assert r.returncode == 130, r.stderr
    assert json.loads((out / "plan.json").read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# --- Ctrl-C and dying boards on emulated boards (real QEMU, real firmware) ----------------------


def e2e(test: Any) -> Any:
    """Marks of the end-to-end tests: real firmware (toolchain) on real QEMU, slow."""
    return pytest.mark.slow(pytest.mark.qemu(pytest.mark.toolchain(test)))


#: --timeout of the runs below; a dead or stopped board must be named well within it + slack.
LINK_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def tiny_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_e2e_support import shared_build

    return shared_build(tmp_path_factory, "tiny_cnn.onnx", "e2e_tiny2.toml", "hostile-tiny")


@pytest.fixture(scope="module")
def x_npy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("x") / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32))
    return path


def _until(proc: subprocess.Popen[str], marker: str, lines: list[str]) -> None:
    """Read ``proc``'s stderr (``--verbose`` frame log) until a line contains ``marker``."""
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if marker in line:
            return
    pytest.fail(f"never saw {marker!r}: {''.join(lines[-5:])}")


def _errors(stderr: str) -> list[str]:
    """The stderr lines that are not ``--verbose`` frame logs (``-> a TENSOR ...``)."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("-> ", "<- "))]


def _device_pid(out: Path, device: str) -> int:
    """PID of the QEMU running ``device``'s firmware of ``out``."""
    from test_e2e_support import qemu_pids

    for pid in qemu_pids(str(out)):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if f"/firmware/{device}/" in cmd:
            return pid
    pytest.fail(f"no QEMU for device {device} of {out}")


def _start(out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "splitter", *args, "--verbose"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip


@e2e
@pytest.mark.parametrize("command", ["run", "bench"])
def test_sigint_during_emulated_run_leaves_no_qemu(
    tiny_out: Path, x_npy: Path, command: str
) -> None:
    from test_e2e_support import gone, qemu_pids

    args = {
        "run": ["run", str(tiny_out), "--input", str(x_npy), "--emulate"],
        "bench": ["bench", str(tiny_out), "--emulate", "-n", "200", "--target", str(BOARDS)],
    }[command]
    proc = _start(tiny_out, *args)
    lines: list[str] = []
    try:
        _until(proc, "-> a TENSOR", lines)
        pids = qemu_pids(str(tiny_out))
        assert len(pids) == 2
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 130, rest
    assert _errors(rest) == ["splitter: interrupted"]
    assert gone(pids) and qemu_pids(str(tiny_out)) == []


def _fault(tiny_out: Path, x_npy: Path, device: str, sig: signal.Signals) -> tuple[Any, float]:
    """``run --emulate`` with ``sig`` sent to ``device``'s QEMU once the input is on its way;
    (completed process, seconds from the signal to the exit)."""
    from test_e2e_support import qemu_pids

    proc = _start(tiny_out, "run", str(tiny_out), "--input", str(x_npy), "--emulate",
                  "--timeout", str(LINK_TIMEOUT))  # fmt: skip
    lines: list[str] = []
    pid = 0
    try:
        _until(proc, "-> a TENSOR", lines)
        pid = _device_pid(tiny_out, device)
        os.kill(pid, sig)
        t0 = time.monotonic()
        _, rest = proc.communicate(timeout=TIMEOUT)
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
        if sig == signal.SIGSTOP and pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert qemu_pids(str(tiny_out)) == []
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", rest), elapsed


@e2e
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
@pytest.mark.parametrize("device", ["a", "b"])
def test_dead_board_is_named_with_its_link(
    tiny_out: Path, x_npy: Path, device: str, sig: signal.Signals
) -> None:
    """A board killed (SIGKILL) or stopped (SIGSTOP) mid-run: one line naming it and its link."""
    r, elapsed = _fault(tiny_out, x_npy, device, sig)
    assert r.returncode == 2, r.stderr
    errors = _errors(r.stderr)
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"device {device}" in errors[0] and "socket://127.0.0.1:" in errors[0], errors[0]
    assert elapsed < LINK_TIMEOUT + 3


def test_ctrl_c_inside_an_extension_import_is_an_interruption(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGINT while a C extension initialises surfaces as ImportError chained to the
    KeyboardInterrupt: still exit 130 and one line, not an 'internal error'."""
    import splitter.cli as cli_module

    def interrupted_import(args: list[str]) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    monkeypatch.setattr(cli_module, "_invoke", interrupted_import)
    assert cli_module._run(["inspect", "x.onnx"]) == 130
    assert capsys.readouterr().err == "splitter: interrupted\n"
