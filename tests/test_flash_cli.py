"""``splitter flash OUT`` on a real compile output: real cross build, exact lines, one-line errors.

OUT is tiny_cnn split over two STM32F405 boards (models/boards/e2e_tiny2.toml plus probe
serials), compiled once per module by ``splitter compile``'s library call; the firmware is built
by the command itself with arm-none-eabi-gcc. No board is attached here, so a run that really
flashes uses a stand-in ``st-flash`` script first on PATH that records its arguments (the exact
lines are those of tests/test_flash_commands.py); every other test runs the real command path.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from splitter.cli import main
from splitter.compile import CompileOptions, compile_model
from splitter.deploy.flash import AUTO_TOOLS, TOOLS
from splitter.toolchain.build import build_all, check

pytestmark = [pytest.mark.toolchain]

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "tiny_cnn.onnx"
BASE_BOARDS = ROOT / "models" / "boards" / "e2e_tiny2.toml"
PROBES = {"a": "066DFF3A", "b": "0670FF5B"}
#: STM32F405RG memory map (RM0090 section 2.3): flash at 0x0800_0000, 1 MiB; SRAM 0x2000_0000.
FLASH_BASE, FLASH_SIZE, SRAM_BASE, SRAM_SIZE = 0x0800_0000, 1 << 20, 0x2000_0000, 128 << 10


def boards_text(
    probes: dict[str, str] | None = None, mcu_b: str = "STM32F405RG", baud: int = 115200
) -> str:
    """e2e_tiny2.toml's devices, with probe serials, another part for b, or another baud."""
    lines = [f"[link]\nbaud = {baud}"]
    for name, flash, mcu in (("a", "62 KiB", "STM32F405RG"), ("b", "84 KiB", mcu_b)):
        lines.append(f'[[device]]\nname = "{name}"\nmcu = "{mcu}"\nflash = "{flash}"')
        if probes:
            lines.append(f'probe = "{probes[name]}"')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT compiled against a boards file with probe serials (firmware generated, not built)."""
    base = tmp_path_factory.mktemp("flash")
    boards = base / "boards.toml"
    boards.write_text(boards_text(PROBES))
    assert BASE_BOARDS.read_text().count("[[device]]") == 2  # same bench as the e2e tests
    out = base / "out"
    compile_model(MODEL, boards, out, CompileOptions(validate=False))
    return out


def flash(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``splitter flash ARGS`` in-process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as info:
        main(["flash", *args])
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out, captured.err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("splitter: error: "), err
    return lines[0]


def images(out: Path, device: str) -> tuple[Path, Path]:
    build = out / "firmware" / device / "build" / "part"
    return build / "firmware.elf", build / "firmware.bin"


def _tree(out: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (out / "firmware").rglob("*")}


def test_dry_run_prints_st_flash_lines_without_building(
    compiled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``flash --dry-run`` shows the commands and neither builds nor says it is flashing
    (issue 29); the images the commands name are the ones ``splitter build`` then makes."""
    before = _tree(compiled)
    code, out, err = flash([str(compiled), "--dry-run", "--tool", "st-flash"], capsys)
    assert code == 0, err
    assert _tree(compiled) == before  # nothing built, nothing written
    assert "flashing with" not in err and "building" not in err
    expected = []
    for device, serial in PROBES.items():
        _elf, binary = images(compiled, device)
        expected += [
            f"# {device} (STM32F405RG), probe {serial}",
            f"st-flash --serial {serial} --reset write {binary} 0x08000000",
        ]
    assert out.splitlines() == expected
    assert "warning" not in err
    for build in build_all(compiled, emulator=False):
        check(build)
    for device in PROBES:
        elf, binary = images(compiled, device)
        assert elf.read_bytes()[:4] == b"\x7fELF"
        sp, reset = struct.unpack("<II", binary.read_bytes()[:8])
        assert SRAM_BASE < sp <= SRAM_BASE + SRAM_SIZE  # vector table: initial stack pointer
        assert reset & 1 and FLASH_BASE <= reset < FLASH_BASE + FLASH_SIZE  # Thumb reset handler


