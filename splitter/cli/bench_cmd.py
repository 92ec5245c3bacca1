"""``splitter bench OUT [-n 100] [--port P | --emulate]``: timed inferences vs the estimates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from splitter.bench.results import comparison_rows, wire_lines, write_bench
from splitter.bench.runner import BENCH_FILE, BenchConfig, bench
from splitter.cli.options import (
    allow_edited_option,
    out_argument,
    port_option,
    stop_on_sigterm,
    verbose_option,
)
from splitter.cli.progress import Bar, Progress
from splitter.device.run import boards_file_ports
from splitter.manifest import read_manifest
from splitter.outputs import verify_output
from splitter.report import refresh_report


@click.command("bench")
@out_argument
@click.option("-n", "--runs", type=click.IntRange(min=1), default=100, show_default=True)
@port_option
@click.option("--emulate", is_flag=True, help="Boot the boards in QEMU for the bench.")
@click.option(
    "--icount/--no-icount",
    default=True,
    show_default=True,
    help="With --emulate: instruction-counted deterministic cycles.",
)
@click.option(
    "--target",
    "-t",
    default=None,
    metavar="BOARDS.toml",
    help="Board file of the plan, for the estimates (default: catalog values of the parts).",
)
@click.option(
    "--input",
    "input_path",
    multiple=True,
    metavar="[NAME=]X.npy|X.npz",
    help="Input array (default: seeded random of each model input's shape); several inputs: "
    "--input NAME=X.npy each, or one .npz keyed by input name.",
)
@click.option("--pipeline/--no-pipeline", default=True, show_default=True)
@click.option("--timeout", type=float, default=60.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the bench.json object on stdout.")
@verbose_option
@allow_edited_option
def command(
    out: Path,
    runs: int,
    ports: dict[str, str],
    emulate: bool,
    icount: bool,
    target: str | None,
    input_path: tuple[str, ...],
    pipeline: bool,
    timeout: float,
    as_json: bool,
    verbose: bool,
    allow_edited: bool,
) -> None:
    """Run OUT's plan RUNS times on the boards; compare cycles and link times with the plan."""
    verify_output(out, allow_edited=allow_edited)
    if not ports and not emulate and not boards_file_ports(read_manifest(out)):
        raise click.UsageError(
            "give --port PORT (a board), port = ... in the boards file, or --emulate"
        )
    stop_on_sigterm()
    cfg = BenchConfig(
        runs=runs,
        emulate=emulate,
        ports=ports,
        icount=icount,
        timeout=timeout,
        target=target,
        input_path=input_path or None,
        pipeline=pipeline,
        log=(lambda text: click.echo(text, err=True)) if verbose else None,
    )
    with Progress() as progress:
        bars: list[Bar] = []

        def on_run(done: int, total: int) -> None:
            if not bars:
                bars.append(progress.bar("timed runs", total, "runs"))
            bars[0].update(done)

        cfg = replace(cfg, on_step=progress.step, on_run=on_run)
        result = bench(out, cfg)
        path = write_bench(out, result)
        progress.step("refreshing report.html")
        refresh_report(out)  # refresh report.html with the measurements
    if as_json:
        click.echo(json.dumps(result))
        return
    render(result, path)


def render(result: dict[str, Any], path: Path) -> None:
    """The estimated-vs-measured table, latency and throughput lines."""
    console = Console()
    if result.get("note"):
        console.print(result["note"])
    table = Table(title=f"{result.get('model')}: estimated vs measured ({result['runs']} runs)")
    for col in ("what", "estimated", "measured (median)", "error %"):
        table.add_column(col, justify="left" if col == "what" else "right")
    for row in comparison_rows(result):
        table.add_row(*row)
    console.print(table)
    est = result["estimate"]
    what = "an emulated run" if est.get("prediction") == "emulator" else "a run on the parts"
    console.print(f"the estimate predicts {what}; calibration: {est.get('calibration', 'none')}")
    for line in wire_lines(result):
        console.print(line)
    lat = result["latency_summary"]
    console.print(
        f"latency: median {lat['p50'] * 1e3:.2f} ms, p95 {lat['p95'] * 1e3:.2f} ms, "
        f"min {lat['min'] * 1e3:.2f} ms, max {lat['max'] * 1e3:.2f} ms"
    )
    load = result.get("load_summary")
    if load:
        console.print(
            f"loading LO-SC segment weights (host-streamed): median {load['p50']:.3f} s per "
            "inference, part of the latency"
        )
    tp = result["throughput"]
    line = f"throughput ({tp['mode']}): {tp['per_s']:.3f} inferences/s"
    if tp.get("why_not_pipelined"):
        line += f" (not pipelined: {tp['why_not_pipelined']})"
    console.print(line)
    console.print(f"wrote {path}")


__all__ = ["BENCH_FILE", "command"]
