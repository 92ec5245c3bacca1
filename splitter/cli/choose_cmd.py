"""``splitter choose MODEL (--latency-ms X | --throughput Y) -o OUT``: which boards to buy."""

from __future__ import annotations

import json
import os

import click
from rich.console import Console
from rich.table import Table

from splitter.choose import MAX_BOARDS, ChooseResult, Target, choose, energy_of
from splitter.choose.output import result_dict, write
from splitter.cli.options import (
    MAX_LATENCY_MS,
    MAX_THROUGHPUT,
    activation_bytes_option,
    input_shape_option,
    positive_figure,
)
from splitter.cli.progress import Progress


def _target(latency_ms: float | None, throughput: float | None) -> Target:
    """The one target given, checked (finite, > 0, sane)."""
    if (latency_ms is None) == (throughput is None):
        raise click.UsageError("give exactly one target: --latency-ms X or --throughput Y")
    if latency_ms is not None:
        ms = positive_figure(latency_ms, "--latency-ms", MAX_LATENCY_MS)
        assert ms is not None
        return Target("latency", ms / 1000.0)
    rate = positive_figure(throughput, "--throughput", MAX_THROUGHPUT)
    assert rate is not None
    return Target("throughput", rate)


def _render(result: ChooseResult) -> None:
    """The answer, the search's statistics and the front as a table."""
    console = Console()
    a = result.answer
    assert a is not None
    proof = "proved optimal" if result.proved else f"NOT proved optimal: {result.proof_note}"
    figure = (
        f"latency {a.latency_s * 1e3:.3f} ms"  # type: ignore[operator]
        if result.target.kind == "latency"
        else f"throughput {a.throughput_per_s:.4g} /s"
    )
    energy = energy_of(a)
    console.print(
        f"answer ({result.minimise}): {result.label(a)}, ${a.price:.2f}, {figure}"
        + (f", least energy {energy * 1e3:.3f} mJ/inference" if energy != float("inf") else "")
        + f" ({proof})",
        highlight=False,
    )
    s = result.stats
    console.print(
        f"{s.sets} sets: {s.pruned['memory']} settled by memory, {s.pruned['target']} by the "
        f"target's bound, {s.pruned['order']} after the answer; proved with "
        f"{s.solved_to_answer} solves ({100 * s.pruned_fraction:.1f} % of the sets without "
        f"one) in {s.seconds_to_answer:.2f} s; front: {s.solved} solves, {s.seconds:.2f} s",
        highlight=False,
    )
    table = Table(title="Pareto front (price, figure, energy) of the solved sets")
    for col in ("set", "price", "latency ms", "throughput /s", "least energy mJ"):
        table.add_column(col, justify="left" if col == "set" else "right")
    for r in result.front:
        e = energy_of(r)
        table.add_row(
            result.label(r) + (" *" if r is a else ""),
            f"${r.price:.2f}",
            f"{(r.latency_s or 0) * 1e3:.3f}",
            f"{r.throughput_per_s or 0:.4g}",
            f"{e * 1e3:.3f}" if e != float("inf") else "n/a",
        )
    console.print(table)
    for note in result.skipped:
        console.print(f"not considered: {note}", highlight=False)


@click.command("choose")
@click.argument("model", metavar="MODEL")
@click.option("--latency-ms", type=float, default=None, help="Target: latency at most this.")
@click.option("--throughput", type=float, default=None, help="Target: at least this many /s.")
@click.option(
    "--max-boards", type=click.IntRange(1, MAX_BOARDS), default=3, show_default=True,
    help="Buy at most this many boards.",
)  # fmt: skip
@click.option(
    "--minimise", type=click.Choice(["price", "energy", "boards"]), default="price",
    show_default=True, help="What the chosen set minimises.",
)  # fmt: skip
@click.option(
    "--parts", "parts_file", default=None, metavar="FILE",
    help="TOML list of [[part]] name / price / board / max (default: the catalog).",
)  # fmt: skip
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Worker processes (default: every core).")  # fmt: skip
@click.option("--time-limit", type=click.FloatRange(0, 3600, min_open=True), default=30.0,
              show_default=True, help="Seconds per plan solve.")  # fmt: skip
@click.option("--no-front", is_flag=True, help="Stop at the proved answer (no Pareto front).")
@click.option("--json", "as_json", is_flag=True, help="Print choose.json on stdout.")
@click.option("-o", "--out", required=True, metavar="OUT", help="Output directory.")
@input_shape_option
@activation_bytes_option
def command(
    model: str,
    latency_ms: float | None,
    throughput: float | None,
    max_boards: int,
    minimise: str,
    parts_file: str | None,
    jobs: int | None,
    time_limit: float,
    no_front: bool,
    as_json: bool,
    out: str,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
) -> None:
    """The cheapest (or fewest, or least-energy) set of boards whose optimal plan of MODEL meets
    the target; the Pareto front of price, figure and energy; OUT/boards.toml ready to compile."""
    target = _target(latency_ms, throughput)
    with Progress() as progress:
        result = choose(
            model, target, max_boards=max_boards, minimise=minimise, parts_file=parts_file,
            jobs=jobs or os.cpu_count() or 1, time_limit=time_limit, front=not no_front,
            input_shapes=input_shapes or None, activation_bytes=activation_bytes,
            on_progress=progress.status,
        )  # fmt: skip
    paths = write(result, out)
    if as_json:
        click.echo(json.dumps(result_dict(result), indent=2))
        return
    _render(result)
    click.echo("wrote " + ", ".join(str(p) for p in paths))
