"""Exact command lines of `splitter flash` (no hardware here) and its clear errors."""

import sys
from pathlib import Path

import pytest

from splitter.deploy.flash import FlashTarget, check_probes, choose_tool, command_line, flash_all
from splitter.deploy.pyocd_flash import main as pyocd_main
from splitter.deploy.pyocd_flash import needs_pack
from splitter.errors import ToolchainError

F4 = FlashTarget("a", "STM32F446RE", "066DFF3", Path("fw/a/a.elf"), Path("fw/a/a.bin"), family="F4")
H7 = FlashTarget("b", "STM32H743ZI", "0670FF5", Path("fw/b/b.elf"), Path("fw/b/b.bin"), family="H7")


def test_st_flash_line() -> None:
    assert command_line("st-flash", F4) == [
        "st-flash",
        "--serial",
        "066DFF3",
        "--reset",
        "write",
        "fw/a/a.bin",
        "0x08000000",
    ]


def test_openocd_line_uses_family_target() -> None:
    assert command_line("openocd", H7) == [
        "openocd",
        "-f",
        "interface/stlink.cfg",
        "-c",
        "adapter serial 0670FF5",
        "-f",
        "target/stm32h7x.cfg",
        "-c",
        "program fw/b/b.elf verify reset exit",
    ]


def test_cubeprog_line() -> None:
    assert command_line("cubeprog", F4) == [
        "STM32_Programmer_CLI",
        "-c",
        "port=SWD",
        "sn=066DFF3",
        "-w",
        "fw/a/a.elf",
        "-v",
        "-rst",
    ]


def test_no_tool_found_names_install_command() -> None:
    with pytest.raises(ToolchainError, match="apt-get install --no-install-recommends stlink"):
        choose_tool(None, which=lambda exe: None)


def test_requested_tool_missing() -> None:
    with pytest.raises(ToolchainError, match="openocd not found"):
        choose_tool("openocd", which=lambda exe: None)


def test_first_installed_tool_is_chosen() -> None:
    assert choose_tool(None, which=lambda exe: "/usr/bin/x" if exe == "openocd" else None) == (
        "openocd"
    )


def test_missing_probe_with_several_devices() -> None:
    no_probe = FlashTarget("c", "STM32L4R5ZI", None, Path("c.elf"), Path("c.bin"), family="L4")
    with pytest.raises(ToolchainError, match=r"boards.toml: device\(s\) c have no probe"):
        check_probes([F4, no_probe], "boards.toml")
    check_probes([no_probe], "boards.toml")  # a single board needs no serial


def test_flash_all_runs_in_order_and_stops_on_failure(tmp_path: Path) -> None:
    targets = []
    for t in (F4, H7):
        elf, binary = tmp_path / f"{t.device}.elf", tmp_path / f"{t.device}.bin"
        elf.write_bytes(b"\x7fELF")
        binary.write_bytes(b"\0")
        targets.append(FlashTarget(t.device, t.mcu, t.probe, elf, binary, family=t.family))
    ran: list[list[str]] = []
    flash_all(targets, "st-flash", run=lambda cmd: ran.append(cmd) or 0)
    assert [cmd[2] for cmd in ran] == ["066DFF3", "0670FF5"]
    with pytest.raises(ToolchainError, match="device a: flashing with st-flash failed"):
        flash_all(targets, "st-flash", run=lambda cmd: 1)


def test_missing_firmware_says_build() -> None:
    with pytest.raises(ToolchainError, match="run `splitter build`"):
        flash_all([F4], "st-flash", run=lambda cmd: 0)


L4 = FlashTarget(
    "c",
    "STM32L4R5ZI",
    None,
    Path("fw/c/c.elf"),
    Path("fw/c/c.bin"),
    family="L4",
    port="/dev/ttyUSB0",
)


def test_pyocd_line_runs_the_api_module_with_a_target_pyocd_knows() -> None:
    """The H743 has a pyOCD built-in target; the line is the API module's (pyocd_flash.py)."""
    from pyocd.target import TARGET

    cmd = command_line("pyocd", H7)
    assert cmd == [
        sys.executable, "-m", "splitter.deploy.pyocd_flash", "--uid", "0670FF5",
        "--target", "stm32h743xx", "--base", "0x08000000", "fw/b/b.elf", "fw/b/b.bin",
    ]  # fmt: skip
    assert cmd[cmd.index("--target") + 1] in TARGET  # a real pyOCD built-in target name
    assert command_line("pyocd", L4)[3:5] == ["--target", "stm32l4r5zitx"]  # from its pack
    assert needs_pack("STM32L4R5ZI") and not needs_pack("STM32H743ZI")


def test_pyocd_module_reports_a_missing_probe_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API module with no probe attached: exit 1, one line naming the target."""
    elf, binary = tmp_path / "f.elf", tmp_path / "f.bin"
    elf.write_bytes(b"\x7fELF")
    binary.write_bytes(b"\0")
    args = ["--uid", "NOPROBE", "--target", "stm32h743xx", "--base", "0x08000000"]
    assert pyocd_main([*args, str(elf), str(binary)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pyocd: stm32h743xx: ")


def test_stm32flash_line_uses_the_uart_bootloader() -> None:
    """AN3155 bootloader at 115200 on the device's port: write the binary, verify, go."""
    assert command_line("stm32flash", L4) == [
        "stm32flash", "-b", "115200", "-S", "0x08000000", "-w", "fw/c/c.bin", "-v",
        "-g", "0x08000000", "/dev/ttyUSB0",
    ]  # fmt: skip
    with pytest.raises(ToolchainError, match="device a: stm32flash needs the device's serial port"):
        command_line("stm32flash", F4)
    with pytest.raises(ToolchainError, match=r"boards.toml: device\(s\) a have no port"):
        check_probes([F4, L4], "boards.toml", "stm32flash")
    check_probes([L4], "boards.toml", "stm32flash")


def test_auto_never_picks_pyocd_or_stm32flash() -> None:
    assert choose_tool("pyocd") == "pyocd"  # installed with splitter
    with pytest.raises(ToolchainError, match="or use --tool pyocd"):
        choose_tool(None, which=lambda exe: None)
    with pytest.raises(ToolchainError, match="stm32flash not found on PATH"):
        choose_tool("stm32flash", which=lambda exe: None)
