"""Flash every device of a compiled plan with the probe tool the user has.

The command lines are the documented ones of each tool (no hardware is attached in CI, so the tests
check the exact lines):

* ``st-flash`` (stlink-tools): ``st-flash --serial SN --reset write FW.bin 0x08000000`` writes and
  verifies (it reads the flash back after writing);
* ``openocd``: ``openocd -f interface/stlink.cfg -c "adapter serial SN" -f target/<family>.cfg
  -c "program FW.elf verify reset exit"`` (``program ... verify`` compares the flash with the ELF;
  the target script is the part family's ``openocd_target``, ``splitter/hardware/families.py``);
* ``cubeprog`` (STM32CubeProgrammer): ``STM32_Programmer_CLI -c port=SWD sn=SN -w FW.elf -v -rst``
  (``-v`` verifies);
* ``pyocd`` (pyOCD's Python API, a dependency of splitter): ``python -m
  splitter.deploy.pyocd_flash --uid SN --target T --base 0x08000000 FW.elf FW.bin`` connects,
  programs the ELF, reads the flash back against the binary and resets
  (:mod:`splitter.deploy.pyocd_flash`);
* ``stm32flash`` (the ST system bootloader over a UART, no ST-LINK needed; BOOT0 high at reset,
  the port wired to a bootloader USART of the part, ST AN2606; protocol AN3155):
  ``stm32flash -b 115200 -S 0x08000000 -w FW.bin -v -g 0x08000000 PORT`` writes the binary,
  verifies it (``-v``) and starts it (``-g``); ``PORT`` is the device's ``port`` in boards.toml.

A probe serial number per device comes from ``probe = "..."`` in boards.toml; with more than one
device each device must name its probe (``stm32flash``: its ``port``), otherwise the boards
would be flashed in a random order.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from splitter.deploy.pyocd_flash import pyocd_target
from splitter.errors import ToolchainError
from splitter.hardware.families import family_for

#: tool name -> executable
TOOLS: dict[str, str] = {
    "st-flash": "st-flash",
    "openocd": "openocd",
    "cubeprog": "STM32_Programmer_CLI",
    "pyocd": "pyocd",  # the Python package (its API), not an executable
    "stm32flash": "stm32flash",
}
#: tools that talk to the board over its UART (``port``), not a debug probe (``probe``)
UART_TOOLS = ("stm32flash",)
#: what ``--tool auto`` looks for on PATH, in order (pyocd and stm32flash: only when asked)
AUTO_TOOLS = ("st-flash", "openocd", "cubeprog")
#: the system bootloader's baud rate (AN3155: auto-baud, 1200-115200 on every STM32)
BOOTLOADER_BAUD = 115200

#: how to get each tool (Debian packages where they exist)
INSTALL_HINTS: dict[str, str] = {
    "st-flash": "apt-get install --no-install-recommends stlink-tools",
    "openocd": "apt-get install --no-install-recommends openocd",
    "cubeprog": "install STM32CubeProgrammer from st.com and put STM32_Programmer_CLI on PATH",
    "pyocd": "pip install pyocd (a dependency of splitter: reinstall splitter)",
    "stm32flash": "apt-get install --no-install-recommends stm32flash",
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
    port: str | None = field(default=None, kw_only=True)  # serial port, for stm32flash


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
    if tool == "pyocd":
        cmd = [sys.executable, "-m", "splitter.deploy.pyocd_flash"]
        if target.probe:
            cmd += ["--uid", target.probe]
        cmd += ["--target", pyocd_target(target.mcu), "--base", f"0x{target.flash_origin:08x}"]
        return [*cmd, str(target.elf), str(target.binary)]
    if tool == "stm32flash":
        if not target.port:
            raise ToolchainError(
                f"device {target.device}: stm32flash needs the device's serial port; add "
                'port = "/dev/ttyUSB0" (the USB-serial adapter on a bootloader USART) to its '
                "[[device]]"
            )
        origin = f"0x{target.flash_origin:08x}"
        return [
            "stm32flash", "-b", str(BOOTLOADER_BAUD), "-S", origin, "-w", str(target.binary),
            "-v", "-g", origin, target.port,
        ]  # fmt: skip
    raise ToolchainError(f"unknown flash tool '{tool}'; choose one of {', '.join(TOOLS)}")


def installed(tool: str, which: Callable[[str], str | None] = shutil.which) -> bool:
    """Whether ``tool`` can run: pyOCD importable, any other tool's executable on PATH."""
    if tool == "pyocd":
        return importlib.util.find_spec("pyocd") is not None
    return which(TOOLS[tool]) is not None


def choose_tool(requested: str | None, which: Callable[[str], str | None] = shutil.which) -> str:
    """The requested tool if installed, else the first installed one of :data:`AUTO_TOOLS`."""
    if requested is not None:
        if requested not in TOOLS:
            raise ToolchainError(
                f"unknown flash tool '{requested}'; choose one of {', '.join(TOOLS)}"
            )
        if not installed(requested, which):
            where = "in this Python" if requested == "pyocd" else "on PATH"
            raise ToolchainError(
                f"{TOOLS[requested]} not found {where}; install it: {INSTALL_HINTS[requested]}"
            )
        return requested
    for tool in AUTO_TOOLS:
        if installed(tool, which):
            return tool
    raise ToolchainError(
        "no flash tool found (st-flash, openocd or STM32_Programmer_CLI); install one, e.g. "
        f"{INSTALL_HINTS['st-flash']}, or use --tool pyocd (installed with splitter)"
    )


def check_probes(targets: Sequence[FlashTarget], boards_file: str, tool: str = "") -> None:
    """With several devices every one needs ``probe = "SERIAL"`` in the boards file
    (``stm32flash``: every device, even a single one, needs its ``port``)."""
    if tool in UART_TOOLS:
        missing = [t.device for t in targets if not t.port]
        if missing:
            raise ToolchainError(
                f"{boards_file}: device(s) {', '.join(missing)} have no port; add "
                'port = "/dev/ttyUSB0" (a USB-serial adapter on a bootloader USART, AN2606) '
                "to each [[device]]"
            )
        return
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
