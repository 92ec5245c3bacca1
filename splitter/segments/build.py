"""``splitter segment MODEL --target ONE_BOARD.toml -o OUT``: LO-SC segments as firmware.

The model is cut into units (layers, or slices of a layer whose weights do not fit:
:mod:`splitter.segments.firmware`), the LO-SC problem over the units is solved exactly
(:func:`splitter.segments.problem.solve_segments`) with the segment memory the firmware has:

``M_cap = min(RAM budget, arena region) - runtime RAM (1 sub-model, 1 link) - loader RAM``

and the firmware's one RAM region is ``max_s (W_s + A_s)``, the largest ``segment_memory`` of
the answer, never more than ``M_cap``. ``OUT`` then holds what ``build`` and ``run`` read:

* ``plan.json``: one sub-model (every layer) on the device; its FLASH is 0 (the weights are
  loaded from outside internal flash) and its RAM the region;
* ``segments.json`` (:func:`splitter.segments.firmware.segments_record`), ``report.md``;
* ``firmware/<device>/`` with ``weights.bin`` (the segments' weights), served by the host on
  the emulator or linked into the board's external flash (``SEG_EXTFLASH``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from splitter.errors import SplitterError, UnsupportedOpError
from splitter.ir import Boards, Chain, Device, Plan, SubModel
from splitter.manifest import MANIFEST_FILE, PlanManifest, SegmentEntry, Segments
from splitter.partition.problem import layer_time
from splitter.segments.firmware import ExtFlash
from splitter.segments.problem import Segmentation, SegmentProblem

if TYPE_CHECKING:
    from splitter.codegen.firmware import PlanContext

Step = Callable[[str], None]


def firmware_cap(device: Device) -> int:
    """``M_cap`` of the module docstring: bytes one segment (weights + activations) may use."""
    from splitter.cost.code import arena_region, runtime_ram_bytes
    from splitter.segments.firmware import LOADER_RAM_BYTES

    region = min(device.ram_bytes, arena_region(device.part)[2])
    return region - runtime_ram_bytes(device.part, 1, 1) - LOADER_RAM_BYTES


def unit_problem(
    chain: Chain,
    boards: Boards,
    device: Device,
    units: list[Any],
    cap: int,
    time_cap: float | None,
    load: LoadRate | None = None,
) -> SegmentProblem:
    """The LO-SC instance over ``units``: ``T`` = compute (eq. 6, the unit's MACs) + the time
    to bring its weights in (``MEM x load.s_per_byte``: the link by default)."""
    per_byte = (load or load_rate(boards, device, None)).s_per_byte
    times = []
    for u in units:
        cost = replace(chain.layers[u.layer].cost, macs=u.macs, macs_by_class=())
        times.append(layer_time(cost, device) + u.weights * per_byte)
    return SegmentProblem(
        memory=tuple(u.weights for u in units),
        output=tuple(u.out for u in units),
        memory_cap=cap,
        peak=tuple(u.peak for u in units),
        time=tuple(times),
        time_cap=time_cap,
        names=tuple(f"{u.label} {chain.layers[u.layer].name}" for u in units),
    )


@dataclass(frozen=True)
class LoadRate:
    """Seconds per weight byte brought into RAM before a segment, and how."""

    s_per_byte: float
    via: str


def load_rate(boards: Boards, device: Device, extflash: ExtFlash | None) -> LoadRate:
    """From the board's memory-mapped external flash (the catalog's, at ``extflash``'s origin):
    ``2 / f_QSPI`` s per byte, the data phase of a 1-4-4 read (4 bits per clock; the command,
    address and dummy cycles of each burst left out, so a lower bound); otherwise the host
    streaming it over link 0: ``bits_per_byte / baud`` (the emulator, and ``--extflash``
    regions splitter knows no clock for)."""
    from splitter.hardware.board_catalog import device_wiring
    from splitter.hardware.extflash import timing
    from splitter.hardware.links import link_kind

    link = boards.link.host
    spec = _board_spec(device)
    if extflash is None or spec is None or spec.origin != extflash.origin:
        per_byte = link_kind(link.kind).seconds(1, link)
        return LoadRate(per_byte, f"host stream over link 0 at {link.baud} baud")
    hclk = device_wiring(device.part, device.board, device.clock_hz, device.name).tree.bus_hz["AHB"]
    t = timing(spec, hclk)
    return LoadRate(
        2 / t.qspi_hz,
        f"memory-mapped {spec.name} read, {t.qspi_hz / 1e6:g} MHz 1-4-4, 2 clocks per byte",
    )


def _board_spec(device: Device) -> Any:
    from splitter.hardware.board_catalog import get_board

    return None if device.board is None else get_board(device.board, device.name).extflash


@dataclass(frozen=True)
class SegmentedOut:
    """What ``segment -o`` wrote."""

    out: Path
    record: dict[str, Any]
    manifest: PlanManifest


@dataclass(frozen=True)
class Prepared:
    """Everything ``segment -o`` writes, before writing: the generated segment firmware, the
    plan manifest (with its ``segments``), the one-device plan and the firmware context."""

    gen: Any
    manifest: PlanManifest
    plan: Plan
    ctx: PlanContext
    record: dict[str, Any]
    chain: Chain
    device: Device


def prepare_segmented(
    model: str,
    target: str,
    chain: Chain,
    boards: Boards,
    device: Device,
    units: list[Any],
    answer: Segmentation,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    extflash: ExtFlash | None = None,
    step: Step = lambda _t: None,
) -> Prepared:
    """Generate the segment firmware and its plan manifest (nothing written): what
    ``segment -o OUT`` writes and ``plan --segments --json`` prints. ``extflash``: the part's
    build links the weights into that memory-mapped region and reads them from there."""
    from splitter.codegen.firmware import DeviceSpec, build_plan_context
    from splitter.hardware.families import family_for
    from splitter.protocol import plan_hash
    from splitter.segments.firmware import generate_segmented_c, segments_record

    core = family_for(device.part.family).core.name
    step("generating the segment firmware")
    gen = generate_segmented_c(
        chain, units, answer.segments, device.name, core=core, extflash=extflash is not None
    )
    if extflash is not None and len(gen.blob) > extflash.size:
        raise SplitterError(
            f"{extflash.name}: the weights take {len(gen.blob)} B, the external flash region "
            f"{extflash.size} B; use a board with a larger external flash (or --extflash)"
        )
    extra = {
        "model": chain.name,
        "device": device.name,
        "mcu": device.part.name,
        "carried_bytes": answer.carried_bytes,
        "optimal": answer.optimal,
        "plan_hash": "",
        "input_shapes": {k: list(v) for k, v in (input_shapes or {}).items()},
        "extflash": None
        if extflash is None
        else {"name": extflash.name, "origin": extflash.origin, "bytes": extflash.size},
    }
    record = segments_record(chain, units, answer.segments, gen, extra)
    _add_estimates(record, chain, device, units, answer, load_rate(boards, device, extflash))
    # what the host's streaming takes (the emulator build streams even with external flash):
    # the result deadline `run` extends (splitter.segments.server.WeightServer)
    record["stream_s"] = len(gen.blob) * load_rate(boards, device, None).s_per_byte
    manifest, plan = segmented_manifest(
        chain, boards, device, gen.region_bytes, model, target, answer, segments_digest(gen)
    )
    manifest = replace(manifest, segments=manifest_segments(record)).check()
    index = boards.devices.index(device)
    spec = DeviceSpec(
        device.name,
        index,
        device.part,
        gen.files,
        0,
        gen.region_bytes,
        [(0, 0, gen.input_bytes, 0, gen.output_bytes)],
        device.clock_hz,
        device.board,
    )
    ctx = build_plan_context([spec], [index], plan_hash(manifest.to_dict()), link=boards.link)
    if extflash is not None:
        ctx = _with_extflash(ctx, extflash)
    record["plan_hash"] = ctx.plan_hash
    return Prepared(gen, manifest, plan, ctx, record, chain, device)


def plan_segments(
    model: str,
    target: str,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    activation_bytes: int | None = None,
    time_limit: float = 60.0,
    step: Step = lambda _t: None,
) -> Prepared:
    """``plan --segments``: the board file's one device, the firmware's segment memory, no time
    cap, the board's external flash if it has one: what ``segment MODEL --target T -o OUT``
    writes (the same manifest)."""
    from splitter.hardware.boards import load_boards
    from splitter.hardware.families import family_for
    from splitter.importers import load_chain
    from splitter.segments.firmware import chain_units
    from splitter.segments.problem import solve_segments

    boards = load_boards(target)
    if len(boards.devices) != 1:
        raise SplitterError(
            f"{target}: {len(boards.devices)} devices; --segments runs on one: give a board file "
            "with one [[device]] (or `splitter segment --device NAME`)"
        )
    device = boards.devices[0]
    step(f"importing {model}")
    chain = load_chain(model, input_shapes=input_shapes, activation_bytes=activation_bytes)
    if chain.graph is None:
        raise UnsupportedOpError(f"{model}: a layer profile has no weights to run; give the model")
    cap = firmware_cap(device)
    step("cutting the model into units")
    units = chain_units(chain, cap, core=family_for(device.part.family).core.name)
    step("solving the LO-SC segmentation (cpsat)")
    ext = device_extflash(device)
    problem = unit_problem(chain, boards, device, units, cap, None, load_rate(boards, device, ext))
    answer = solve_segments(problem, time_limit)
    return prepare_segmented(
        model, target, chain, boards, device, units, answer,
        input_shapes=input_shapes, extflash=ext, step=step,
    )  # fmt: skip


def device_extflash(device: Device) -> ExtFlash | None:
    """The memory-mapped external flash of the device's board (``board_catalog.toml``), if any."""
    ext = _board_spec(device)
    return None if ext is None else ExtFlash(ext.origin, ext.size, ext.name)


def manifest_segments(record: dict[str, Any]) -> Segments:
    """The manifest's ``segments`` from ``segments.json``'s record (same rows and figures)."""
    ext = record["extflash"]
    rows = tuple(
        SegmentEntry(
            index=r["index"],
            first=r["first_layer"],
            last=r["last_layer"],
            first_name=r["first_name"],
            last_name=r["last_name"],
            units=tuple(r["units"]),
            blob_offset=r["blob_offset"],
            weights_bytes=r["weights_bytes"],
            activation_bytes=r["activation_bytes"],
            carried_bytes=r["carried_bytes"],
            load_s=r["load_s"],
            compute_s=r["compute_s"],
        )
        for r in record["segments"]
    )
    return Segments(
        device=record["device"],
        region_bytes=record["region_bytes"],
        weights_bytes=record["blob_bytes"],
        carried_bytes=record["carried_bytes"],
        optimal=record["optimal"],
        extflash=() if ext is None else tuple(ext.items()),
        rows=rows,
        load_via=record["load_via"],
    )


def write_segmented(
    out_dir: Path, p: Prepared, *, force: bool = False, step: Step = lambda _t: None
) -> SegmentedOut:
    """Write ``OUT`` (module docstring) from what :func:`prepare_segmented` generated,
    atomically."""
    from splitter.codegen.firmware import render_firmware
    from splitter.outputs import OutputDir
    from splitter.segments.firmware import BLOB_FILE, SEGMENTS_FILE

    chain, device = p.chain, p.device
    with OutputDir(out_dir, force=force) as out:
        step(f"writing {out_dir}")
        out.write_text(MANIFEST_FILE, p.manifest.to_json() + "\n")
        render_firmware(out.root, p.ctx, final_dir=out.target)  # compile_commands.json names OUT
        out.write_bytes(f"firmware/{device.name}/{BLOB_FILE}", p.gen.blob)
        out.write_json(SEGMENTS_FILE, p.record)
        out.write_text("report.md", report_text(p.record))
        step("drawing report.html")
        _write_html(out, chain, p.plan, p.manifest, p.record)
    return SegmentedOut(out.target, p.record, p.manifest)


def segments_digest(gen: Any) -> str:
    """16 hex digits of ``sha256`` over the segment table and the weights: in plan.json's
    ``solver`` (``lo-sc <digest>``), so the plan hash a board reports in PONG changes with the
    segmentation and the weights, and ``run`` refuses a board flashed for other segments."""
    import hashlib

    h = hashlib.sha256(repr(gen.segments).encode())
    h.update(gen.blob)
    return h.hexdigest()[:16]


def _write_html(
    out: Any, chain: Chain, plan: Plan, manifest: PlanManifest, record: dict[str, Any]
) -> None:
    """``report.json`` and ``report.html`` as compile writes them (the one-device plan, its
    layers with their own weights) with the segments of ``record`` (segments.json), so
    ``splitter report`` / ``bench`` refresh it."""
    from splitter.report import REPORT_DATA_FILE, REPORT_FILE, report_data
    from splitter.report import render_report as render_html

    data = report_data(chain, plan)
    out.write_json(REPORT_DATA_FILE, data.to_dict())
    page = render_html(manifest, data, {"skipped": True}, segments=record)
    out.write_text(REPORT_FILE, page)


def _add_estimates(
    record: dict[str, Any],
    chain: Chain,
    device: Device,
    units: list[Any],
    answer: Segmentation,
    load: LoadRate,
) -> None:
    """Per segment and in total: the estimated time to load its weights (``W_s x
    load.s_per_byte``, :func:`load_rate`) and to compute it (eq. 6); ``load_via`` says how."""
    for row, (a, b) in zip(record["segments"], answer.segments, strict=True):
        row["load_s"] = int(row["weights_bytes"]) * load.s_per_byte
        row["compute_s"] = sum(
            layer_time(replace(chain.layers[u.layer].cost, macs=u.macs, macs_by_class=()), device)
            for u in units[a : b + 1]
        )
    record["load_s"] = sum(r["load_s"] for r in record["segments"])
    record["compute_s"] = sum(r["compute_s"] for r in record["segments"])
    record["load_via"] = load.via


def _with_extflash(ctx: PlanContext, ext: ExtFlash) -> PlanContext:
    """``ctx`` whose device's part linker script and Makefile place the weights in ``ext``."""
    from splitter.codegen.firmware import _env, render_device
    from splitter.segments.firmware import extflash_cmake, extflash_ldscript, extflash_makefile

    dev = ctx.devices[0]
    rendered = render_device(_env(), ctx, dev)
    files = {
        **dev.files,
        "part.ld": extflash_ldscript(rendered["part.ld"], ext),
        "Makefile": extflash_makefile(rendered["Makefile"]),
        "CMakeLists.txt": extflash_cmake(rendered["CMakeLists.txt"]),
    }
    return replace(ctx, devices=(replace(dev, files=files),))


def parse_extflash(text: str) -> ExtFlash:
    """``ORIGIN:SIZE[:NAME]``, e.g. ``0x90000000:8MiB:QSPI`` (SIZE in bytes, KiB or MiB)."""
    parts = text.split(":")
    try:
        origin = int(parts[0], 0)
        size_text = parts[1].replace(" ", "")
        scale = {"KiB": 1024, "MiB": 1024 * 1024}.get(size_text[-3:], 1)
        size = int(size_text[:-3] if scale > 1 else size_text) * scale
    except (IndexError, ValueError):
        raise SplitterError(
            f"--extflash {text!r}: expected ORIGIN:SIZE[:NAME], e.g. 0x90000000:8MiB:QSPI"
        ) from None
    if origin <= 0 or size <= 0 or origin + size > 2**32 or len(parts) > 3:
        raise SplitterError(
            f"--extflash {text!r}: the region must lie in the 32-bit address space, e.g. "
            "0x90000000:8MiB:QSPI"
        )
    return ExtFlash(origin, size, parts[2] if len(parts) == 3 and parts[2] else "EXTFLASH")


def segmented_manifest(
    chain: Chain,
    boards: Boards,
    device: Device,
    region: int,
    model: str,
    target: str,
    answer: Segmentation,
    digest: str = "",
) -> tuple[PlanManifest, Plan]:
    """plan.json of a segmented device: one sub-model, FLASH 0 (weights outside internal
    flash), RAM = the region; the loader's RAM is added to the device's runtime RAM."""
    from splitter.partition.planner import build_manifest
    from splitter.segments.firmware import LOADER_RAM_BYTES

    if chain.graph is None:
        raise UnsupportedOpError(f"{model}: a layer profile has no weights to run; give the model")
    index = boards.devices.index(device)
    layers = tuple(
        replace(layer, cost=replace(layer.cost, flash=0, ram=region)) for layer in chain.layers
    )
    flat = replace(chain, layers=layers)
    n = len(chain.layers)
    plan = Plan(
        objective="latency",
        solver=f"lo-sc {digest}".strip(),
        optimal=answer.optimal,
        nodes=0,
        solve_time_s=0.0,
        assignment=(index,) * n,
        submodels=(SubModel(0, index, 0, n - 1),),
        latency_s=0.0,
        throughput_per_s=0.0,
        throughput_ref9_per_s=0.0,
    )
    manifest = build_manifest(plan, flat, boards, model_path=model, boards_path=target)
    devices = tuple(
        replace(d, runtime_ram_bytes=d.runtime_ram_bytes + LOADER_RAM_BYTES)
        if d.index == index
        else d
        for d in manifest.devices
    )
    return replace(manifest, devices=devices).check(), plan


def report_text(record: dict[str, Any]) -> str:
    """``report.md`` of a segmented ``OUT``."""
    lines = [
        f"# {record['model']}: {len(record['segments'])} LO-SC segments on {record['device']} "
        f"({record['mcu']})",
        "",
        f"One RAM region of {record['region_bytes']} B holds a segment's activations (bottom) "
        "and weights (top); the weights are loaded before each segment (streamed by the host "
        "on the emulator, `firmware/<device>/weights.bin`).",
        f"Carried bytes (LO-SC eq. 9): {record['carried_bytes']}"
        + (" (proved optimal)." if record["optimal"] else " (not proved optimal)."),
        f"Estimated per inference: loading {record['load_s']:.3f} s ({record['load_via']}), "
        f"compute {record['compute_s']:.4f} s (eq. 6).",
        "",
        "| # | units | layers | weights B | activations B | memory B | carried B | load s |"
        " compute s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in record["segments"]:
        units = s["units"]
        span = units[0] if len(units) == 1 else f"{units[0]}..{units[-1]}"
        lines.append(
            f"| {s['index']} | {span} | {s['first_name']}..{s['last_name']} | "
            f"{s['weights_bytes']} | {s['activation_bytes']} | {s['memory_bytes']} | "
            f"{s['carried_bytes']} | {s['load_s']:.3f} | {s['compute_s']:.4f} |"
        )
    return "\n".join(lines) + "\n"
