"""Plans as data: ``plan_chain`` (chain + boards -> Plan), ``build_manifest`` (-> manifest).

``splitter plan --json`` prints :func:`build_manifest`'s :class:`~splitter.manifest.PlanManifest`
and ``splitter compile`` writes the same object as ``plan.json``. Every figure is recomputed from
the plan's assignment with :func:`~splitter.partition.problem.evaluate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from splitter.ir import Boards, Chain, Device, Plan, SubModel
from splitter.manifest import (
    DeviceEntry,
    ModelInfo,
    PlanManifest,
    SubModelEntry,
    file_suffix,
    finite_or_none,
    input_shapes_tuple,
    model_format,
    submodel_boundaries,
    submodel_file,
)
from splitter.partition import make_problem, solve
from splitter.partition.problem import Evaluation, Problem, evaluate


def chain_problem(chain: Chain, boards: Boards) -> Problem:
    """The partition problem of a costed chain on boards (layer names kept for messages)."""
    return make_problem(chain.costs, boards, names=[layer.name for layer in chain.layers])


def plan_chain(
    chain: Chain,
    boards: Boards,
    objective: str = "latency",
    solver: str = "auto",
    **options: object,
) -> Plan:
    """Solve the placement of ``chain`` on ``boards`` (see :func:`splitter.partition.solve`)."""
    return solve(chain_problem(chain, boards), objective, solver, **options)


def build_manifest(
    plan: Plan,
    chain: Chain,
    boards: Boards,
    *,
    model_path: str | Path,
    boards_path: str | Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    activation_bytes: int | None = None,
) -> PlanManifest:
    """The plan as a checked :class:`~splitter.manifest.PlanManifest`.

    Layers are counted from 0 (layer 0 = the input layer), as ``splitter inspect`` prints them.
    Every figure is recomputed from the plan's assignment with
    :func:`~splitter.partition.problem.evaluate`: per sub-model FLASH used (sum, constraint
    (4)), RAM used (max, constraint (5)), MACs (sum, total and per op class), compute time
    (eq. 7) and the time to send its output onward; per device its budgets and totals.
    """
    problem = chain_problem(chain, boards)
    ev = evaluate(problem, plan.assignment)
    fmt = model_format(chain)
    model = ModelInfo(
        name=chain.name,
        path=_resolved(model_path),
        format=fmt,
        layers=len(chain.layers),
        layout=chain.graph.layout if chain.graph is not None else "",
        input_shapes=input_shapes_tuple(input_shapes),
        activation_bytes=activation_bytes,
    )
    subs = tuple(
        _submodel(problem, ev, chain, boards, k, sub, file_suffix(fmt))
        for k, sub in enumerate(plan.submodels)
    )
    manifest = PlanManifest(
        model=model,
        boards_path=_resolved(boards_path),
        baud=boards.link.baud,
        bits_per_byte=boards.link.bits_per_byte,
        objective=plan.objective,
        solver=plan.solver,
        optimal=plan.optimal,
        gap=None if plan.gap is None else float(plan.gap),
        nodes=int(plan.nodes),
        latency_s=float(plan.latency_s),
        throughput_per_s=finite_or_none(float(plan.throughput_per_s)),
        throughput_ref9_per_s=finite_or_none(float(plan.throughput_ref9_per_s)),
        waiting_s=float(ev.waiting_s),
        bottleneck_device=boards.devices[ev.bottleneck].name,
        assignment=tuple(plan.assignment),
        devices=tuple(_device(ev, i, dev) for i, dev in enumerate(boards.devices)),
        submodels=subs,
    )
    return manifest.check()


def _resolved(path: str | Path) -> str:
    """Absolute path text, keeping a ``#name`` profile selector."""
    base, sep, name = str(path).partition("#")
    return str(Path(base).resolve()) + sep + name


def _submodel(
    problem: Problem,
    ev: Evaluation,
    chain: Chain,
    boards: Boards,
    k: int,
    sub: SubModel,
    suffix: str | None,
) -> SubModelEntry:
    dev = boards.devices[sub.device_index]
    idx = range(sub.first, sub.last + 1)
    by_class: dict[str, int] = {}
    for j in idx:
        for cls, m in problem.costs[j].macs_by_class:
            by_class[cls] = by_class.get(cls, 0) + int(m)
    entering, leaving = submodel_boundaries(chain, sub.first, sub.last)
    return SubModelEntry(
        index=k,
        device=dev.name,
        device_index=sub.device_index,
        mcu=dev.part.name,
        first=sub.first,
        last=sub.last,
        first_name=chain.layers[sub.first].name,
        last_name=chain.layers[sub.last].name,
        file=None if suffix is None else submodel_file(k, dev.name, suffix),
        flash_bytes=sum(int(problem.flash[j]) for j in idx),
        ram_bytes=max(int(problem.ram[j]) for j in idx),
        macs=int(sum(problem.costs[j].macs for j in idx)),
        macs_by_class=tuple(sorted(by_class.items())),
        out_bytes=int(problem.costs[sub.last].out_bytes),
        compute_s=float(ev.sub_compute[k]),
        transfer_s=float(ev.sub_transfer[k]),
        inputs=entering,
        outputs=leaving,
    )


def _device(ev: Evaluation, i: int, dev: Device) -> DeviceEntry:
    return DeviceEntry(
        name=dev.name,
        index=i,
        mcu=dev.part.name,
        port=dev.port,
        clock_hz=float(dev.clock_hz),
        cpm=float(dev.cpm),
        cpm_by_class=tuple(sorted((k, float(v)) for k, v in dev.cpm_by_class.items())),
        flash_budget=int(dev.flash_bytes),
        ram_budget=int(dev.ram_bytes),
        flash_used=int(ev.flash_used[i]),
        ram_used=int(ev.ram_used[i]),
        compute_s=float(ev.compute[i]),
        send_s=float(ev.send[i]),
        recv_s=float(ev.recv[i]),
        intermediate_s=float(ev.inter[i]),
    )
