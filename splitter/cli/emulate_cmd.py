"""``splitter emulate OUT``: boot one QEMU per device, wired as the plan says, until Ctrl-C."""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from splitter.cli.options import allow_edited_option, out_argument, stop_on_sigterm
from splitter.cli.progress import Progress
from splitter.hardware.qemu import EMULATOR
from splitter.outputs import verify_output
from splitter.toolchain.emulator import Emulation


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
@click.option(
    "--json", "as_json", is_flag=True,
    help="Print the endpoints as one JSON line once the boards are up.",
)  # fmt: skip
@allow_edited_option
def command(
    out: Path, icount: bool, duration: float | None, as_json: bool, allow_edited: bool
) -> None:
    """Boot :data:`~splitter.hardware.qemu.EMULATOR` per device until Ctrl-C or ``duration``."""
    verify_output(out, allow_edited=allow_edited)
    stop_on_sigterm()
    with ExitStack() as stack:
        with Progress() as progress:
            progress.step("booting the emulated boards")
            emu = stack.enter_context(Emulation(out, icount=icount))
        connect = f"splitter run {out} --input X.npy " + " ".join(
            f"--port {name}={url}" for name, url in emu.endpoints.items()
        )
        if as_json:
            click.echo(json.dumps(emulate_json(emu, connect)))
        else:
            click.echo(emu.note)
            for d in emu.devices:
                where = d.endpoint or "(board-to-board links only)"
                click.echo(f"{d.name}: {where} pid={d.process.pid}")
            click.echo("connect with: " + connect)
        sys.stdout.flush()
        click.echo("press Ctrl-C to stop", err=True)
        deadline = None if duration is None else time.monotonic() + duration
        while deadline is None or time.monotonic() < deadline:
            emu.check_alive()
            time.sleep(0.2)


def emulate_json(emu: Emulation, connect: str) -> dict[str, Any]:
    """The ``--json`` object (docs/cli-json.md)."""
    return {
        "note": emu.note,
        "devices": [
            {"device": d.name, "endpoint": d.endpoint or None, "pid": d.process.pid}
            for d in emu.devices
        ],
        "endpoints": dict(emu.endpoints),
        "connect": connect,
    }
