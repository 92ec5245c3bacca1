"""``splitter build OUT``: make every device's firmware, compare the ELF with the estimates."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from splitter.cli.options import out_argument
from splitter.link.build import DeviceBuild, build_all, check


@click.command("build")
@out_argument
@click.option(
    "--emulator/--no-emulator",
    default=True,
    show_default=True,
    help="Also build the QEMU (EMULATOR=1) variant used by `splitter emulate`.",
)
def command(out: Path, emulator: bool) -> None:
    """Build the firmware of every device of OUT with arm-none-eabi-gcc."""
    builds = build_all(out, emulator=emulator)
    Console(width=max(Console().width, 150)).print(build_table(builds))
    for b in builds:
        check(b)
    click.echo(f"built {len(builds)} device(s); weights and arena equal the plan's estimates")


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
