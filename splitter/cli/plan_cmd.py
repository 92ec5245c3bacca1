"""``splitter plan INPUT --target boards.toml``: the optimal placement of a chain on boards."""

from __future__ import annotations

import itertools
import shutil

import click
from rich.console import Console
from rich.table import Table

from splitter.cli.options import model_plan_options, search_options, search_settings
from splitter.cli.progress import Progress
from splitter.compile import CompileOptions
from splitter.hardware.energy import NO_ENERGY
from splitter.ir import Plan
from splitter.manifest import PlanManifest
from splitter.planning import plan


def _segments(
    input_path: str,
    target: str,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
    time_limit: float | None,
    as_json: bool,
) -> None:
    """``plan --segments``: the LO-SC plan of ``splitter segment`` on the one device."""
    from splitter.cli.segment_cmd import render_prepared
    from splitter.segments.build import plan_segments

    with Progress() as progress:
        prepared = plan_segments(
            input_path, target, input_shapes=input_shapes or None,
            activation_bytes=activation_bytes, time_limit=time_limit or 60.0, step=progress.step,
        )  # fmt: skip
    if as_json:
        click.echo(prepared.manifest.to_json())
    else:
        render_prepared(prepared)


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def _render(m: PlanManifest, plan: Plan) -> None:
    """The human table: one row per sub-model, then the objective values."""
    table = Table(
        title=f"{m.model.name}: {m.objective} plan ({m.solver})",
        caption="FLASH, RAM: the sub-model's (its device's whole image, code and runtime "
        "included / what the device may take)",
    )
    cols = ("#", "device", "mcu", "layers", "FLASH KiB", "RAM KiB", "compute s", "transfer s")
    for col in (*cols, "out B / wire B"):
        table.add_column(col, justify="left" if col in ("device", "mcu", "layers") else "right")
    for s in m.submodels:
        dev = m.devices[s.device_index]
        table.add_row(
            str(s.index),
            s.device,
            s.mcu,
            f"{s.first}-{s.last} ({s.first_name}..{s.last_name})",
            f"{_kib(s.flash_bytes)} ({_kib(dev.flash_total)}/{_kib(dev.flash_budget)})",
            f"{_kib(s.ram_bytes)} ({_kib(dev.ram_total)}/{_kib(dev.ram_limit)})",
            f"{s.compute_s:.6f}",
            f"{s.transfer_s:.6f}",
            f"{s.out_bytes} / {s.wire_bytes}",
        )
    console = Console(width=max(132, shutil.get_terminal_size().columns))
    console.print(table)
    for s in m.submodels:
        if s.loops:
            console.print(
                f"sub-model {s.index}: partial execution (PEX) RAM {_kib(s.ram_bytes)} KiB, "
                f"{_kib(s.ram_whole_bytes)} KiB run op by op; {len(s.loops)} loop(s): "
                + "; ".join(s.loops),
                highlight=False,
            )
    for e in m.layer_splits:
        console.print(e.describe(), highlight=False)
    for a, b in itertools.pairwise(m.submodels):
        if len(a.outputs) > 1:  # op granularity: the cut carries several live tensors
            names = ", ".join(t.name for t in a.outputs)
            console.print(f"cut {a.index}->{b.index}: {len(a.outputs)} tensors ({names})")
    thr, ref9 = m.throughput_per_s, m.throughput_ref9_per_s
    proof = (
        "proved optimal"
        if m.optimal
        else (
            "not proved optimal (ds is a heuristic)"
            if m.solver == "ds"
            else "not proved optimal (stopped by the time limit)"
        )
    )
    if not m.optimal:
        proof += ", gap unknown" if m.gap is None else f", gap {100 * m.gap:.2f}%"
    console.print(
        f"latency {m.latency_s:.6f} s | throughput (eq. 17) "
        f"{'inf' if thr is None else f'{thr:.6f}'} /s | throughput (ref. [9]) "
        f"{'inf' if ref9 is None else f'{ref9:.6f}'} /s | bottleneck {m.bottleneck_device}"
    )
    for line in m.headline_lines():
        console.print(line, highlight=False)
    for dev in m.devices:
        if dev.name in m.device_totals():
            console.print(f"memory {dev.memory_line()}", highlight=False)
    console.print(_link_line(m))
    console.print(energy_line(m), highlight=False)
    console.print(f"solver {m.solver}: {proof}, {m.nodes} nodes, {plan.solve_time_s:.3f} s")
    console.print(m.prediction_note)
    for dev in m.devices:
        if dev.compute_model:
            console.print(f"compute on {dev.name}: {dev.compute_model}", highlight=False)


