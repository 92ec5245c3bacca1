"""Exact command lines of `splitter flash` (no hardware here) and its clear errors."""

from pathlib import Path

import pytest

from splitter.deploy.flash import FlashTarget, check_probes, choose_tool, command_line, flash_all
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
