"""The splitting problem of SPEC.md: layer costs x devices -> times, constraints, objectives.

Notation (SPEC.md, thesis section 3.1): layer ``j`` of ``n``, device ``i`` of ``d``;
``t[j][i] = L_ij`` (eq. 6), ``comm[j] = OUT_j * bits_per_byte / baud`` is the time to send layer
``j``'s output over a link (SPEC.md, Links). Solvers only see a :class:`Problem`; they know
nothing of ONNX or board files.

With the wire link model (:class:`splitter.cost.wire.LinkModel`, used for models; layer profiles
keep the thesis's payload-only model) ``comm[j]`` is the time of the bytes the protocol puts on
the wire for ``OUT_j`` (framing, chunk headers, ACKs, retransmission budget), and
:func:`evaluate` adds three terms the solvers do not see: the TIMING records sent with each
output (``k + 1`` records of 12 B with sub-model ``k``'s output: they depend on the boundary's
position in the plan, not on the layer, so no per-layer cost holds them; about 1 ms per record
at 115200 baud); with ``host_io``, the host's input and output transfers (a constant for
latency, left out of the waiting time ``W`` as the thesis's ``R'_i`` leaves out the first
receive); and with ``--result-on head`` the result's trip back from the tail to the head over
the return link (:func:`_return_s`: the model's output bytes and ``K + 1`` TIMING records,
nothing when head = tail).

Each link at its own rate (``[link] host_baud`` / ``board_baud`` / ``[[link.pair]]``,
:class:`splitter.ir.LinkSpec`): ``comm[j]``, the TIMING records and the return link are costed
at the board-to-board rate (:func:`board_link`), the host's input and output at the host rate.
Board-to-board links at different rates would make a transfer's time depend on its sender and
receiver, not on the layer alone, which the solvers' per-layer ``comm[j]`` cannot hold:
:func:`board_link` refuses them (one line naming the file and the links).

"Optimal" is therefore optimal for SPEC.md's objective, the thesis's eq. 13 / eq. 17; reported
figures (latency, per sub-model transfer times, the stage times of ``W``) always include the
three terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

import numpy as np

from splitter.cost.calibration import (
    calibrated_cycles,
    flat_cycles,
    split_by_macs,
    timing_clock_hz,
)
from splitter.cost.code import Reserve
from splitter.cost.wire import THESIS, LinkModel, Wire, record_seconds
from splitter.errors import BoardFileError, InfeasibleError
from splitter.hardware.energy import device_powers
from splitter.ir import Boards, Device, LayerCost, LinkSpec

#: Relative tolerance under which two objective values are a tie (SPEC.md, Ties).
TOL = 1e-9
OBJECTIVES = ("latency", "throughput", "energy")


def layer_time(cost: LayerCost, device: Device) -> float:
    """``L_ij``: compute seconds of layer ``j`` on device ``i``, ``sum_c k_c e_c / f``: the
    estimate's cycles by op class (:func:`estimated_cycles`) times the correction factors of the
    device's part (its calibration, 1 without; :mod:`splitter.cost.calibration`), over the clock
    the cycles count at (the device's, or the emulator's when ``device.emulated``).
    """
    cycles = calibrated_cycles(estimated_cycles(cost, device), device.calibration)
    return cycles / timing_clock_hz(device)


def estimated_cycles(cost: LayerCost, device: Device) -> dict[str | None, float]:
    """Uncalibrated cycles of layer ``cost`` on ``device`` by op class (``None``: unclassified).

    * A model's layer (``cost.instructions`` from the kernel cost table) on a device with its
      catalog cycles per MAC: :func:`table_time` times the clock it counts at, i.e.
      ``I_j(build_i) * CPI_i`` on a real core, ``I_j * f_emu / 1e9`` on the emulator; split
      over the layer's op classes in proportion to their MACs (the table is per layer).
    * Otherwise (layer profiles, a ``cpm`` / ``cpm_by_class`` in the board file) thesis eq. 6,
      ``MAC_jc * CpM_ic`` per class (:func:`splitter.cost.calibration.flat_cycles`).
    """
    table = table_time(cost, device, emulated=device.emulated)
    if table is None:
        return flat_cycles(cost, device)
    return split_by_macs(table * timing_clock_hz(device), cost)


def uses_table(device: Device) -> bool:
    """Whether a model's compute on ``device`` comes from the kernel cost table: the device
    keeps its part's catalog cycles per MAC (a calibrated one, ``cpm`` or ``cpm_by_class`` in
    the board file, is the user's measurement and wins)."""
    return not device.cpm_by_class and device.cpm == device.part.cpm


