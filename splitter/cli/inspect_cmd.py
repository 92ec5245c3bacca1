"""``splitter inspect MODEL``: the per-layer FLASH / RAM / MAC / output-bytes table and totals."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from splitter.cli.options import activation_bytes_option, granularity_option, input_shape_option
from splitter.cli.progress import Progress
from splitter.cost.layer_table import (
    chain_report,
    partial_report,
    report_csv,
    shape_text,
)
from splitter.importers import load_chain
from splitter.ir import Chain


@click.command("inspect")
@click.argument("model", metavar="MODEL")
@input_shape_option
@activation_bytes_option
@granularity_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
def command(
    model: str,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
    granularity: str,
    fmt: str,
    as_json: bool,
) -> None:
    """Show MODEL (ONNX, TFLite, or a CSV/JSON layer profile, FILE.json#name) as a layer chain."""
    with Progress() as progress:
        progress.step(f"importing {model}")
        chain = load_chain(
            model,
            input_shapes=input_shapes or None,
            activation_bytes=activation_bytes,
            granularity=granularity,
        )
    if fmt == "json" or as_json:
        doc = chain_report(chain)
        doc["partial_execution"] = partial_report(chain, activation_bytes)
        click.echo(json.dumps(doc, indent=2))
    elif fmt == "csv":
        click.echo(report_csv(chain), nl=False)
    else:
        console = Console()
        if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
            console = Console(width=200)
        console.print(render_table(chain))
        pex = partial_report(chain, activation_bytes)
        if pex is not None:
            console.print(
                f"peak activation memory {pex['ordinary_peak_bytes']:,} B run op by op; "
                f"{pex['peak_bytes']:,} B with partial execution "
                f"({_loop_counts(pex['loops'])}, PEX; zero extra MACs)"
            )
            if "int8_peak_bytes" in pex:
                console.print(
                    f"from the int8 input on (what a full-integer model holds): "
                    f"{pex['int8_ordinary_peak_bytes']:,} B run op by op; "
                    f"{pex['int8_peak_bytes']:,} B with partial execution"
                )
    meta = chain.graph.metadata if chain.graph else {}
    if "upgraded_from_opset" in meta:  # on stderr: --format json / csv stay machine-readable
        click.echo(
            f"note: {model}: opset {meta['upgraded_from_opset']} upgraded on load to opset "
            f"{meta['opset']} with onnx.version_converter",
            err=True,
        )


def _loop_counts(loops: list[dict[str, object]]) -> str:
    """``3 channel loop(s), 13 row loop(s)`` (``0 channel loop(s)`` when there is none)."""
    kinds = [str(lp.get("by", "channel")) for lp in loops]
    parts = [f"{kinds.count(k)} {k} loop(s)" for k in ("channel", "row") if k in kinds]
    return ", ".join(parts) or "0 channel loop(s)"


def render_table(chain: Chain) -> Table:
    """The rich table of :func:`splitter.cost.layer_table.chain_report` with a totals footer."""
    report = chain_report(chain)
    totals = report["totals"]
    table = Table(title=f"{chain.name}: {totals['layers']} layers", show_footer=True)
    numeric = {"FLASH": "flash_bytes", "RAM": "ram_bytes", "MACs": "macs", "out bytes": "out_bytes"}
    table.add_column("#", justify="right", footer="total", no_wrap=True)
    for title in ("name", "op", "input", "output"):  # exporters' long names: cut with an ellipsis
        table.add_column(title, no_wrap=True, max_width=60 if title == "name" else None)
    footers = {
        "FLASH": totals["flash_bytes"],
        "RAM": totals["max_ram_bytes"],
        "MACs": totals["macs"],
        "out bytes": None,
    }
    for title in numeric:
        foot = footers[title]
        label = "" if foot is None else (f"max {foot:,}" if title == "RAM" else f"{foot:,}")
        table.add_column(title, justify="right", footer=label, no_wrap=True)
    crossing = chain.granularity != "supernode"
    if crossing:  # op granularity: how many tensors cross the cut after each layer
        table.add_column("crossing", justify="right", no_wrap=True)
    for row in report["layers"]:
        table.add_row(
            str(row["index"]),
            row["name"],
            row["op"],
            shape_text(row["input_shape"]),
            shape_text(row["output_shape"]),
            *(f"{row[key]:,}" for key in numeric.values()),
            *([str(len(row["crossing"]))] if crossing else []),
        )
    return table
