"""``splitter segment INPUT --target ONE_BOARD.toml``: LO-SC segments on one device (planning).

Each layer ``l`` of the chain gives ``MEM_l`` = its weights (FLASH_j), ``PEAK_l`` = its activation
RAM (RAM_j), ``OUT_l`` = its output bytes (OUT_j) and ``T_l`` = compute (thesis eq. 6) plus the time
to bring its weights in over the board's link (``MEM_l * bits_per_byte / baud``: on the emulator the
host streams each segment's weights, see issue 16). A segment's memory is its weights plus its
largest activation buffer, within ``--segment-memory``.

For a model file (ONNX / TFLite with ops) the items are the firmware's *units*
(:mod:`splitter.segments.firmware`: a layer, or a slice of output channels of a layer too large for
one
segment) and the default ``--segment-memory`` is what the firmware has for them
(:func:`splitter.segments.build.firmware_cap`); ``-o OUT`` writes the firmware that runs the
segments one after another on the device (``splitter build OUT``, ``splitter run OUT``). For a
layer profile the items are its layers and the default is the device's usable RAM (planning only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from splitter.cli.options import activation_bytes_option, input_shape_option
from splitter.cli.progress import Progress
from splitter.errors import SplitterError
from splitter.hardware.boards import load_boards, parse_size
from splitter.hardware.families import family_for
from splitter.hardware.links import link_kind
from splitter.importers import load_chain
from splitter.ir import Boards, Chain, Device
from splitter.partition.problem import layer_time
from splitter.segments.build import (
    Prepared,
    device_extflash,
    firmware_cap,
    load_rate,
    parse_extflash,
    prepare_segmented,
    unit_problem,
    write_segmented,
)
from splitter.segments.firmware import chain_units
from splitter.segments.problem import (
    Segmentation,
    SegmentProblem,
    segment_memory,
    segment_time,
    solve_segments,
)


def segment_problem(
    chain: Chain, boards: Boards, device: Device, memory_cap: int, time_cap: float | None
) -> SegmentProblem:
    """The LO-SC instance of ``chain`` on ``device`` (module docstring gives each term)."""
    link = boards.link.host
    wire_s = link_kind(link.kind).seconds  # MEM_l * bits_per_byte / baud
    costs = [layer.cost for layer in chain.layers]
    return SegmentProblem(
        memory=tuple(c.flash for c in costs),
        output=tuple(c.out_bytes for c in costs),
        memory_cap=memory_cap,
        peak=tuple(c.ram for c in costs),
        time=tuple(layer_time(c, device) + wire_s(c.flash, link) for c in costs),
        time_cap=time_cap,
        names=tuple(layer.name for layer in chain.layers),
    )


def _pick_device(boards: Boards, name: str | None, target: str) -> Device:
    if name is None:
        if len(boards.devices) != 1:
            names = ", ".join(d.name for d in boards.devices)
            raise SplitterError(
                f"{target}: {len(boards.devices)} devices ({names}); "
                "segment runs on one: pick it with --device NAME"
            )
        return boards.devices[0]
    for device in boards.devices:
        if device.name == name:
            return device
    names = ", ".join(d.name for d in boards.devices)
    raise SplitterError(f"{target}: no device named '{name}'; choose one of {names}")


def _load_s(problem: SegmentProblem, first: int, last: int, link_rate: float) -> float:
    """Seconds to bring the segment's weights in: ``sum MEM_l / rate`` (bytes per second over
    the link, ``baud / bits``, or from the board's external flash: ``load_rate``)."""
    return sum(problem.memory[first : last + 1]) / link_rate