def table_time(cost: LayerCost, device: Device, *, emulated: bool = False) -> float | None:
    """``I_j * CPI_i / f_i`` on a real core (``splitter.cost.cpi``), or with ``emulated`` the
    emulator's time ``I_j / 1e9`` (``-icount shift=0``, the build of the emulated M4F with the
    part's int8 variant); ``None`` when the layer has no table figures or the device is
    calibrated (:func:`uses_table`)."""
    if not cost.instructions or not uses_table(device):
        return None
    from splitter.cost.cpi import EMULATED_INSTRUCTIONS_PER_S, device_cpi_value
    from splitter.cost.kernels import part_build_key

    instr = dict(cost.instructions).get(part_build_key(device.part, emulated=emulated))
    if instr is None:
        return None
    if emulated:
        return instr / EMULATED_INSTRUCTIONS_PER_S
    return instr * device_cpi_value(device.part, device.clock_hz) / device.clock_hz


def compute_label(costs: Sequence[LayerCost], device: Device) -> str:
    """What the compute times of ``costs`` on ``device`` describe (plan manifest, ``plan``)."""
    if any(c.instructions for c in costs) and uses_table(device):
        if device.emulated:
            return "emulator (QEMU -icount shift=0), kernel cost table: 1 instruction per ns"
        from splitter.cost.cpi import device_cpi

        return f"real core (a model): kernel-table instructions x {device_cpi(device).label}"
    if device.cpm_by_class or device.cpm != device.part.cpm:
        return f"cycles per MAC from the board file (cpm {device.cpm:g})"
    return f"catalog cycles per MAC (cpm {device.cpm:g}; layer profile, thesis eq. 6)"


@dataclass(frozen=True, eq=False)
class Problem:
    """A partition instance with precomputed times (arrays are read-only by convention)."""

    costs: tuple[LayerCost, ...]
    boards: Boards
    names: tuple[str, ...]
    t: np.ndarray  # (n, d) compute seconds, thesis eq. 6
    comm: np.ndarray  # (n,) seconds to send OUT_j over a link
    flash: np.ndarray  # (n,) FLASH_j bytes
    ram: np.ndarray  # (n,) RAM_j bytes
    dev_flash: np.ndarray  # (d,) FLASH_i usable bytes
    dev_ram: np.ndarray  # (d,) RAM_i usable bytes
    allowed: np.ndarray  # (n, d) bool: layer j alone fits device i (flash and RAM)
    t_list: list[list[float]] = field(repr=False)
    comm_list: list[float] = field(repr=False)
    #: per device, what its firmware takes besides weights and arena (empty: nothing, as for
    #: the thesis's layer profiles); ``dev_flash`` / ``dev_ram`` have it taken off already
    reserves: tuple[Reserve, ...] = ()
    #: how transfers are costed (default: the thesis's payload-only model, no host I/O)
    link_model: LinkModel = THESIS
    #: seconds of one TIMING record on the wire (0 under the payload-only model)
    record_s: float = 0.0
    #: per device, W drawn running and waiting on a link (:mod:`splitter.hardware.energy`);
    #: empty when a device's part has no energy data (the energy objective then refuses it)
    run_w: tuple[float, ...] = ()
    wait_w: tuple[float, ...] = ()
    #: ``e[j][i]``: J of layer ``j`` on device ``i``, ``ce[j][i]``: J of sending ``OUT_j`` from
    #: device ``i`` (:func:`energy_tables`); None without energy data
    e_list: list[list[float]] | None = field(default=None, repr=False)
    ce_list: list[list[float]] | None = field(default=None, repr=False)
    #: bounds of the energy objective: latency ``I`` and waiting time ``W`` (inf: none)
    max_latency_s: float = float("inf")
    max_waiting_s: float = float("inf")

    def transfer(self, nbytes: int, records: int) -> Wire:
        """The bytes on the wire of one transfer (:meth:`LinkModel.transfer`)."""
        return self.link_model.transfer(nbytes, records, self.boards.link)

    @property
    def host_link(self) -> LinkSpec:
        """The host link at its rate (``[link] host_baud``, else ``baud``)."""
        return self.boards.link.host

    @property
    def board_link(self) -> LinkSpec:
        """Every board-to-board link at their one rate (:func:`board_link`)."""
        return board_link(self.boards)

    def ram_note(self, i: int) -> str:
        """`` (RAM region ... less ... runtime)`` for device ``i``, or ``""``."""
        return f" ({self.reserves[i].describe_ram()})" if self.reserves else ""

    def flash_note(self, i: int) -> str:
        """`` (flash budget less ... code)`` for device ``i``, or ``""``."""
        return f" ({self.reserves[i].describe_flash()})" if self.reserves else ""

    @property
    def n(self) -> int:
        """Number of layers."""
        return len(self.costs)

    @property
    def d(self) -> int:
        """Number of devices."""
        return len(self.boards.devices)


