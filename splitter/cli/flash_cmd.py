"""``splitter flash OUT``: build each device's firmware, then write and verify it over its probe."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import click

from splitter.cli.options import allow_edited_option, out_argument
from splitter.cli.progress import Progress
from splitter.deploy.flash import (
    AUTO_TOOLS,
    EXTFLASH_TOOLS,
    TOOLS,
    UART_TOOLS,
    FlashTarget,
    check_extflash,
    check_probes,
    choose_tool,
    flash_all,
)
from splitter.deploy.pyocd_flash import needs_pack
from splitter.deploy.targets import FlashJob, load_job
from splitter.errors import ToolchainError
from splitter.outputs import errors_named_in, staged_copy, verify_output
from splitter.toolchain.build import build_all, check

#: --tool values: a tool name of :data:`TOOLS` or its executable's name, or ``auto``.
TOOL_CHOICES: tuple[str, ...] = (
    "auto",
    *TOOLS,
    *(exe for exe in TOOLS.values() if exe not in TOOLS),
)

#: the tool shown by ``--dry-run --tool auto`` when no tool is installed
DRY_RUN_DEFAULT = "st-flash"


@click.command("flash")
@out_argument
@click.option(
    "--target",
    "-t",
    default=None,
    metavar="BOARDS.toml",
    help="Board file with each device's probe serial [the one OUT was compiled with].",
)
@click.option(
    "--tool",
    type=click.Choice(TOOL_CHOICES),
    default="auto",
    show_default=True,
    help="Flashing tool; auto takes the first installed of st-flash, openocd, cubeprog; pyocd "
    "(Python API) and stm32flash (UART bootloader, needs each device's port) when asked for.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the commands without building or flashing (the images they name are those "
    "`splitter build OUT` makes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the commands and results as JSON.")
@allow_edited_option
def command(
    out: Path, target: str | None, tool: str, dry_run: bool, as_json: bool, allow_edited: bool
) -> None:
    """Build the firmware of every device of OUT and flash it, verified, through its probe."""
    verify_output(out, allow_edited=allow_edited)
    job = load_job(out, target)
    requested = tool_name(tool)
    ext = any(t.extflash is not None for t in job.targets)
    if dry_run:
        chosen = _dry_run_tool(requested, ext)
        _warn_missing_probes(job, chosen)
    else:
        chosen = choose_tool(requested, auto=EXTFLASH_TOOLS if ext else AUTO_TOOLS)
        check_probes(job.targets, str(job.boards_path), chosen)  # before the build
    check_extflash(job.targets, chosen)
    with Progress() as progress:
        if not dry_run:  # a dry run shows the commands; it neither builds nor flashes
            _build(job, progress)
            progress.step(f"flashing with {chosen}")
        run = _run_quiet if as_json else _run_echoed
        commands = flash_all(job.targets, chosen, dry_run=dry_run, run=run)
    if as_json:
        click.echo(json.dumps(flash_json(job, chosen, commands, dry_run)))
        return
    if dry_run:
        for flash_target, cmd in zip(job.targets, commands, strict=True):
            click.echo(f"# {_describe(flash_target, chosen)}")
            click.echo(shlex.join(cmd))
        return
    click.echo(f"flashed and verified {len(commands)} device(s) with {chosen}")


def flash_json(
    job: FlashJob, tool: str, commands: list[list[str]], dry_run: bool
) -> dict[str, object]:
    """The ``--json`` object (docs/cli-json.md)."""
    return {
        "tool": tool,
        "dry_run": dry_run,
        "devices": [
            {
                "device": t.device,
                "mcu": t.mcu,
                "probe": t.probe or None,
                "command": cmd,
                **_extflash_json(t),
            }
            for t, cmd in zip(job.targets, commands, strict=True)
        ],
        "flashed": 0 if dry_run else len(commands),
    }


def _extflash_json(t: FlashTarget) -> dict[str, object]:
    """``{"extflash": {name, origin, bytes}}`` for a device whose weights go to external flash."""
    ext = t.extflash
    if ext is None:
        return {}
    return {"extflash": {"name": ext.name, "origin": ext.origin, "bytes": ext.bytes}}


def tool_name(choice: str) -> str | None:
    """``None`` for auto, else the :data:`TOOLS` key (``STM32_Programmer_CLI`` -> cubeprog)."""
    if choice == "auto":
        return None
    by_exe = {exe: name for name, exe in TOOLS.items()}
    return by_exe.get(choice, choice)


def _dry_run_tool(requested: str | None, extflash: bool = False) -> str:
    """The requested tool (installed or not), else the installed one, else st-flash's lines
    (openocd's when external flash is to be programmed)."""
    if requested is not None:
        return requested
    try:
        return choose_tool(None, auto=EXTFLASH_TOOLS if extflash else AUTO_TOOLS)
    except ToolchainError as exc:
        default = EXTFLASH_TOOLS[0] if extflash else DRY_RUN_DEFAULT
        click.echo(f"note: {exc}; showing {default} commands", err=True)
        return default


def _warn_missing_probes(job: FlashJob, tool: str) -> None:
    """A dry run still shows the lines, but says what a real run would refuse."""
    try:
        check_probes(job.targets, str(job.boards_path), tool)
    except ToolchainError as exc:
        click.echo(f"warning: {exc}", err=True)


def _build(job: FlashJob, progress: Progress) -> None:
    """``make`` (incremental) every device's part firmware in a staged copy of OUT swapped into
    place (as ``splitter build`` does: OUT is the previous or the complete new output whatever
    kills the process); sizes must match the plan."""
    on_device = lambda d: progress.step(f"building {d}")  # noqa: E731
    out = Path(job.out_dir)
    with staged_copy(out) as stage, errors_named_in(stage, out):
        builds = build_all(stage, emulator=False, on_device=on_device, debug_root=out.absolute())
    for build in builds:
        check(replace(build, elf=out / build.elf.relative_to(stage)))


def _describe(target: FlashTarget, tool: str) -> str:
    if tool in UART_TOOLS:
        return f"{target.device} ({target.mcu}), system bootloader on {target.port} (BOOT0 high)"
    probe = f"probe {target.probe}" if target.probe else "no probe serial (any attached probe)"
    pack = ""
    if tool == "pyocd" and needs_pack(target.mcu):
        pack = f"; needs `pyocd pack install {target.mcu}` once"
    ext = target.extflash
    if ext is not None:
        pack += f"; weights {ext.bytes} B to external flash {ext.name} at 0x{ext.origin:08X}"
    return f"{target.device} ({target.mcu}), {probe}{pack}"


def _run_quiet(cmd: list[str]) -> int:
    """As :func:`_run_echoed`, with the command line and the tool's output on stderr (``--json``
    keeps stdout for the JSON object)."""
    click.echo(f"$ {shlex.join(cmd)}", err=True)
    try:
        return subprocess.run(cmd, check=False, stdout=sys.stderr.fileno()).returncode
    except OSError as exc:
        click.echo(f"{cmd[0]}: {exc.strerror}", err=True)
        return 127
    except ValueError:  # stderr has no file descriptor (captured): keep the tool's output
        return subprocess.run(cmd, check=False, capture_output=True).returncode


def _run_echoed(cmd: list[str]) -> int:
    """Say which command runs, run it with the tool's output on the terminal; its exit code."""
    click.echo(f"$ {shlex.join(cmd)}")
    try:
        return subprocess.run(cmd, check=False).returncode
    except OSError as exc:  # the tool vanished from PATH or is not executable
        click.echo(f"{cmd[0]}: {exc.strerror}", err=True)
        return 127
