"""``splitter build OUT``: make every device's firmware, compare the ELF with the estimates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from splitter.cli.options import allow_edited_option, out_argument
from splitter.cli.progress import Progress
from splitter.errors import ToolchainError
from splitter.outputs import errors_named_in, staged_copy, verify_output
from splitter.toolchain.build import (
    DeviceBuild,
    build_all,
    build_emulator_variants,
    check,
    check_output,
)


@click.command("build")
@out_argument
@click.option(
    "--emulator/--no-emulator",
    default=None,
    help="Also build the QEMU (EMULATOR=1) variant used by `splitter emulate` [default: where "
    "the firmware fits the emulated part; --emulator makes a misfit an error].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the sizes as JSON.")
@allow_edited_option
def command(out: Path, emulator: bool | None, as_json: bool, allow_edited: bool) -> None:
    """Build the firmware of every device of OUT with arm-none-eabi-gcc."""
    verify_output(out, allow_edited=allow_edited)
    check_output(out)  # named in OUT, before the staged copy is made
    variants: dict[str, str | None] = {}
    with Progress() as progress, staged_copy(out) as stage, errors_named_in(stage, out):
        builds = build_all(
            stage,
            emulator=False,
            on_device=lambda d: progress.step(f"building {d}"),
            debug_root=out.absolute(),
        )
        if emulator is not False:
            variants = build_emulator_variants(
                stage,
                on_device=lambda d: progress.step(f"building {d} (emulator variant)"),
                debug_root=out.absolute(),
            )
    builds = [replace(b, elf=out / b.elf.relative_to(stage)) for b in builds]
    real = str(out.absolute())  # the variants' reasons name OUT, not its staged copy
    variants = {
        d: None if why is None else why.replace(str(stage), real) for d, why in variants.items()
    }
    for b in builds:
        check(b)
    missing = {d: why for d, why in variants.items() if why is not None}
    if emulator and missing:
        why = next(iter(missing.values()))
        raise ToolchainError(
            f"{why}; the part firmware of every device was built; "
            "`splitter build --no-emulator` builds only that"
        )
    if as_json:
        click.echo(json.dumps(build_json(builds, variants)))
        return
    Console(width=max(Console().width, 150)).print(build_table(builds))
    click.echo(f"built {len(builds)} device(s); weights and arena equal the plan's estimates")
    for device, why in missing.items():
        click.echo(
            f"note: emulator variant of {device} not built: {why} "
            "(only `splitter emulate` / `--emulate` need it; --no-emulator skips it)",
            err=True,
        )


def build_json(builds: list[DeviceBuild], variants: dict[str, str | None]) -> dict[str, Any]:
    """``{"devices": [...]}``: per device the sizes, the ELF and its emulator variant."""
    return {
        "devices": [
            {
                "device": b.device,
                "part": b.part,
                "elf": str(b.elf),
                "weights_estimate": b.weights_estimate,
                "weights_actual": b.weights_actual,
                "arena_estimate": b.arena_estimate,
                "arena_actual": b.arena_actual,
                "code_bytes": b.code_bytes,
                "runtime_ram_bytes": b.runtime_ram_bytes,
                "flash_total": b.flash_total,
                "flash_capacity": b.flash_capacity,
                "ram_total": b.ram_total,
                "ram_capacity": b.ram_capacity,
                "emulator": (
                    "skipped" if b.device not in variants
                    else "built" if variants[b.device] is None
                    else f"not built: {variants[b.device]}"
                ),
            }
            for b in builds
        ]
    }  # fmt: skip


def build_table(builds: list[DeviceBuild]) -> Table:
    """Estimated vs actual flash (weights, code) and RAM (arena, runtime) against the budgets
    of the boards file (the part's size when the plan has none)."""
    table = Table(title="firmware sizes (bytes)")
    for col in (
        "device",
        "part",
        "flash est.",
        "flash (.weights)",
        "code est.",
        "code",
        "flash total / budget",
        "RAM est.",
        "RAM (.arena)",
        "runtime est.",
        "data+bss+stack",
        "RAM total / budget",
    ):
        table.add_column(col, justify="left" if col in ("device", "part") else "right")
    for b in builds:
        table.add_row(
            b.device,
            b.part,
            str(b.weights_estimate),
            str(b.weights_actual),
            str(b.code_estimate or "-"),
            str(b.code_bytes),
            f"{b.flash_total} / {b.flash_budget or b.flash_capacity}",
            str(b.arena_estimate),
            str(b.arena_actual),
            str(b.runtime_ram_estimate or "-"),
            str(b.runtime_ram_bytes),
            f"{b.ram_total} / {b.ram_budget or b.ram_capacity}",
        )
    return table