def make_problem(
    costs: Sequence[LayerCost],
    boards: Boards,
    names: Sequence[str] | None = None,
    reserves: Sequence[Reserve] = (),
    link_model: LinkModel = THESIS,
) -> Problem:
    """Build a :class:`Problem` from per-layer costs and parsed boards.

    ``comm[j]`` is ``link_model``'s time of sending ``OUT_j`` (no TIMING records, see the module
    docstring). With ``reserves`` (one per device, :func:`splitter.cost.code.reserves`) the usable
    ``FLASH_i = budget - code`` and ``RAM_i = min(budget, arena region) - runtime RAM``, so a
    plan that fits also links; without, the budgets are used as they are (the thesis's model).
    """
    if not costs:
        raise InfeasibleError("the layer chain is empty; give a model or profile with layers")
    devs = boards.devices
    t = np.array([[layer_time(c, dev) for dev in devs] for c in costs], dtype=float)
    link = board_link(boards)
    comm = np.array(
        [link_model.transfer(c.out_bytes, 0, link).seconds(link) for c in costs], dtype=float
    )
    flash = np.array([c.flash for c in costs], dtype=np.int64)
    ram = np.array([c.ram for c in costs], dtype=np.int64)
    dev_flash = np.array([dv.flash_bytes for dv in devs], dtype=np.int64)
    dev_ram = np.array([dv.ram_bytes for dv in devs], dtype=np.int64)
    if reserves:
        dev_flash -= np.array([r.flash for r in reserves], dtype=np.int64)
        dev_ram = np.minimum(dev_ram, [r.ram_cap for r in reserves])
        dev_ram -= np.array([r.ram for r in reserves], dtype=np.int64)
        dev_flash, dev_ram = np.maximum(dev_flash, 0), np.maximum(dev_ram, 0)
    allowed = (flash[:, None] <= dev_flash[None, :]) & (ram[:, None] <= dev_ram[None, :])
    run_w, wait_w = device_powers(devs)
    e_list, ce_list = energy_tables(t, comm, run_w, wait_w)
    labels = tuple(names) if names is not None else tuple(f"layer {j}" for j in range(len(costs)))
    return Problem(
        costs=tuple(costs),
        boards=boards,
        names=labels,
        t=t,
        comm=comm,
        flash=flash,
        ram=ram,
        dev_flash=dev_flash,
        dev_ram=dev_ram,
        allowed=allowed,
        t_list=t.tolist(),
        comm_list=comm.tolist(),
        reserves=tuple(reserves),
        link_model=link_model,
        record_s=record_seconds(link) if link_model.wire else 0.0,
        run_w=run_w,
        wait_w=wait_w,
        e_list=e_list,
        ce_list=ce_list,
    )


