"""Flash every device of a compiled plan with the probe tool the user has.

The command lines are the documented ones of each tool (no hardware is attached in CI, so the tests
check the exact lines):

* ``st-flash`` (stlink-tools): ``st-flash --serial SN --reset write FW.bin 0x08000000`` writes and
  verifies (it reads the flash back after writing);
* ``openocd``: ``openocd -f interface/stlink.cfg -c "adapter serial SN" -f target/<family>.cfg
  -c "program FW.elf verify reset exit"`` (``program ... verify`` compares the flash with the ELF;
  the target script is the part family's ``openocd_target``, ``splitter/hardware/families.py``);
* ``cubeprog`` (STM32CubeProgrammer): ``STM32_Programmer_CLI -c port=SWD sn=SN -w FW.elf -v -rst``
  (``-v`` verifies).

A probe serial number per device comes from ``probe = "..."`` in boards.toml; with more than one
device each device must name its probe, otherwise the boards would be flashed in a random order.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from splitter.errors import ToolchainError
from splitter.hardware.families import family_for

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


@dataclass(frozen=True)
class FlashTarget:
    """One device to flash: its name, part, probe serial, firmware images and part family."""

    device: str
    mcu: str
    probe: str | None
    elf: Path
    binary: Path
    flash_origin: int = 0x0800_0000
    family: str = field(kw_only=True)  # a key of splitter.hardware.families.FAMILIES


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
        cfg = family_for(target.family).openocd_target
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
