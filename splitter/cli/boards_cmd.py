"""``splitter boards``: the boards ``board = "..."`` accepts, with their part and wiring.

The listing is :func:`splitter.hardware.board_catalog.board_listing`; this module only renders.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from splitter.hardware.board_catalog import board_listing


@click.command("boards")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def command(as_json: bool) -> None:
    """List the known boards (names match in any case): part, core, ST-LINK, USARTs, HSE."""
    rows = board_listing()
    if as_json:
        click.echo(json.dumps({"boards": rows}, indent=1))
        return
    table = Table(title=f'{len(rows)} boards (board = "<name>" in a boards.toml device table)')
    for col in ("board", "part", "core", "ST-LINK (max host baud)", "USARTs (VCP first)", "HSE"):
        table.add_column(col)
    for r in rows:
        aliases = f" (also {', '.join(r['aliases'])})" if r["aliases"] else ""
        table.add_row(
            f"{r['name']}{aliases}",
            str(r["part"]),
            str(r["core"]),
            f"{r['stlink']} ({r['max_host_baud']})",
            ", ".join(r["usarts"]),
            str(r["hse"] or "internal (HSI)"),
        )
    Console(width=max(Console().width, 120)).print(table)