def board_link(boards: Boards) -> LinkSpec:
    """The board-to-board links of ``boards`` at their one rate (``board_baud``, else ``baud``,
    or the ``[[link.pair]]`` rate every pair of devices shares); BoardFileError naming two links
    whose rates differ (the solvers cost ``OUT_j`` once per layer: module docstring)."""
    link, names = boards.link, [d.name for d in boards.devices]
    rates = {(a, b): link.pair_rate(a, b) for i, a in enumerate(names) for b in names[i + 1 :]}
    if len(set(rates.values())) > 1:
        (a1, b1), r1 = next(iter(rates.items()))
        (a2, b2), r2 = next((k, v) for k, v in rates.items() if v != r1)
        raise BoardFileError(
            f"{boards.source_path or 'boards.toml'}: link {a1}-{b1} runs at {r1} baud but "
            f"{a2}-{b2} at {r2}; the planner costs every board-to-board link at one rate, so "
            "give every pair of devices the same baud ([link] board_baud, or the same baud in "
            "each [[link.pair]])"
        )
    return link.at(next(iter(rates.values()), link.board_rate))


def energy_tables(
    t: np.ndarray, comm: np.ndarray, run_w: Sequence[float], wait_w: Sequence[float]
) -> tuple[list[list[float]] | None, list[list[float]] | None]:
    """``e[j][i] = L_ij (delta_i + S)`` and ``ce[j][i] = comm_j (delta_i + S)`` (J).

    One inference at a time: every board of the set is powered for the latency ``I``; a board
    draws its run power ``P_i`` while it computes or sends (the firmware polls the UART's TXE)
    and its sleep power ``p_i`` otherwise (it waits in WFI, receiving by interrupt). So
    ``E = sum_i [P_i A_i + p_i (I - A_i)] = sum_i delta_i A_i + S I`` with ``A_i = L_i + S_i``,
    ``delta_i = P_i - p_i`` and ``S = sum_i p_i``; since ``I`` is the sum of the layers' times
    and the transfers, each layer and each transfer carries its own share (sender's ``delta``
    plus ``S``). None, None without energy data.
    """
    if not run_w:
        return None, None
    total_wait = float(sum(wait_w))
    extra = np.array([r - w for r, w in zip(run_w, wait_w, strict=True)]) + total_wait
    return (t * extra[None, :]).tolist(), (comm[:, None] * extra[None, :]).tolist()


def with_bounds(
    problem: Problem, max_latency_s: float | None = None, max_waiting_s: float | None = None
) -> Problem:
    """``problem`` with the energy objective's bounds (None: unbounded)."""
    inf = float("inf")
    return replace(
        problem,
        max_latency_s=inf if max_latency_s is None else float(max_latency_s),
        max_waiting_s=inf if max_waiting_s is None else float(max_waiting_s),
    )


def bounded(problem: Problem) -> bool:
    """Whether the problem carries a latency or waiting-time bound."""
    return math.isfinite(problem.max_latency_s) or math.isfinite(problem.max_waiting_s)


def meets_bounds(problem: Problem, a: Sequence[int]) -> bool:
    """``I <= max_latency_s`` and ``W <= max_waiting_s`` (within the 1e-9 tie tolerance), with
    the solvers' ``I`` and ``W`` (:func:`value_of`)."""
    for objective, cap in (
        ("latency", problem.max_latency_s),
        ("throughput", problem.max_waiting_s),
    ):
        if math.isfinite(cap) and value_of(problem, a, objective) > cap * (1 + TOL):
            return False
    return True


def runs(assignment: Sequence[int]) -> list[tuple[int, int, int]]:
    """Maximal runs ``(device, first, last)`` of an assignment: the sub-models, in order."""
    out: list[tuple[int, int, int]] = []
    start = 0
    for j in range(1, len(assignment) + 1):
        if j == len(assignment) or assignment[j] != assignment[start]:
            out.append((assignment[start], start, j - 1))
            start = j
    return out


def count_runs(assignment: Sequence[int]) -> int:
    """Number of sub-models of an assignment."""
    return 1 + sum(1 for a, b in pairwise(assignment) if a != b)


# --- the one comparison every solver uses -------------------------------------------------------


def close(a: float, b: float) -> bool:
    """``|a - b| <= 1e-9 * max(|a|, |b|)`` (SPEC.md, Ties)."""
    return abs(a - b) <= TOL * max(abs(a), abs(b))


def better(
    value_a: float,
    nsub_a: int,
    seq_a: Sequence[int],
    value_b: float,
    nsub_b: int,
    seq_b: Sequence[int],
) -> bool:
    """Is candidate A strictly preferred to B? (SPEC.md, Ties.)

    ``value`` is minimised (latency ``I`` or waiting time ``W``); values within a relative 1e-9
    tie, then fewer sub-models win, then the lexicographically smallest device sequence (the
    per-layer assignment tuple).
    """
    if not close(value_a, value_b):
        return value_a < value_b
    if nsub_a != nsub_b:
        return nsub_a < nsub_b
    return tuple(seq_a) < tuple(seq_b)


