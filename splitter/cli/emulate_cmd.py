"""``splitter emulate OUT``: boot one QEMU per device, wired as the plan says, until Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path

import click

from splitter.cli.options import out_argument, stop_on_sigterm
from splitter.hardware.qemu import EMULATOR
from splitter.link.emulator import Emulation


@click.command(
    "emulate",
    help=f"Run the plan's firmware on emulated {EMULATOR.chip} boards ({EMULATOR.title}) "
    "and print the host endpoint(s).",
)
@out_argument
@click.option(
    "--icount/--no-icount",
    default=True,
    show_default=True,
    help="Deterministic instruction-counted time (-icount shift=0).",
)
@click.option(
    "--duration",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Stop after this many seconds (default: until Ctrl-C).",
)
def command(out: Path, icount: bool, duration: float | None) -> None:
    """Boot :data:`~splitter.hardware.qemu.EMULATOR` per device until Ctrl-C or ``duration``."""
    stop_on_sigterm()
    with Emulation(out, icount=icount) as emu:
        click.echo(emu.note)
        for d in emu.devices:
            where = d.endpoint or "(board-to-board links only)"
            click.echo(f"{d.name}: {where} pid={d.process.pid}")
        click.echo(
            "connect with: splitter run "
            + str(out)
            + " --input X.npy "
            + " ".join(f"--port {name}={url}" for name, url in emu.endpoints.items()),
            nl=True,
        )
        click.echo("press Ctrl-C to stop", err=True)
        deadline = None if duration is None else time.monotonic() + duration
        while deadline is None or time.monotonic() < deadline:
            emu.check_alive()
            time.sleep(0.2)
