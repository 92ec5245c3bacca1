"""Flash every device of a compiled plan with the probe tool the user has.

The command lines are the documented ones of each tool (no hardware is attached in CI, so the tests
check the exact lines):

* ``st-flash`` (stlink-tools): ``st-flash --serial SN --reset write FW.bin 0x08000000`` writes and
  verifies (it reads the flash back after writing);
* ``openocd``: ``openocd -f interface/stlink.cfg -c "adapter serial SN" -f target/<family>.cfg
  -c "program FW.elf verify reset exit"`` (``program ... verify`` compares the flash with the ELF);
* ``cubeprog`` (STM32CubeProgrammer): ``STM32_Programmer_CLI -c port=SWD sn=SN -w FW.elf -v -rst``
  (``-v`` verifies).

A probe serial number per device comes from ``probe = "..."`` in boards.toml; with more than one
device each device must name its probe, otherwise the boards would be flashed in a random order.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from splitter.errors import ToolchainError

#: tool name -> executable
TOOLS: dict[str, str] = {
    "st-flash": "st-flash",
    "openocd": "openocd",
    "cubeprog": "STM32_Programmer_CLI",
}

#: how to get each tool (Debian packages where they exist)
INSTALL_HINTS: dict[str, str] = {
    "st-flash": "apt-get install --no-install-recommends stlink-tools",
    "openocd": "apt-get install --no-install-recommends openocd",
    "cubeprog": "install STM32CubeProgrammer from st.com and put STM32_Programmer_CLI on PATH",
}

#: part-name prefix -> OpenOCD target configuration (files shipped by the openocd package)
OPENOCD_TARGETS: dict[str, str] = {
    "STM32F0": "target/stm32f0x.cfg",
    "STM32F1": "target/stm32f1x.cfg",
    "STM32F2": "target/stm32f2x.cfg",
    "STM32F4": "target/stm32f4x.cfg",
    "STM32F7": "target/stm32f7x.cfg",
    "STM32G0": "target/stm32g0x.cfg",
    "STM32G4": "target/stm32g4x.cfg",
    "STM32H7": "target/stm32h7x.cfg",
    "STM32L0": "target/stm32l0.cfg",
    "STM32L4": "target/stm32l4x.cfg",
}


@dataclass(frozen=True)
class FlashTarget:
    """One device to flash: its name, part, probe serial and firmware images."""

    device: str
    mcu: str
    probe: str | None
    elf: Path
    binary: Path
    flash_origin: int = 0x0800_0000


def openocd_target(mcu: str, device: str) -> str:
    """The OpenOCD target script for a part, by family prefix (``STM32F4`` -> stm32f4x.cfg)."""
    for prefix, cfg in OPENOCD_TARGETS.items():
        if mcu.upper().startswith(prefix):
            return cfg
    raise ToolchainError(
        f"device {device}: no OpenOCD target known for part {mcu}; "
        "use --tool st-flash or --tool cubeprog"
    )


def command_line(tool: str, target: FlashTarget) -> list[str]:
    """The exact command that writes and verifies ``target`` with ``tool``."""
    if tool == "st-flash":
        cmd = ["st-flash"]
        if target.probe:
            cmd += ["--serial", target.probe]
        return [*cmd, "--reset", "write", str(target.binary), f"0x{target.flash_origin:08x}"]
    if tool == "openocd":
        cmd = ["openocd", "-f", "interface/stlink.cfg"]
        if target.probe:
            cmd += ["-c", f"adapter serial {target.probe}"]
        cfg = openocd_target(target.mcu, target.device)
        return [*cmd, "-f", cfg, "-c", f"program {target.elf} verify reset exit"]
    if tool == "cubeprog":
        connect = "port=SWD" + (f" sn={target.probe}" if target.probe else "")
        return [
            "STM32_Programmer_CLI",
            "-c",
            *connect.split(" "),
            "-w",
            str(target.elf),
            "-v",
            "-rst",
        ]
    raise ToolchainError(f"unknown flash tool '{tool}'; choose one of {', '.join(TOOLS)}")


def choose_tool(requested: str | None, which: Callable[[str], str | None] = shutil.which) -> str:
    """The requested tool if installed, else the first installed one of :data:`TOOLS`."""
    if requested is not None:
        if requested not in TOOLS:
            raise ToolchainError(
                f"unknown flash tool '{requested}'; choose one of {', '.join(TOOLS)}"
            )
        if which(TOOLS[requested]) is None:
            raise ToolchainError(
                f"{TOOLS[requested]} not found on PATH; install it: {INSTALL_HINTS[requested]}"
            )
        return requested
    for tool, exe in TOOLS.items():
        if which(exe) is not None:
            return tool
    raise ToolchainError(
        "no flash tool found (st-flash, openocd or STM32_Programmer_CLI); install one, e.g. "
        f"{INSTALL_HINTS['st-flash']}"
    )


def check_probes(targets: Sequence[FlashTarget], boards_file: str) -> None:
    """With several devices every one needs ``probe = "SERIAL"`` in the boards file."""
    if len(targets) < 2:
        return
    missing = [t.device for t in targets if not t.probe]
    if missing:
        raise ToolchainError(
            f"{boards_file}: device(s) {', '.join(missing)} have no probe; add "
            'probe = "<ST-LINK serial>" to each [[device]] (list probes with `st-info --probe`)'
        )


def flash_all(
    targets: Sequence[FlashTarget],
    tool: str,
    *,
    dry_run: bool = False,
    run: Callable[[list[str]], int] | None = None,
) -> list[list[str]]:
    """Flash and verify every target in order; returns the command lines (run unless dry)."""
    commands = [command_line(tool, t) for t in targets]
    if dry_run:
        return commands
    runner = run or _run
    for target, cmd in zip(targets, commands, strict=True):
        for image in (target.elf, target.binary):
            if not image.is_file():
                raise ToolchainError(
                    f"device {target.device}: firmware {image} missing; run `splitter build`"
                )
        if runner(cmd) != 0:
            raise ToolchainError(
                f"device {target.device}: flashing with {tool} failed (command: {' '.join(cmd)}); "
                "check the probe is connected and its serial number"
            )
    return commands


def _run(cmd: list[str]) -> int:
    return subprocess.run(cmd, check=False).returncode