# --- evaluation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluation:
    """Every figure of SPEC.md for one assignment.

    Per device ``i``: ``compute[i] = L_i`` (eq. 8), ``send[i] = S_i``, ``recv[i] = R'_i``,
    ``inter[i] = L*_i`` (eqs. 15-16 as SPEC.md reads them). Per sub-model ``k``:
    ``sub_compute[k]`` (eq. 7) and ``sub_transfer[k]``, the time to send its output to the next
    sub-model (0 for the last), ``sub_wire[k]`` its bytes (payload and on the wire; the last
    one's is the transfer to the host). ``host_in_s`` / ``host_out_s``: the host's input and
    output transfers, part of ``latency_s`` when the link model has ``host_io``
    (``host_io_s``).
    """

    assignment: tuple[int, ...]
    submodels: tuple[tuple[int, int, int], ...]
    compute: tuple[float, ...]
    send: tuple[float, ...]
    recv: tuple[float, ...]
    inter: tuple[float, ...]
    flash_used: tuple[int, ...]
    ram_used: tuple[int, ...]
    sub_compute: tuple[float, ...]
    sub_transfer: tuple[float, ...]
    latency_s: float  # I = L + T (eq. 13)
    waiting_s: float  # W of eq. 17 as SPEC.md reads it
    ref9_waiting_s: float  # max_i (L_i + S_i), reference [9]
    bottleneck: int  # ib = argmax_i (L_i + S_i + R'_i), first index on exact ties
    violations: tuple[str, ...]
    sub_wire: tuple[Wire, ...] = ()
    host_in: Wire | None = None
    host_in_s: float = 0.0
    host_out_s: float = 0.0
    host_io_s: float = 0.0  # the part of latency_s that is the host's transfers
    #: ``--result-on head``: the tail's transfer of the result back to the head over the return
    #: link, part of ``latency_s`` and of the tail's ``send`` and the head's ``recv``
    return_s: float = 0.0
    #: per device ``(compute J, transfer J, waiting J)`` of one inference and their sum
    #: (:func:`energy_breakdown`); empty / None without energy data
    energy_by_device: tuple[tuple[float, float, float], ...] = ()
    energy_j: float | None = None

    @property
    def feasible(self) -> bool:
        """Constraints (4) and (5) hold on every device."""
        return not self.violations

    @property
    def throughput_per_s(self) -> float:
        """``1 / W`` (eq. 17)."""
        return 1.0 / self.waiting_s if self.waiting_s > 0 else float("inf")

    @property
    def throughput_ref9_per_s(self) -> float:
        """``1 / max_i (L_i + S_i)`` (reference [9])."""
        return 1.0 / self.ref9_waiting_s if self.ref9_waiting_s > 0 else float("inf")

    def value(self, objective: str) -> float:
        """The minimised quantity: latency ``I``, waiting time ``W`` or energy ``E``."""
        if objective == "energy":
            return float("inf") if self.energy_j is None else self.energy_j
        return self.latency_s if objective == "latency" else self.waiting_s