def _rows(
    chain: Chain,
    problem: SegmentProblem,
    answer: Segmentation,
    units: list[Any] | None,
    link_rate: float,
) -> list[dict[str, object]]:
    """One row per segment; ``first``/``last`` are layers, ``units`` the items (layers, or
    slices ``layer/part`` of a layer) when the model was cut into units."""
    rows: list[dict[str, object]] = []
    for k, (first, last) in enumerate(answer.segments):
        a, b = (first, last) if units is None else (units[first].layer, units[last].layer)
        rows.append(
            {
                "index": k,
                "first": a,
                "last": b,
                "units": None if units is None else [u.label for u in units[first : last + 1]],
                "first_name": chain.layers[a].name,
                "last_name": chain.layers[b].name,
                "weights_bytes": sum(problem.memory[first : last + 1]),
                "memory_bytes": segment_memory(problem, first, last),
                "time_s": segment_time(problem, first, last),
                "load_s": _load_s(problem, first, last, link_rate),
                "carried_bytes": problem.output[last],
            }
        )
    return rows


@click.command("segment")
@click.argument("input_path", metavar="INPUT")
@click.option("--target", "target", required=True, metavar="BOARDS.toml", help="Board file.")
@click.option("--device", "device_name", default=None, help="Device of --target (if several).")
@click.option(
    "--segment-memory",
    default=None,
    metavar="SIZE",
    help="Bytes a segment may occupy, e.g. '96 KiB' (default for a model: what the firmware "
    "has, the RAM region less runtime and loader; for a layer profile: the usable RAM).",
)
@click.option(
    "--segment-time",
    type=click.FloatRange(min=0.0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Longest a segment may take, loading included (default: no limit).",
)
@click.option("--time-limit", type=click.FloatRange(min=0.0, min_open=True), default=60.0)
@click.option("--json", "as_json", is_flag=True, help="Print the segmentation as JSON.")
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUT",
    help="Write the segment firmware project here (then `splitter build OUT`, `run OUT`).",
)
@click.option("--force", is_flag=True, help="Replace OUT even if splitter did not write it.")
@click.option(
    "--extflash",
    default=None,
    metavar="ORIGIN:SIZE[:NAME]",
    help="With -o: the board's memory-mapped external flash (e.g. 0x90000000:8MiB:QSPI); the "
    "part's build reads the weights from there (the emulator's build still streams them).",
)
@input_shape_option
@activation_bytes_option
def command(
    input_path: str,
    target: str,
    device_name: str | None,
    segment_memory: str | None,
    segment_time: float | None,
    time_limit: float,
    as_json: bool,
    out_dir: Path | None,
    force: bool,
    extflash: str | None,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
) -> None:
    """Cut INPUT into LO-SC segments run one after another on ONE board, carrying fewest bytes."""
    boards = load_boards(target)
    device = _pick_device(boards, device_name, target)
    ext = device_extflash(device) if extflash is None else parse_extflash(extflash)
    with Progress() as progress:
        progress.step(f"importing {input_path}")
        chain = load_chain(
            input_path, input_shapes=input_shapes or None, activation_bytes=activation_bytes
        )
        units = None
        load = load_rate(boards, device, ext if chain.graph is not None else None)
        if chain.graph is not None:
            cap = firmware_cap(device)
            if segment_memory is not None:
                cap = parse_size(segment_memory, device.part.ram_kib, target, "--segment-memory")
            progress.step("cutting the model into units")
            units = chain_units(chain, cap, core=family_for(device.part.family).core.name)
            problem = unit_problem(chain, boards, device, units, cap, segment_time, load)
        else:
            cap = device.ram_bytes
            if segment_memory is not None:
                cap = parse_size(segment_memory, device.part.ram_kib, target, "--segment-memory")
            problem = segment_problem(chain, boards, device, cap, segment_time)
        progress.step("solving the LO-SC segmentation (cpsat)")
        answer = solve_segments(problem, time_limit=time_limit)
        written = None
        if out_dir is not None:
            if units is None:
                raise SplitterError(
                    f"{input_path}: a layer profile has no weights to build; give the model file"
                )
            prepared = prepare_segmented(
                input_path, target, chain, boards, device, units, answer,
                input_shapes=input_shapes or None, extflash=ext, step=progress.step,
            )  # fmt: skip
            written = write_segmented(out_dir, prepared, force=force, step=progress.step)
    rows = _rows(chain, problem, answer, units, 1 / load.s_per_byte)
    if as_json:
        doc = {
            "schema": "splitter.segments/1",
            "model": chain.name,
            "device": device.name,
            "mcu": device.part.name,
            "segment_memory_bytes": cap,
            "segment_time_s": segment_time,
            "carried_bytes": answer.carried_bytes,
            "optimal": answer.optimal,
            "load_via": load.via,
            "segments": rows,
            "out": None if written is None else str(written.out),
            "region_bytes": None if written is None else written.record["region_bytes"],
        }
        click.echo(json.dumps(doc, indent=2))
        return
    _render(chain, device, cap, answer, rows)
    if written is not None:
        click.echo(
            f"wrote {written.out}: firmware for {device.name} running {len(rows)} segments in "
            f"one {written.record['region_bytes']} B RAM region, weights "
            f"{written.record['blob_bytes']} B in firmware/{device.name}/weights.bin; "
            f"next: splitter build {written.out} && splitter run {written.out} --emulate"
        )


