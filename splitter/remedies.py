"""When no plan fits: try splitter's own remedies and name the ones that plan.

A "does not fit" message that only says "use a bigger part" sends the user shopping when
``--granularity auto`` or ``--partial-execution auto`` would have planned the same model on the
same boards. :func:`explain` therefore re-plans with each remedy in turn and appends to the
error the ones that produce a plan, in the order a user would try them (cheapest first):

1. ``--granularity auto``: cut inside branches (the operator chain) when a super-node is the
   block no board holds (``splitter.partition.granularity``);
2. ``--partial-execution auto``: PEX channel / row loops lower a layer's RAM
   (``splitter.partition.partial``);
3. the whole part: every device's ``flash`` / ``ram`` budget at ``"100%"``;
4. int8 quantisation of a float ONNX model (``compile --quantize int8 --calibration-data``):
   the model is quantised as that option does (:func:`splitter.slicing.quantize.quantize_int8`,
   here calibrated on 8 seeded N(0, 1) inputs: the scales do not change any size) and the int8
   chain re-planned on the boards as given;
5. a bigger part: the smallest catalog part (by flash, then RAM) that, in place of one device,
   plans; the device keeps its name and link, its budgets become the whole part;
6. LO-SC segments on a board file's one device (``splitter segment``), weights loaded from
   outside internal flash.

Each remedy is tried with a short solver time limit; "plans" means the solver found a plan that
fits (optimal or not). A remedy that does not plan is not named. Layers are named with the
numbers ``splitter inspect`` prints (:func:`inspect_numbers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from splitter.errors import InfeasibleError, SplitterError
from splitter.ir import Boards, Chain, Device, Part, Plan

#: seconds the solver gets for each remedy tried
REMEDY_TIME_LIMIT = 5.0

#: plan(chain, boards, partial_execution) -> None, raising InfeasibleError when nothing fits
Planner = Callable[[Chain, Boards, str], object]


def plan_or_explain(
    chain: Chain,
    boards: Boards,
    mode: str = "auto",
    objective: str = "latency",
    solver: str = "auto",
    activation_bytes: int | None = None,
    *,
    host_io: bool = True,
    **options: object,
) -> tuple[Chain, Plan]:
    """:func:`splitter.partition.partial.plan_partial`, and when nothing fits its error with
    the remedies that plan (:func:`explain`)."""
    from splitter.cost.pex_chain import partial_chain
    from splitter.partition.partial import plan_partial

    try:
        return plan_partial(
            chain, boards, mode, objective, solver, activation_bytes, host_io=host_io, **options
        )
    except InfeasibleError as exc:
        planned = None if mode == "off" else partial_chain(chain, activation_bytes)

        def planner(c: Chain, b: Boards, m: str) -> object:
            quick = {**options, "time_limit": REMEDY_TIME_LIMIT}
            quick.pop("on_progress", None)
            return plan_partial(c, b, m, objective, solver, activation_bytes, host_io=host_io,
                                **quick)  # fmt: skip

        raise explain(exc, chain, planned, boards, mode, planner, activation_bytes) from None


def explain(
    exc: InfeasibleError,
    chain: Chain,
    planned: Chain | None,
    boards: Boards,
    mode: str,
    planner: Planner,
    activation_bytes: int | None = None,
) -> InfeasibleError:
    """``exc`` with its layers renumbered as ``inspect`` shows them and the remedies that plan
    (or a note that none of splitter's own did) appended."""
    message = inspect_numbers(str(exc), planned, chain)
    for advice in ("; use a", "; or plan with --partial-execution auto", "; add a device"):
        message = message.split(advice, 1)[0]
    found = remedies(chain, boards, mode, planner, activation_bytes)
    if found:
        message += "; what plans: " + "; or ".join(found)
    else:
        message += (
            "; none of splitter's remedies plans it (--granularity auto, --partial-execution "
            "auto, the whole part, int8 quantisation, a bigger catalog part): split it over "
            "more boards"
        )
    return InfeasibleError(message)


def remedies(
    chain: Chain, boards: Boards, mode: str, planner: Planner, activation_bytes: int | None = None
) -> list[str]:
    """The remedies of the module docstring that plan ``chain`` on ``boards``, as advice."""
    found: list[str] = []
    op_chain = _op_chain(chain, activation_bytes)
    if op_chain is not None and _plans(planner, op_chain, boards, mode):
        found.append("--granularity auto (cut inside the branches)")
    if mode == "off" and _plans(planner, chain, boards, "auto"):
        found.append("--partial-execution auto (PEX loops lower the layers' RAM)")
    if found:
        return found
    best_mode = "auto"
    whole = _whole_parts(boards)
    if whole != boards and _plans(planner, chain, whole, best_mode):
        found.append('flash = "100%" and ram = "100%" on every device (the whole parts)')
        return found
    int8 = _int8(chain, boards, mode, planner)
    if int8 is not None:
        found.append(int8)
    bigger = _bigger_part(chain, whole, best_mode, planner)
    if bigger is not None:
        found.append(bigger)
    segments = _segments(chain, boards, activation_bytes)
    if segments is not None:
        found.append(segments)
    return found


def _segments(chain: Chain, boards: Boards, activation_bytes: int | None) -> str | None:
    """LO-SC segments on the board file's one device (weights loaded from outside internal
    flash), when they plan: the command, else None."""
    if chain.graph is None or len(boards.devices) != 1 or not boards.source_path:
        return None
    from splitter.segments.build import plan_segments

    try:
        plan_segments(
            chain.source_path, boards.source_path, activation_bytes=activation_bytes,
            time_limit=REMEDY_TIME_LIMIT,
        )  # fmt: skip
    except SplitterError:
        return None
    return (
        f"segments run one after another on {boards.devices[0].name}, weights loaded from "
        f"outside its flash: splitter segment {chain.source_path} --target "
        f"{boards.source_path} -o OUT"
    )


def _int8(chain: Chain, boards: Boards, mode: str, planner: Planner) -> str | None:
    """``--quantize int8`` when ``chain`` is a float ONNX model whose int8 form plans on
    ``boards`` (the advice), else None."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from splitter.importers import load_chain
    from splitter.slicing.quantize import quantize_int8

    source = Path(chain.source_path.split("#", 1)[0])
    graph = chain.graph
    if graph is None or source.suffix.lower() != ".onnx" or len(graph.inputs) != 1:
        return None
    if any(t.dtype != "float32" for t in graph.tensors.values()):
        return None
    shape = tuple(graph.tensors[graph.inputs[0]].shape)
    with tempfile.TemporaryDirectory(prefix="splitter-int8-remedy-") as tmp:
        cal = Path(tmp) / "calibration.npy"
        np.save(cal, np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32))
        try:
            int8 = load_chain(quantize_int8(source, cal, Path(tmp) / "int8.onnx"))
        except SplitterError:
            return None
        if not _plans(planner, int8, boards, mode):
            return None
    dims = "x".join(map(str, shape))
    target = f" --target {boards.source_path}" if boards.source_path else ""
    return (
        f"int8 quantisation: splitter compile {source}{target} --quantize int8 "
        f"--calibration-data X.npy (X.npy: float32 samples of the input, N x {dims}; the "
        "accuracy cost against the float model is reported)"
    )


def inspect_numbers(message: str, planned: Chain | None, chain: Chain) -> str:
    """Rewrite ``layer J (NAME)`` of ``planned`` (a chain with PEX loops fused, whose indices
    differ) into the layer numbers of ``chain``, the ones ``splitter inspect`` prints."""
    if planned is None or planned is chain:
        return message
    owner = {op.name: layer.index for layer in chain.layers for op in layer.ops}

    def renumber(m: re.Match[str]) -> str:
        j = int(m.group(1))
        if not 0 <= j < len(planned.layers):
            return m.group(0)
        idx = sorted({owner[op.name] for op in planned.layers[j].ops if op.name in owner})
        if not idx:
            return m.group(0)
        span = f"layer {idx[0]}" if len(idx) == 1 else f"layers {idx[0]}-{idx[-1]}"
        names = chain.layers[idx[0]].name
        if len(idx) > 1:
            names += f"..{chain.layers[idx[-1]].name}"
        return f"{span} ({names})"

    return re.sub(r"layer (\d+) \(([^)]*)\)", renumber, message)


def _plans(planner: Planner, chain: Chain, boards: Boards, mode: str) -> bool:
    try:
        planner(chain, boards, mode)
    except SplitterError:
        return False
    return True


def _op_chain(chain: Chain, activation_bytes: int | None) -> Chain | None:
    """The operator chain of ``chain``'s graph when ``chain`` has a super-node, else None."""
    if chain.graph is None or chain.granularity != "supernode":
        return None
    if not any(layer.kind == "super" for layer in chain.layers):
        return None
    from splitter.graph.chain import build_chain

    return build_chain(chain.graph, activation_bytes=activation_bytes, granularity="op")


def _whole_parts(boards: Boards) -> Boards:
    """``boards`` with every device's budgets at its whole part."""
    devices = tuple(_with_part(d, d.part, keep_clock=True) for d in boards.devices)
    return replace(boards, devices=devices)


def _with_part(dev: Device, part: Part, *, keep_clock: bool = False) -> Device:
    return replace(
        dev,
        part=part,
        flash_bytes=int(part.flash_kib * 1024),
        ram_bytes=int(part.ram_kib * 1024),
        clock_hz=dev.clock_hz if keep_clock else part.clock_mhz * 1e6,
        cpm=dev.cpm if keep_clock else part.cpm,
        board=dev.board if keep_clock else None,
        calibration=dev.calibration if keep_clock else None,
        cpm_by_class=dev.cpm_by_class if keep_clock else {},
    )


def _bigger_part(chain: Chain, boards: Boards, mode: str, planner: Planner) -> str | None:
    """The smallest catalog part that, in place of one device, plans (advice), or None."""
    from splitter.hardware.catalog import parts

    for part in sorted(parts(), key=lambda p: (p.flash_kib, p.ram_kib, p.name)):
        for i, dev in enumerate(boards.devices):
            if part.flash_kib <= dev.part.flash_kib and part.ram_kib <= dev.part.ram_kib:
                continue  # not bigger in either memory
            devices = list(boards.devices)
            devices[i] = _with_part(dev, part)
            if _plans(planner, chain, replace(boards, devices=tuple(devices)), mode):
                return (
                    f'mcu = "{part.name}" for device {dev.name} ({part.flash_kib:g} KiB flash, '
                    f"{part.ram_kib:g} KiB RAM: the smallest catalog part that plans in its "
                    "place)"
                )
    return None