def evaluate(problem: Problem, assignment: Sequence[int]) -> Evaluation:
    """Evaluate an assignment against SPEC.md (objectives and constraints (4)-(5))."""
    a = tuple(int(x) for x in assignment)
    if len(a) != problem.n or any(not 0 <= x < problem.d for x in a):
        raise ValueError(f"assignment {a} does not match {problem.n} layers x {problem.d} devices")
    d, t, comm = problem.d, problem.t_list, problem.comm_list
    subs = runs(a)
    sub_compute = [sum(t[j][dev] for j in range(lo, hi + 1)) for dev, lo, hi in subs]
    rec = problem.record_s
    sub_transfer = [comm[hi] + (k + 1) * rec for k, (_, _, hi) in enumerate(subs[:-1])] + [0.0]
    compute, send, recv, inter = [0.0] * d, [0.0] * d, [0.0] * d, [0.0] * d
    seen: set[int] = set()
    for k, (dev, _, _) in enumerate(subs):
        compute[dev] += sub_compute[k]
        if k > 0 and dev in seen:
            recv[dev] += sub_transfer[k - 1]
        send[dev] += sub_transfer[k]
        seen.add(dev)
    for dev in seen:
        ks = [k for k, s in enumerate(subs) if s[0] == dev]
        inter[dev] = sum(sub_compute[k] for k in range(ks[0] + 1, ks[-1]) if subs[k][0] != dev)
    return_s = _return_s(problem, subs)
    if return_s:  # --result-on head: the tail sends each result back, the head receives it
        send[subs[-1][0]] += return_s
        recv[subs[0][0]] += return_s
    q = [compute[i] + send[i] + recv[i] for i in range(d)]
    ib = max(range(d), key=lambda i: (q[i], -i))
    host_in, host_in_s, host_out_s = _host_io(problem, subs)
    host_io_s = host_in_s + host_out_s if problem.link_model.host_io else 0.0
    wires = _wires(problem, subs)
    flash_used, ram_used = [0] * d, [0] * d
    for j, dev in enumerate(a):
        flash_used[dev] += int(problem.flash[j])
        ram_used[dev] = max(ram_used[dev], int(problem.ram[j]))
    latency = sum(compute) + sum(sub_transfer) + host_io_s + return_s
    active = list(send)
    if problem.link_model.host_io:
        active[subs[-1][0]] += host_out_s
    by_device = energy_breakdown(problem, compute, active, latency)
    return Evaluation(
        assignment=a,
        submodels=tuple(subs),
        compute=tuple(compute),
        send=tuple(send),
        recv=tuple(recv),
        inter=tuple(inter),
        flash_used=tuple(flash_used),
        ram_used=tuple(ram_used),
        sub_compute=tuple(sub_compute),
        sub_transfer=tuple(sub_transfer),
        latency_s=latency,
        waiting_s=q[ib] + inter[ib],
        ref9_waiting_s=max(compute[i] + send[i] for i in range(d)),
        bottleneck=ib,
        violations=tuple(_violations(problem, flash_used, ram_used)),
        sub_wire=wires,
        host_in=host_in,
        host_in_s=host_in_s,
        host_out_s=host_out_s,
        host_io_s=host_io_s,
        return_s=return_s,
        energy_by_device=by_device,
        energy_j=sum(sum(row) for row in by_device) if by_device else None,
    )


def energy_breakdown(
    problem: Problem, compute: Sequence[float], sending: Sequence[float], latency: float
) -> tuple[tuple[float, float, float], ...]:
    """Per device ``(P_i L_i, P_i S_i, p_i (I - L_i - S_i))`` in J: computing, sending (the
    firmware polls TXE, so at run power) and everything else of the latency ``I`` at sleep
    power (waiting in WFI, receiving by interrupt); :func:`energy_tables` gives the same total
    to the solvers. ``sending`` includes the host output transfer of the last device when it is
    counted in the latency. Empty without energy data."""
    if not problem.run_w:
        return ()
    out = []
    for i, (run, wait) in enumerate(zip(problem.run_w, problem.wait_w, strict=True)):
        busy = compute[i] + sending[i]
        out.append((run * compute[i], run * sending[i], wait * max(0.0, latency - busy)))
    return tuple(out)


def _host_io(problem: Problem, subs: Sequence[tuple[int, int, int]]) -> tuple[Wire, float, float]:
    """The host's input transfer and the input / output seconds at the host link's rate
    (counted in the latency only with the link model's ``host_io``).

    The host sends an empty TIMING before the input; the last device sends one record per
    sub-model with the output (:mod:`splitter.cost.wire`).
    """
    link = problem.host_link
    inp = problem.transfer(problem.link_model.input_bytes, 0)
    out = problem.transfer(problem.link_model.output_bytes, len(subs))
    return inp, inp.seconds(link), out.seconds(link)


def _return_s(problem: Problem, subs: Sequence[tuple[int, int, int]]) -> float:
    """Seconds of the result's trip from the tail back to the head over the return link of
    ``--result-on head`` (``link_model.return_bytes``; the TIMING records of the inference tag
    and of every sub-model go with it, :mod:`splitter.cost.wire`); 0 without a return link or
    when one device runs the whole chain (head = tail)."""
    nbytes = problem.link_model.return_bytes
    if not nbytes or subs[0][0] == subs[-1][0]:
        return 0.0
    return problem.transfer(nbytes, len(subs) + 1).seconds(problem.board_link)