def energy_line(m: PlanManifest) -> str:
    """One line: the energy of one inference, total and per board (or why there is none)."""
    if m.energy is None:
        return NO_ENERGY
    boards = ", ".join(
        f"{d.name} {1e3 * d.total_j:.3f} (compute {1e3 * d.compute_j:.3f}, transfer "
        f"{1e3 * d.transfer_j:.3f}, waiting {1e3 * d.wait_j:.3f})"
        for d in m.energy.devices
    )
    return f"energy per inference {1e3 * m.energy.total_j:.3f} mJ: {boards} mJ"


def _link_line(m: PlanManifest) -> str:
    """What the link figures count: payload only (thesis) or the wire, and the host's I/O;
    each link's rate when they differ."""
    rates = f"{m.rates_text()}; " if m.link_bauds else ""
    if m.link_model != "wire":
        return f"links: {rates}payload bytes only (the thesis's model); host I/O not counted"
    io = m.host_io
    where = "in the latency" if io.counted else "not in the latency (--no-host-io)"
    budget = f", retransmission budget {m.retransmit:g}" if m.retransmit else ""
    return (
        f"links: {rates}bytes on the wire (framing, ACKs{budget}); host I/O "
        f"{io.seconds:.6f} s {where}: "
        f"input {io.input.bytes} B ({io.input.wire_bytes} B on the wire) "
        f"{io.input.seconds:.6f} s, output {io.output.bytes} B ({io.output.wire_bytes} B) "
        f"{io.output.seconds:.6f} s"
    )


@click.command("plan")
@click.argument("input_path", metavar="INPUT")
@click.option("--target", "-t", "target", required=True, metavar="BOARDS.toml", help="Board file.")
@search_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the plan manifest (what compile writes)."
)
@model_plan_options
@click.option(
    "--segments",
    is_flag=True,
    help="LO-SC: segments run one after another on the board file's ONE device, weights loaded "
    "from outside internal flash (what `splitter segment` plans; --json prints the plan.json "
    "`segment -o OUT` writes). --objective / --solver do not apply (CP-SAT, fewest carried bytes).",
)
def command(
    input_path: str,
    target: str,
    objective: str,
    max_latency_ms: float | None,
    min_throughput: float | None,
    solver: str,
    time_limit: float | None,
    var_order: str | None,
    val_order: str | None,
    as_json: bool,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
    emulated: bool,
    granularity: str,
    no_host_io: bool,
    partial_execution: str,
    split: str,
    split_layers: dict[str, int],
    segments: bool,
) -> None:
    """Place the layers of INPUT (ONNX, TFLite or CSV/JSON profile) on the boards of --target."""
    if segments:
        _segments(input_path, target, input_shapes, activation_bytes, time_limit, as_json)
        return
    opts = CompileOptions(
        objective=objective,
        solver=solver,
        solver_options=search_settings(
            objective, max_latency_ms, min_throughput, solver, time_limit, var_order, val_order
        ),
        input_shapes=input_shapes,
        activation_bytes=activation_bytes,
        granularity=granularity,
        emulated=emulated,
        host_io=not no_host_io,
        partial_execution=partial_execution,
        split=split,
        split_layers=split_layers,
    )
    with Progress() as progress:
        result = plan(input_path, target, opts, progress.step, progress.status)
    manifest, plan_ = result.manifest, result.plan
    if as_json:
        click.echo(manifest.to_json())
    else:
        _render(manifest, plan_)
