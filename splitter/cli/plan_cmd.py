"""``splitter plan INPUT --target boards.toml``: the optimal placement of a chain on boards."""

from __future__ import annotations

import json
import shutil
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.partition import SOLVER_NAMES
from splitter.partition.report import plan_chain, plan_to_dict


def _parse_input_shape(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, tuple[int, ...]]:
    """``NAME=1x49x10x1`` (repeatable) -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) <= 0:
            raise click.BadParameter(
                f"'{value}' is not NAME=DIMS; write e.g. input_1=1x49x10x1", param=param
            )
        shapes[name] = shape
    return shapes


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def _render(data: dict[str, Any]) -> None:
    """The human table: one row per sub-model, then the objective values."""
    devices = {d["name"]: d for d in data["devices"]}
    table = Table(
        title=f"{data['model']}: {data['objective']} plan ({data['solver']})",
        caption="FLASH: sub-model (device used/usable); RAM: sub-model peak/device usable",
    )
    for col in ("#", "device", "mcu", "layers", "FLASH KiB", "RAM KiB", "compute s", "transfer s"):
        table.add_column(col, justify="left" if col in ("device", "mcu", "layers") else "right")
    for s in data["submodels"]:
        dev = devices[s["device"]]
        table.add_row(
            str(s["index"]),
            s["device"],
            s["mcu"],
            f"{s['first']}-{s['last']} ({s['first_name']}..{s['last_name']})",
            f"{_kib(s['flash_bytes'])} ({_kib(dev['flash_used'])}/{_kib(dev['flash_bytes'])})",
            f"{_kib(s['ram_bytes'])}/{_kib(dev['ram_bytes'])}",
            f"{s['compute_s']:.6f}",
            f"{s['transfer_s']:.6f}",
        )
    console = Console(width=max(132, shutil.get_terminal_size().columns))
    console.print(table)
    thr = data["throughput_per_s"]
    ref9 = data["throughput_ref9_per_s"]
    proof = "proved optimal" if data["optimal"] else "not proved optimal"
    if data["gap"] is not None:
        proof += f", gap {100 * data['gap']:.2f}%"
    console.print(
        f"latency {data['latency_s']:.6f} s | throughput (eq. 17) "
        f"{'inf' if thr is None else f'{thr:.6f}'} /s | throughput (ref. [9]) "
        f"{'inf' if ref9 is None else f'{ref9:.6f}'} /s | bottleneck {data['bottleneck_device']}"
    )
    console.print(
        f"solver {data['solver']}: {proof}, {data['nodes']} nodes, {data['solve_time_s']:.3f} s"
    )


@click.command("plan")
@click.argument("input_path", metavar="INPUT")
@click.option("--target", "target", required=True, metavar="BOARDS.toml", help="Board file.")
@click.option(
    "--objective",
    type=click.Choice(["latency", "throughput"]),
    default="latency",
    show_default=True,
)
@click.option("--solver", type=click.Choice(SOLVER_NAMES), default="auto", show_default=True)
@click.option("--time-limit", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="Seconds for dp / cpsat / bnb (default 60 for dp and cpsat); stops "
                   "with the best plan found so far and reports its gap.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--input-shape",
    "input_shapes",
    multiple=True,
    callback=_parse_input_shape,
    metavar="NAME=1x49x10x1",
    help="Static shape of a dynamic model input (repeatable).",
)
@click.option(
    "--activation-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Bytes per activation element (e.g. 1 for int8); default: the tensors' dtype.",
)
def command(
    input_path: str,
    target: str,
    objective: str,
    solver: str,
    time_limit: float | None,
    as_json: bool,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
) -> None:
    """Place the layers of INPUT (ONNX, TFLite or CSV/JSON profile) on the boards of --target."""
    boards = load_boards(target)
    chain = load_chain(
        input_path, input_shapes=input_shapes or None, activation_bytes=activation_bytes
    )
    options: dict[str, object] = {}
    if time_limit is not None:
        options["time_limit"] = time_limit
    plan = plan_chain(chain, boards, objective, solver, **options)
    data = plan_to_dict(plan, chain, boards)
    if as_json:
        click.echo(json.dumps(data))
    else:
        _render(data)