def _wires(problem: Problem, subs: Sequence[tuple[int, int, int]]) -> tuple[Wire, ...]:
    """Per sub-model, its output's transfer (the last one's to the host)."""
    last = problem.link_model.output_bytes or int(problem.costs[-1].out_bytes)
    return tuple(
        problem.transfer(last if k == len(subs) - 1 else int(problem.costs[hi].out_bytes), k + 1)
        for k, (_, _, hi) in enumerate(subs)
    )


def _violations(problem: Problem, flash_used: list[int], ram_used: list[int]) -> list[str]:
    out = []
    for i, dev in enumerate(problem.boards.devices):
        if flash_used[i] > problem.dev_flash[i]:
            over = flash_used[i] - int(problem.dev_flash[i])
            out.append(
                f"(4) device {dev.name}: flash {flash_used[i]} B exceeds by {over} B"
                + problem.flash_note(i)
            )
        if ram_used[i] > problem.dev_ram[i]:
            over = ram_used[i] - int(problem.dev_ram[i])
            out.append(
                f"(5) device {dev.name}: RAM {ram_used[i]} B exceeds by {over} B"
                + problem.ram_note(i)
            )
    return out


def objective_value(problem: Problem, a: Sequence[int], objective: str) -> float:
    """The minimised value (``I`` or ``W``) of a complete assignment, without feasibility."""
    ev = evaluate(problem, a)
    return ev.value(objective)


def is_feasible(problem: Problem, a: Sequence[int]) -> bool:
    """Constraints (4) and (5) for a complete assignment."""
    used = [0] * problem.d
    for j, dev in enumerate(a):
        if not problem.allowed[j, dev]:
            return False
        used[dev] += int(problem.flash[j])
    return all(used[i] <= problem.dev_flash[i] for i in range(problem.d))


def value_of(problem: Problem, a: Sequence[int], objective: str) -> float:
    """Fast ``I`` (eq. 13) or ``W`` (eq. 17 as SPEC.md reads it) of a complete assignment.

    The same formulas as :func:`evaluate` without building an :class:`Evaluation`; solvers use it
    on every candidate. Like the solvers' own bounds it leaves out the TIMING records and the
    host's transfers (module docstring): equal to :func:`evaluate` under the thesis's model.
    """
    t, comm = problem.t_list, problem.comm_list
    n = len(a)
    if objective == "energy":
        return energy_value(problem, a)
    if objective == "latency":
        total = 0.0
        for j in range(n):
            total += t[j][a[j]]
            if j + 1 < n and a[j + 1] != a[j]:
                total += comm[j]
        return total
    d = problem.d
    compute, q_extra = [0.0] * d, [0.0] * d
    first = [-1] * d
    last = [-1] * d
    for j in range(n):
        dev = a[j]
        compute[dev] += t[j][dev]
        if first[dev] < 0:
            first[dev] = j
        elif a[j - 1] != dev:
            q_extra[dev] += comm[j - 1]  # R'_i: received into a non-first sub-model
        last[dev] = j
        if j + 1 < n and a[j + 1] != dev:
            q_extra[dev] += comm[j]  # S_i
    q = [compute[i] + q_extra[i] for i in range(d)]
    ib = max(range(d), key=lambda i: (q[i], -i))
    inter = sum(t[j][a[j]] for j in range(first[ib] + 1, last[ib]) if a[j] != ib)
    return q[ib] + inter


def energy_value(problem: Problem, a: Sequence[int]) -> float:
    """The solvers' energy of one inference, ``sum_j e[j][a_j] + sum_{a_j != a_j+1}
    ce[j][a_j]`` (:func:`energy_tables`; TIMING records and host transfers left out, as in
    :func:`value_of`)."""
    e, ce = problem.e_list, problem.ce_list
    if e is None or ce is None:
        raise ValueError("the problem has no energy data")
    n = len(a)
    total = 0.0
    for j in range(n):
        total += e[j][a[j]]
        if j + 1 < n and a[j + 1] != a[j]:
            total += ce[j][a[j]]
    return total
