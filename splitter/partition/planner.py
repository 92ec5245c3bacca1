"""Plans as data: ``plan_chain`` (chain + boards -> Plan), ``build_manifest`` (-> manifest).

``splitter plan --json`` prints :func:`build_manifest`'s :class:`~splitter.manifest.PlanManifest`
and ``splitter compile`` writes the same object as ``plan.json``. Every figure is recomputed from
the plan's assignment with :func:`~splitter.partition.problem.evaluate`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from splitter.cost.code import (
    app_sample_bytes,
    arena_region,
    code_bytes,
    device_role,
    layer_keys,
    reserves,
    runtime_ram_bytes,
)
from splitter.cost.cpi import device_cpi_value
from splitter.cost.kernels import part_build_key
from splitter.cost.pex_chain import describe_loop, loop_price
from splitter.cost.wire import THESIS, LinkModel
from splitter.errors import InfeasibleError, SplitterError
from splitter.graph.split import LayerSplit
from splitter.ir import Boards, Chain, ChannelLoop, Device, FirmwareUse, Plan, SubModel
from splitter.manifest import (
    HOST,
    DeviceEnergy,
    DeviceEntry,
    Energy,
    Headline,
    HostIO,
    LinkBaud,
    ModelInfo,
    PlanManifest,
    SubModelEntry,
    Transfer,
    file_suffix,
    finite_or_none,
    input_shapes_tuple,
    model_format,
    submodel_boundaries,
    submodel_file,
    tensor_bytes,
)
from splitter.partition import make_plan, make_problem, solve
from splitter.partition.base import SolverResult
from splitter.partition.problem import (
    Evaluation,
    Problem,
    better,
    close,
    compute_label,
    evaluate,
    meets_bounds,
    with_bounds,
)


def link_model(chain: Chain, host_io: bool = True, use: FirmwareUse | None = None) -> LinkModel:
    """How ``chain``'s transfers are costed (:class:`splitter.cost.wire.LinkModel`).

    A model (firmware follows, so the protocol of docs/protocol.md carries its tensors): the
    bytes on the wire, with the host's transfers of the graph inputs and outputs unless
    ``host_io`` is off (``--no-host-io``). A layer profile (the thesis's reference cases): the
    thesis's model, payload only and no host transfers, so the thesis's figures reproduce.
    With ``--result-on head`` (``use.returns``) the result travels back from the tail to the
    head over a return link (``return_bytes``: the model's output bytes).
    """
    if chain.graph is None:
        return THESIS
    ins, _ = submodel_boundaries(chain, 0, 0)
    _, outs = submodel_boundaries(chain, len(chain) - 1, len(chain) - 1)
    output_bytes = sum(tensor_bytes(t) or 0 for t in outs)
    return LinkModel(
        wire=True,
        host_io=host_io,
        input_bytes=sum(tensor_bytes(t) or 0 for t in ins),
        output_bytes=output_bytes,
        return_bytes=output_bytes if use is not None and use.returns else 0,
    )


def chain_problem(
    chain: Chain, boards: Boards, *, upper: bool = True, host_io: bool = True
) -> Problem:
    """The partition problem of a costed chain on boards (layer names kept for messages).

    A model (ONNX, TFLite: it gets firmware) plans with each device's firmware code and runtime
    RAM taken off its budgets and its RAM limited to the arena's region
    (:func:`splitter.cost.code.reserves`, an upper bound, or with ``upper=False`` a lower
    bound), and its links as the protocol sends them (:func:`link_model`); a layer profile (the
    thesis's reference cases) with the budgets as they are and the thesis's link model.
    """
    names = [layer.name for layer in chain.layers]
    model = link_model(chain, host_io, boards.firmware)
    if chain.graph is None:
        return make_problem(chain.costs, boards, names=names, link_model=model)
    parts = [dev.part for dev in boards.devices]
    io = (model.input_bytes, model.output_bytes)
    hse = [on_hse(dev) for dev in boards.devices]
    found = reserves(chain, parts, upper=upper, hse=hse, use=boards.firmware, io_bytes=io)
    return make_problem(chain.costs, boards, names=names, reserves=found, link_model=model)


def on_hse(dev: Device) -> bool:
    """Whether the device's board starts its clock from an HSE (its firmware then also holds the
    fallback to the internal oscillator)."""
    if dev.board is None:
        return False
    from splitter.hardware.board_catalog import get_board

    return get_board(dev.board, dev.name).hse is not None


def firmware_needs(
    chain: Chain, boards: Boards, submodels: Sequence[SubModel]
) -> list[tuple[int, int] | None]:
    """Per device, ``(code, runtime RAM)`` of its firmware for ``submodels`` (its own ops,
    sub-models and links; :mod:`splitter.cost.code`), ``None`` for a device with none."""
    peers: dict[int, set[int]] = {}
    seq = [-1, *(s.device_index for s in submodels), -1]
    for a, b in itertools.pairwise(seq):
        for me, other in ((a, b), (b, a)):
            if me >= 0:
                peers.setdefault(me, set()).add(other)
    use = boards.firmware
    head, tail = submodels[0].device_index, submodels[-1].device_index
    ret = use.returns and head != tail  # the return link of --result-on head
    model = link_model(chain, use=use)
    out: list[tuple[int, int] | None] = []
    for i, dev in enumerate(boards.devices):
        mine = [s for s in submodels if s.device_index == i]
        if not mine:
            out.append(None)
            continue
        keys = layer_keys(chain, [j for s in mine for j in range(s.first, s.last + 1)])
        links = len(peers[i])
        role = device_role(i == head, i == tail, ret) if use.app != "harness" else ""
        code = code_bytes(dev.part, keys, len(mine), links, on_hse(dev), use.app, role)
        ram = runtime_ram_bytes(dev.part, len(mine), links, use.app, role)
        if i == head:  # the standalone samples; the result buffer of the return link
            code += app_sample_bytes(use, model.input_bytes)
            ram += (model.return_bytes + 3) // 4 * 4 if ret else 0
        out.append((code, ram))
    return out


def firmware_overflow(chain: Chain, boards: Boards, plan: Plan) -> str | None:
    """The first device whose weights + code or arena + runtime exceed its budget (or the
    arena's RAM region), as a message; ``None`` when the plan's firmware fits everywhere."""
    over = _overflows(chain, boards, plan)
    return over[0][1] if over else None


def _overflows(chain: Chain, boards: Boards, plan: Plan) -> list[tuple[int, str, int, int]]:
    """``(device, message, code, runtime RAM)`` of every device the plan's firmware overflows."""
    if chain.graph is None:
        return []
    ev = evaluate(chain_problem(chain, boards, upper=False), plan.assignment)
    out = []
    for i, need in enumerate(firmware_needs(chain, boards, plan.submodels)):
        if need is None:
            continue
        dev = boards.devices[i]
        ram_cap = min(dev.ram_bytes, arena_region(dev.part)[2])
        flash, ram = ev.flash_used[i] + need[0], ev.ram_used[i] + need[1]
        if flash > dev.flash_bytes or ram > ram_cap:
            message = (
                f"device {dev.name}: weights + code {flash} B / budget {dev.flash_bytes} B, "
                f"arena + runtime {ram} B / {ram_cap} B"
            )
            out.append((i, message, need[0], need[1]))
    return out


#: re-solves with raised reserves before the upper bound is used (each raises one device)
REPAIR_ROUNDS = 8
#: instances with at most this many assignments are searched exhaustively with the exact
#: firmware figures when the relaxation's plan overflows (proved optimal)
EXHAUSTIVE_LIMIT = 4096


def _exhaustive(
    chain: Chain, boards: Boards, lower: Problem, objective: str, options: Mapping[str, object]
) -> Plan:
    """Every assignment, each checked with the exact firmware figures (and the energy
    objective's bounds); the best by the SPEC.md rule
    (:func:`~splitter.partition.problem.better`), proved optimal."""
    best: tuple[float, int, tuple[int, ...]] | None = None
    caps = with_bounds(lower, options.get("max_latency_s"), options.get("max_waiting_s"))  # type: ignore[arg-type]
    for a in itertools.product(range(lower.d), repeat=lower.n):
        ev = evaluate(lower, a)
        if not ev.feasible or not meets_bounds(caps, a):
            continue
        subs = tuple(SubModel(k, d, f, last) for k, (d, f, last) in enumerate(ev.submodels))
        probe = Plan(objective, "fs", True, 1, 0.0, a, subs, ev.latency_s, 0.0, 0.0)
        if _overflows(chain, boards, probe):
            continue
        cand = (ev.value(objective), len(subs), a)
        if best is None or better(*cand, *best):
            best = cand
    if best is None:  # raises the reason
        full = chain_problem(chain, boards, host_io=lower.link_model.host_io)
        caps_only = {k: v for k, v in options.items() if k in ("max_latency_s", "max_waiting_s")}
        return solve(full, objective, "fs", **caps_only)
    result = SolverResult(best[2], lower.d**lower.n, True)
    return make_plan(lower, objective, "fs", result, 0.0)


def plan_chain(
    chain: Chain,
    boards: Boards,
    objective: str = "latency",
    solver: str = "auto",
    *,
    host_io: bool = True,
    **options: object,
) -> Plan:
    """Solve the placement of ``chain`` on ``boards`` (see :func:`splitter.partition.solve`).

    ``host_io``: count the host's input and output transfers in the latency (models only,
    :func:`link_model`).

    For a model (firmware follows), every plan returned fits exactly (:func:`firmware_overflow`):

    1. solve with the lower-bound reserves (runtime with one link, no kernel): if infeasible,
       no plan exists (its error is raised); if its plan fits exactly, it is the answer and
       optimal whenever the solver proved it;
    2. else raise the reserves of the devices that overflow to what that plan needed on them
       and solve again (at most :data:`REPAIR_ROUNDS` times); a plan that fits is the answer,
       proved optimal only when its value equals step 1's (a relaxation's optimum);
    3. else solve with the upper-bound reserves (every kernel of the model on every device),
       whose plans always fit, reported as not proved optimal.

    Step 1's proved optimum is the plan's ``value_bound``: no plan that fits does better.
    """
    if chain.graph is None:
        return solve(chain_problem(chain, boards), objective, solver, **options)
    lower = chain_problem(chain, boards, upper=False, host_io=host_io)
    first = solve(lower, objective, solver, **options)
    # every plan that fits exactly is a plan of the relaxation: its proved optimum bounds them
    bound = plan_value(first, objective) if first.optimal else None
    if _overflows(chain, boards, first) and lower.d**lower.n <= EXHAUSTIVE_LIMIT:
        return replace(_exhaustive(chain, boards, lower, objective, options), value_bound=bound)
    reserves_now = list(lower.reserves)
    plan = first
    for _round in range(REPAIR_ROUNDS):
        over = _overflows(chain, boards, plan)
        if not over:
            best = first.optimal and plan.optimal
            best = best and close(plan_value(plan, objective), plan_value(first, objective))
            return replace(plan, optimal=best, value_bound=bound)
        for i, _message, code, runtime in over:
            r = reserves_now[i]
            reserves_now[i] = replace(r, flash=max(r.flash, code), ram=max(r.ram, runtime))
        problem = make_problem(chain.costs, boards, lower.names, reserves_now, lower.link_model)
        try:
            plan = solve(problem, objective, solver, **options)
        except InfeasibleError:
            break
    plan = solve(chain_problem(chain, boards, host_io=host_io), objective, solver, **options)
    return replace(plan, optimal=False, value_bound=bound)


def plan_value(plan: Plan, objective: str) -> float:
    """The minimised value of a plan: latency, the waiting time ``1 / throughput`` or the
    energy of one inference."""
    if objective == "latency":
        return plan.latency_s
    if objective == "energy":
        return float("inf") if plan.energy_j is None else plan.energy_j
    return 1.0 / plan.throughput_per_s if plan.throughput_per_s > 0 else float("inf")


def build_manifest(
    plan: Plan,
    chain: Chain,
    boards: Boards,
    *,
    model_path: str | Path,
    boards_path: str | Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    activation_bytes: int | None = None,
    host_io: bool = True,
    splits: Sequence[LayerSplit] = (),
) -> PlanManifest:
    """The plan as a checked :class:`~splitter.manifest.PlanManifest`.

    Layers are counted from 0 (layer 0 = the input layer), as ``splitter inspect`` prints them.
    Every figure is recomputed from the plan's assignment with
    :func:`~splitter.partition.problem.evaluate`: per sub-model FLASH used (sum, constraint
    (4)), RAM used (max, constraint (5)), MACs (sum, total and per op class), compute time
    (eq. 7) and the time to send its output onward with its bytes on the wire; per device its
    budgets and totals; the link model and the host's transfers (``host_io``, models only).
    """
    problem = chain_problem(chain, boards, upper=False, host_io=host_io)
    ev = evaluate(problem, plan.assignment)
    product, harness = headlines(problem, ev)
    fmt = model_format(chain)
    model = ModelInfo(
        name=chain.name,
        path=_resolved(model_path),
        format=fmt,
        layers=len(chain.layers),
        layout=chain.graph.layout if chain.graph is not None else "",
        input_shapes=input_shapes_tuple(input_shapes),
        activation_bytes=activation_bytes,
        granularity=chain.granularity,
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
        devices=tuple(
            _device(ev, i, dev, compute_label(problem.costs, dev))
            for i, dev in enumerate(boards.devices)
        ),
        submodels=subs,
        emulated=any(d.emulated for d in boards.devices),
        link_model=problem.link_model.name,
        retransmit=float(boards.link.retransmit),
        **_link_rates(problem, ev),
        host_io=_host_io(problem, ev),
        product=product,
        harness=harness,
    )
    if splits:
        from splitter.partition.layer_split import split_entries

        entries = split_entries(chain, plan.assignment, boards, splits)
        manifest = replace(manifest, layer_splits=entries)
    if chain.graph is not None:
        manifest = _with_firmware(manifest, chain, boards, plan)
    return replace(manifest, energy=_energy(problem, ev)).check()


#: what the energy figures count (``plan.json``'s ``energy.model``)
ENERGY_MODEL = (
    "one inference at a time: every board powered for the latency, at its datasheet Run-mode "
    "current while it computes or sends (TXE polled), at its Sleep-mode current (WFI, UART "
    "interrupt) otherwise; V_DD x uA/MHz x clock (splitter/hardware/energy.toml)"
)


def _energy(problem: Problem, ev: Evaluation) -> Energy | None:
    """The plan's :class:`~splitter.manifest.Energy`, None without energy data."""
    if ev.energy_j is None:
        return None
    from splitter.hardware.energy import energy_of

    rows = []
    for i, dev in enumerate(problem.boards.devices):
        data = energy_of(dev.part.name)
        compute, transfer, wait = ev.energy_by_device[i]
        rows.append(
            DeviceEnergy(
                name=dev.name,
                mcu=dev.part.name,
                run_w=problem.run_w[i],
                wait_w=problem.wait_w[i],
                compute_j=compute,
                transfer_j=transfer,
                wait_j=wait,
                run_table=data.run_table,
                wait_table=data.wait_table,
            )
        )
    return Energy(total_j=float(ev.energy_j), model=ENERGY_MODEL, devices=tuple(rows))


def _with_firmware(m: PlanManifest, chain: Chain, boards: Boards, plan: Plan) -> PlanManifest:
    """Each device's code and runtime RAM for its own sub-models, ops and links
    (:func:`firmware_needs`), and its arena's RAM region."""
    devices = []
    needs = firmware_needs(chain, boards, plan.submodels)
    for dev, entry, need in zip(boards.devices, m.devices, needs, strict=True):
        region, _origin, size = arena_region(dev.part)
        code, runtime = need or (0, 0)
        devices.append(
            replace(
                entry,
                code_bytes=code,
                runtime_ram_bytes=runtime,
                ram_region=region,
                ram_region_bytes=size,
            )
        )
    return replace(m, devices=tuple(devices))


def headlines(problem: Problem, ev: Evaluation) -> tuple[Headline, Headline]:
    """Latency and throughput of the product and of the PC harness, each what it claims.

    *Product* (the first board produces the input, e.g. from its sensor, and the last board
    uses the output; no PC): latency ``I - host I/O`` (eq. 13 without the host's transfers),
    throughput ``1 / W`` (eq. 17, which has no host transfers).

    *PC harness* (``splitter run`` / ``bench``: the host sends each input to the first device
    and receives the output from the last): latency ``I`` with both host transfers (what
    ``run`` waits). Throughput: ``bench`` pipelines inputs only when no device holds two
    sub-models and the first and last devices differ (:mod:`splitter.bench.runner`); then
    eq. 17 with the input's reception added to the first device's busy time and the output's
    sending to the last device's, ``W' = q'_b + L*_b`` with ``q'_i = L_i + S_i + R'_i (+ host
    in) (+ host out)`` and ``b = argmax q'``; otherwise one inference at a time, ``1 / I``.
    """
    io = ev.host_in_s + ev.host_out_s
    product_latency = ev.latency_s - ev.host_io_s
    product = Headline(product_latency, finite_or_none(ev.throughput_per_s))
    harness_latency = product_latency + io
    devs = [dev for dev, _, _ in ev.submodels]
    first, last = devs[0], devs[-1]
    if len(set(devs)) < len(devs) or first == last:
        thr = 1.0 / harness_latency if harness_latency > 0 else math.inf
        return product, Headline(harness_latency, finite_or_none(thr))
    q = [ev.compute[i] + ev.send[i] + ev.recv[i] for i in range(len(ev.compute))]
    q[first] += ev.host_in_s
    q[last] += ev.host_out_s
    b = max(range(len(q)), key=lambda i: (q[i], -i))
    wait = q[b] + ev.inter[b]
    return product, Headline(harness_latency, finite_or_none(1.0 / wait if wait > 0 else math.inf))


def _link_rates(problem: Problem, ev: Evaluation) -> dict[str, Any]:
    """``host_baud``, ``board_baud`` and ``link_bauds`` of the manifest: the rates the plan was
    costed at, each left out (0, empty) when it is the boards file's ``[link] baud``."""
    base, host, board = problem.boards.link.baud, problem.host_link.baud, problem.board_link.baud
    names = [d.name for d in problem.boards.devices]
    subs = [names[dev] for dev, _, _ in ev.submodels]
    links = [LinkBaud(HOST, subs[0], host, "input")]
    links += [
        LinkBaud(a, b, board, f"sub-model {k}")
        for k, (a, b) in enumerate(itertools.pairwise(subs))
        if a != b
    ]
    links.append(LinkBaud(subs[-1], HOST, host, "output"))
    if problem.link_model.return_bytes and subs[0] != subs[-1]:
        links.append(LinkBaud(subs[-1], subs[0], board, "result"))
    uniform = host == board == base
    return {
        "host_baud": 0 if host == base else host,
        "board_baud": 0 if board == base else board,
        "link_bauds": () if uniform else tuple(links),
    }


def _host_io(problem: Problem, ev: Evaluation) -> HostIO:
    """The host's input and output transfers of the evaluated plan."""
    out = ev.sub_wire[-1]
    return HostIO(
        counted=problem.link_model.host_io,
        input=Transfer(
            ev.host_in.payload if ev.host_in else 0,
            math.ceil(ev.host_in.total) if ev.host_in else 0,
            float(ev.host_in_s),
        ),
        output=Transfer(out.payload, math.ceil(out.total), float(ev.host_out_s)),
    )


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
        wire_bytes=math.ceil(ev.sub_wire[k].total),
        inputs=entering,
        outputs=leaving,
        loops=tuple(_loop_text(chain, j, lp, dev) for j in idx for lp in chain.layers[j].loops),
        ram_whole_bytes=max(chain.layers[j].whole_ram or int(problem.ram[j]) for j in idx)
        if any(chain.layers[j].loops for j in idx)
        else 0,
        instructions=_instructions(problem, idx, dev),
    )


def _loop_text(chain: Chain, j: int, loop: ChannelLoop, dev: Device) -> str:
    """The loop and its time price on ``dev``'s real core (table instructions x the core's
    modelled CPI / clock, ``splitter.cost.cpi``); the loop alone for a chain without a graph or a
    part the table does not know."""
    if chain.graph is None:
        return describe_loop(loop)
    try:
        build = part_build_key(dev.part)
        looped, whole = loop_price(chain.layers[j], loop, chain.graph.tensors,
                                   chain.graph.layout or "NCHW", build)  # fmt: skip
    except (SplitterError, KeyError):
        return describe_loop(loop)
    per = device_cpi_value(dev.part, float(dev.clock_hz)) / float(dev.clock_hz)
    return describe_loop(loop, (looped * per, whole * per))


def _instructions(problem: Problem, idx: range, dev: Device) -> tuple[tuple[str, float], ...]:
    """Table instructions of layers ``idx`` for ``dev``'s real core and for the emulator."""
    keys = {part_build_key(dev.part), part_build_key(dev.part, emulated=True)}
    total: dict[str, float] = {}
    for j in idx:
        for build, n in problem.costs[j].instructions:
            if build in keys:
                total[build] = total.get(build, 0.0) + n
    return tuple(sorted((k, round(v, 1)) for k, v in total.items()))


def _device(ev: Evaluation, i: int, dev: Device, label: str) -> DeviceEntry:
    return DeviceEntry(
        compute_model=label,
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
        calibration=dev.calibration_label,
        calibration_factor=1.0 if dev.calibration is None else float(dev.calibration.factor),
        calibration_by_class=tuple(
            sorted((k, float(v)) for k, v in dev.calibration.by_class.items())
            if dev.calibration is not None
            else ()
        ),
    )