def _span(row: dict[str, object]) -> str:
    """``3-8``, or the units ``28/2of10`` / ``25/2of2..26`` when layers are sliced."""
    units = row.get("units")
    if isinstance(units, list) and any("/" in str(u) for u in units):
        return str(units[0]) if len(units) == 1 else f"{units[0]}..{units[-1]}"
    return f"{row['first']}-{row['last']}"


def _render(
    chain: Chain, device: Device, cap: int, answer: Segmentation, rows: list[dict[str, object]]
) -> None:
    table = Table(
        title=f"{chain.name}: {len(rows)} LO-SC segment(s) on {device.name} ({device.part.name})",
        caption=f"memory: weights + largest activation buffer, within {cap / 1024:.1f} KiB",
    )
    for col in ("#", "layers", "weights KiB", "memory KiB", "time s", "carried B"):
        table.add_column(col, justify="left" if col == "layers" else "right")
    for r in rows:
        table.add_row(
            str(r["index"]),
            f"{_span(r)} ({r['first_name']}..{r['last_name']})",
            f"{int(r['weights_bytes']) / 1024:.1f}",  # type: ignore[call-overload]
            f"{int(r['memory_bytes']) / 1024:.1f}",  # type: ignore[call-overload]
            f"{float(r['time_s']):.6f}",  # type: ignore[arg-type]
            str(r["carried_bytes"]),
        )
    console = Console(width=132)
    console.print(table)
    proof = "proved optimal" if answer.optimal else "not proved optimal"
    console.print(f"carried {answer.carried_bytes} B in total (LO-SC eq. 9), {proof} (cpsat)")


def render_prepared(p: Prepared) -> None:
    """``plan --segments``: the segments of the manifest as a table, then the totals."""
    seg = p.manifest.segments
    assert seg is not None
    table = Table(
        title=f"{p.manifest.model.name}: {len(seg.rows)} LO-SC segment(s) on {seg.device} "
        f"({p.record['mcu']})",
        caption=f"one RAM region of {seg.region_bytes} B: activations + the segment's weights",
    )
    for col in ("#", "units", "layers", "weights B", "memory B", "carried B", "load s", "ms"):
        table.add_column(col, justify="left" if col in ("units", "layers") else "right")
    for r in seg.rows:
        table.add_row(
            str(r.index),
            r.units[0] if len(r.units) == 1 else f"{r.units[0]}..{r.units[-1]}",
            f"{r.first_name}..{r.last_name}",
            str(r.weights_bytes),
            str(r.memory_bytes),
            str(r.carried_bytes),
            f"{r.load_s:.3f}",
            f"{r.compute_s * 1e3:.3f}",
        )
    console = Console(width=132)
    console.print(table)
    ext = dict(seg.extflash)
    where = (
        f"external flash {ext['name']} at 0x{int(ext['origin']):08X}"
        if ext
        else "streamed by the host (link 0)"
    )
    proof = "proved optimal" if seg.optimal else "not proved optimal"
    console.print(
        f"weights {seg.weights_bytes} B {where}; carried {seg.carried_bytes} B (LO-SC eq. 9, "
        f"{proof}); per inference: load {seg.load_s:.3f} s, compute {seg.compute_s * 1e3:.3f} ms"
    )
