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

External flash (a segmented ``OUT`` whose weights the board's memory-mapped QUADSPI flash holds,
``splitter segment`` on a catalog board with ``[boards.NAME.extflash]``): the ELF's ``.extflash``
section is at the flash window's address, so the tools that can program it write it with the
rest of the ELF, verified the same way:

* ``openocd -f board/stm32f746g-disco.cfg -c "program FW.elf verify reset exit"``: the board's
  script (the catalog's ``openocd_board``) sets ``QUADSPI 1``, so the target script declares the
  ``stmqspi`` flash bank at 0x90000000, and its ``reset-init`` handler clocks the QUADSPI pins
  and maps the flash (``program`` resets with ``reset init`` first);
* ``STM32_Programmer_CLI -c port=SWD -el LOADER -w FW.elf -v -rst``: ``-el`` names the board's
  external loader (the catalog's ``cubeprog_loader``, shipped in STM32CubeProgrammer's
  ``bin/ExternalLoader``), which writes the sections in the external range;
* ``st-flash``, ``pyocd`` and ``stm32flash`` write internal flash only: refused, naming the two
  that can. ``--tool auto`` takes the first installed of openocd and cubeprog.

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
#: what ``--tool auto`` looks for when a device's weights go to external flash
EXTFLASH_TOOLS = ("openocd", "cubeprog")
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
class ExtFlashImage:
    """The part of a device's ELF in its board's external flash (section ``.extflash``): the
    window, the weights' bytes, and how the tools reach the flash (None when the board is not in
    the catalog with an external flash, e.g. ``segment --extflash`` on another board)."""

    name: str
    origin: int
    bytes: int
    openocd_board: str | None = None
    cubeprog_loader: str | None = None  # the loader file's name (bin/ExternalLoader/...)


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
    extflash: ExtFlashImage | None = field(default=None, kw_only=True)


def cubeprog_loader_path(name: str, which: Callable[[str], str | None] | None = None) -> str:
    """STM32CubeProgrammer's external loader ``name``: in ``bin/ExternalLoader`` next to
    ``STM32_Programmer_CLI`` (its installation layout); the path with ``STM32CubeProgrammer``
    spelt out when the tool is not installed (a dry run)."""
    exe = (which or shutil.which)(TOOLS["cubeprog"])
    if exe is None:
        return f"STM32CubeProgrammer/bin/ExternalLoader/{name}"
    return str(Path(exe).resolve().parent / "ExternalLoader" / name)


def check_extflash(targets: Sequence[FlashTarget], tool: str) -> None:
    """A device whose weights go to external flash needs a tool that programs it (and knows
    how on its board): ToolchainError naming the device, the flash and the fix otherwise."""
    for t in targets:
        ext = t.extflash
        if ext is None:
            continue
        where = f"device {t.device}: its weights ({ext.bytes} B) go to the external flash " + (
            f"{ext.name} at 0x{ext.origin:08X}"
        )
        if tool not in EXTFLASH_TOOLS:
            raise ToolchainError(
                f"{where}, which {TOOLS[tool]} cannot program; "
                "use --tool openocd or --tool cubeprog"
            )
        known = ext.openocd_board if tool == "openocd" else ext.cubeprog_loader
        if not known:
            raise ToolchainError(
                f"{where}, and its board is not a catalog board with external flash, so splitter "
                f"knows no {TOOLS[tool]} setup for it; use a board of splitter/hardware/"
                "board_catalog.toml with [extflash], or program section .extflash yourself"
            )


def command_line(tool: str, target: FlashTarget) -> list[str]:
    """The exact command that writes and verifies ``target`` with ``tool``."""
    ext = target.extflash
    if ext is not None and tool in TOOLS:
        check_extflash([target], tool)
    if tool == "st-flash":
        cmd = ["st-flash"]
        if target.probe:
            cmd += ["--serial", target.probe]
        return [*cmd, "--reset", "write", str(target.binary), f"0x{target.flash_origin:08x}"]
    if tool == "openocd":
        if ext is not None and ext.openocd_board:  # the board script: stmqspi bank, QSPI init
            cmd = ["openocd", "-f", ext.openocd_board]
            if target.probe:
                cmd += ["-c", f"adapter serial {target.probe}"]
            return [*cmd, "-c", f"program {target.elf} verify reset exit"]
        cmd = ["openocd", "-f", "interface/stlink.cfg"]
        if target.probe:
            cmd += ["-c", f"adapter serial {target.probe}"]
        cfg = family_for(target.family).openocd_target
        return [*cmd, "-f", cfg, "-c", f"program {target.elf} verify reset exit"]
    if tool == "cubeprog":
        connect = "port=SWD" + (f" sn={target.probe}" if target.probe else "")
        loader = []
        if ext is not None and ext.cubeprog_loader:
            loader = ["-el", cubeprog_loader_path(ext.cubeprog_loader)]
        return [
            "STM32_Programmer_CLI",
            "-c",
            *connect.split(" "),
            *loader,
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


def choose_tool(
    requested: str | None,
    which: Callable[[str], str | None] = shutil.which,
    auto: Sequence[str] = AUTO_TOOLS,
) -> str:
    """The requested tool if installed, else the first installed one of ``auto``
    (:data:`AUTO_TOOLS`; :data:`EXTFLASH_TOOLS` when external flash is to be programmed)."""
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
    for tool in auto:
        if installed(tool, which):
            return tool
    if tuple(auto) == EXTFLASH_TOOLS:
        raise ToolchainError(
            "no tool that programs external flash found (openocd or STM32_Programmer_CLI); "
            f"install one, e.g. {INSTALL_HINTS['openocd']}"
        )
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