def test_dry_run_openocd_and_cubeprog_use_the_elf(
    compiled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = flash([str(compiled), "--dry-run", "--tool", "openocd"], capsys)
    assert code == 0, err
    elf_a, _ = images(compiled, "a")
    assert (
        f"openocd -f interface/stlink.cfg -c 'adapter serial 066DFF3A' -f target/stm32f4x.cfg "
        f"-c 'program {elf_a} verify reset exit'"
    ) in out.splitlines()
    code, out, err = flash([str(compiled), "--dry-run", "--tool", "STM32_Programmer_CLI"], capsys)
    assert code == 0, err
    elf_b, _ = images(compiled, "b")
    assert f"STM32_Programmer_CLI -c port=SWD sn=0670FF5B -w {elf_b} -v -rst" in out.splitlines()


def test_dry_run_auto_shows_the_installed_tool_or_st_flash(
    compiled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = flash([str(compiled), "--dry-run"], capsys)
    assert code == 0, err
    installed = [TOOLS[t] for t in AUTO_TOOLS if shutil.which(TOOLS[t])]
    commands = [line for line in out.splitlines() if not line.startswith("#")]
    assert len(commands) == 2
    first_word = installed[0] if installed else "st-flash"
    assert all(cmd.split()[0] == first_word for cmd in commands)
    assert ("no flash tool found" in err) == (not installed)


def test_no_tool_installed_is_one_line_exit_2(
    compiled: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH: no flashing tool
    line = one_line_error(*flash([str(compiled)], capsys)[::2])
    assert "st-flash, openocd or STM32_Programmer_CLI" in line
    assert "apt-get install --no-install-recommends stlink-tools" in line
    line = one_line_error(*flash([str(compiled), "--tool", "openocd"], capsys)[::2])
    assert "openocd not found on PATH" in line and "apt-get install" in line


def fake_st_flash(bin_dir: Path, log: Path, exit_code: int) -> None:
    """An ``st-flash`` that appends its arguments to ``log`` and exits with ``exit_code``."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "st-flash"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexit {exit_code}\n')
    script.chmod(0o755)


def test_flash_runs_each_board_in_order_and_stops_on_failure(
    compiled: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "calls.txt"
    fake_st_flash(tmp_path / "bin", log, 0)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code, out, err = flash([str(compiled), "--tool", "st-flash"], capsys)
    assert code == 0, err
    bins = [images(compiled, d)[1] for d in PROBES]
    assert log.read_text().splitlines() == [
        f"--serial {serial} --reset write {binary} 0x08000000"
        for serial, binary in zip(PROBES.values(), bins, strict=True)
    ]
    assert out.splitlines()[-1] == "flashed and verified 2 device(s) with st-flash"

    log.unlink()
    fake_st_flash(tmp_path / "bin", log, 1)
    code, out, err = flash([str(compiled), "--tool", "st-flash"], capsys)
    line = err.strip().splitlines()[-1]  # progress lines (if any), then the error
    assert code == 2
    assert line.startswith("splitter: error: device a: flashing with st-flash failed")
    assert len(log.read_text().splitlines()) == 1  # b was not touched after a failed


def test_missing_probes_refused_before_flashing_warned_in_dry_run(
    compiled: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    boards = tmp_path / "noprobe.toml"
    boards.write_text(boards_text())
    log = tmp_path / "calls.txt"
    fake_st_flash(tmp_path / "bin", log, 0)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    line = one_line_error(*flash([str(compiled), "-t", str(boards)], capsys)[::2])
    assert f"{boards}: device(s) a, b have no probe" in line
    assert not log.exists()
    code, out, err = flash([str(compiled), "-t", str(boards), "--dry-run"], capsys)
    assert code == 0 and "warning: " in err and "have no probe" in err
    assert "st-flash --reset write" in out and "--serial" not in out


def test_not_a_compile_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(*flash([str(tmp_path), "--dry-run"], capsys)[::2])
    assert "plan.json: missing" in line and "not a `splitter compile` output" in line
    line = one_line_error(*flash([str(tmp_path / "nope"), "--dry-run"], capsys)[::2])
    assert "no such directory" in line and "splitter compile" in line


def partial_copy(compiled: Path, dest: Path, **plan_changes: str) -> Path:
    """plan.json (with changes) and firmware/wiring.json of OUT, nothing else."""
    plan = json.loads((compiled / "plan.json").read_text())
    (dest / "firmware").mkdir(parents=True)
    (dest / "plan.json").write_text(json.dumps({**plan, **plan_changes}))
    return dest


def test_output_without_firmware_or_boards_file(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = partial_copy(compiled, tmp_path / "bare")
    line = one_line_error(*flash([str(bare), "--dry-run"], capsys)[::2])
    assert "wiring.json: missing" in line and "--no-firmware" in line
    moved = partial_copy(compiled, tmp_path / "moved", boards_path=str(tmp_path / "gone.toml"))
    shutil.copy(compiled / "firmware" / "wiring.json", moved / "firmware")
    line = one_line_error(*flash([str(moved), "--dry-run"], capsys)[::2])
    assert "gone.toml: board file" in line and "pass --target" in line


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ((ROOT / "models" / "boards" / "two_g071.toml").read_text(), "no device named a, b"),
        (boards_text(PROBES, mcu_b="STM32F446RE"), "device b is a STM32F446RE"),
        (boards_text(PROBES, baud=921600), "link baud is 921600"),
        (
            boards_text(PROBES).replace("baud = 115200", "baud = 115200\nboard_baud = 2000000"),
            "link a-b runs at 2000000 baud, but the firmware in",
        ),
    ],
    ids=["names", "part", "baud", "board_baud"],
)
def test_boards_file_mismatch(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    boards = tmp_path / "other.toml"
    boards.write_text(text)
    line = one_line_error(*flash([str(compiled), "-t", str(boards), "--dry-run"], capsys)[::2])
    assert message in line and "splitter compile" in line
