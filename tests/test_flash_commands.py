"""Exact command lines of `splitter flash` (no hardware here) and its clear errors."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from splitter.deploy.flash import (
    EXTFLASH_TOOLS,
    ExtFlashImage,
    FlashTarget,
    check_probes,
    choose_tool,
    command_line,
    cubeprog_loader_path,
    flash_all,
)
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


F746 = FlashTarget(
    "d", "STM32F746NG", "0668FF", Path("fw/d/d.elf"), Path("fw/d/d.bin"), family="F7",
    extflash=ExtFlashImage("QUADSPI", 0x9000_0000, 1869344, "board/stm32f746g-disco.cfg",
                           "N25Q128A_STM32F746G-DISCO.stldr"),
)  # fmt: skip


def test_openocd_programs_external_flash_through_the_board_script() -> None:
    """The board script sets QUADSPI 1 (stmqspi bank at 0x90000000, its reset-init maps the
    flash); `program` writes the ELF's .extflash section into that bank."""
    assert command_line("openocd", F746) == [
        "openocd", "-f", "board/stm32f746g-disco.cfg", "-c", "adapter serial 0668FF",
        "-c", "program fw/d/d.elf verify reset exit",
    ]  # fmt: skip


def test_cubeprog_programs_external_flash_with_the_board_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-el names the loader in bin/ExternalLoader next to the CLI (symlinks resolved)."""
    bin_dir = tmp_path / "STM32CubeProgrammer" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "STM32_Programmer_CLI").write_text("")
    link = tmp_path / "STM32_Programmer_CLI"
    link.symlink_to(bin_dir / "STM32_Programmer_CLI")
    monkeypatch.setattr(
        "splitter.deploy.flash.shutil.which",
        lambda exe: str(link) if exe == "STM32_Programmer_CLI" else None,
    )
    loader = bin_dir / "ExternalLoader" / "N25Q128A_STM32F746G-DISCO.stldr"
    assert command_line("cubeprog", F746) == [
        "STM32_Programmer_CLI", "-c", "port=SWD", "sn=0668FF", "-el", str(loader),
        "-w", "fw/d/d.elf", "-v", "-rst",
    ]  # fmt: skip
    assert cubeprog_loader_path("X.stldr", which=lambda exe: None) == (
        "STM32CubeProgrammer/bin/ExternalLoader/X.stldr"
    )


@pytest.mark.parametrize("tool", ["st-flash", "pyocd", "stm32flash"])
def test_internal_only_tools_refuse_external_flash(tool: str) -> None:
    with pytest.raises(ToolchainError) as info:
        command_line(tool, replace(F746, port="/dev/ttyUSB0"))
    msg = str(info.value)
    assert "device d: its weights (1869344 B) go to the external flash QUADSPI at 0x90000000" in msg
    assert "use --tool openocd or --tool cubeprog" in msg and "\n" not in msg


def test_external_flash_of_an_unknown_board_is_refused() -> None:
    """segment --extflash on a board the catalog gives no external flash: no known setup."""
    unknown = replace(F746, extflash=ExtFlashImage("QSPI", 0x9000_0000, 100))
    with pytest.raises(ToolchainError, match="knows no openocd setup"):
        command_line("openocd", unknown)
    with pytest.raises(ToolchainError, match="knows no STM32_Programmer_CLI setup"):
        command_line("cubeprog", unknown)


def test_auto_for_external_flash_skips_st_flash() -> None:
    everything = lambda exe: "/usr/bin/x"  # noqa: E731
    assert choose_tool(None, which=everything) == "st-flash"
    assert choose_tool(None, which=everything, auto=EXTFLASH_TOOLS) == "openocd"
    with pytest.raises(ToolchainError, match="no tool that programs external flash"):
        choose_tool(None, which=lambda exe: "/x" if exe == "st-flash" else None,
                    auto=EXTFLASH_TOOLS)  # fmt: skip
