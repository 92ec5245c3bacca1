"""Plans as data: ``plan_chain`` (chain + boards -> Plan), ``plan_to_dict`` (Plan -> dict).

``splitter plan --json`` prints :func:`plan_to_dict`; ``splitter compile`` reuses it. Every figure
is recomputed from the plan's assignment with :func:`~splitter.partition.problem.evaluate`.
"""

from __future__ import annotations

import math
from typing import Any

from splitter.ir import Boards, Chain, Plan
from splitter.partition import make_problem, solve
from splitter.partition.problem import Problem, evaluate


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


def _num(x: float) -> float | None:
    """JSON has no infinity: an unbounded throughput (zero waiting time) becomes null."""
    return None if math.isinf(x) or math.isnan(x) else x


def plan_to_dict(plan: Plan, chain: Chain, boards: Boards) -> dict[str, Any]:
    """The plan as one JSON-able dict: objective values, solver stats, devices and sub-models.

    Layers are counted from 0 (layer 0 = the input layer), as ``splitter inspect`` prints them.
    Per sub-model: FLASH used (sum, constraint (4)) and RAM used (max, constraint (5)) against the
    device's usable sizes, compute time (eq. 7) and the time to send its output onward.
    """
    problem = chain_problem(chain, boards)
    ev = evaluate(problem, plan.assignment)
    devs = boards.devices
    submodels = []
    for k, sub in enumerate(plan.submodels):
        dev = devs[sub.device_index]
        idx = range(sub.first, sub.last + 1)
        submodels.append(
            {
                "index": k,
                "device": dev.name,
                "device_index": sub.device_index,
                "mcu": dev.part.name,
                "first": sub.first,
                "last": sub.last,
                "first_name": chain.layers[sub.first].name,
                "last_name": chain.layers[sub.last].name,
                "layers": sub.last - sub.first + 1,
                "flash_bytes": sum(int(problem.flash[j]) for j in idx),
                "ram_bytes": max(int(problem.ram[j]) for j in idx),
                "macs": sum(problem.costs[j].macs for j in idx),
                "out_bytes": problem.costs[sub.last].out_bytes,
                "compute_s": ev.sub_compute[k],
                "transfer_s": ev.sub_transfer[k],
            }
        )
    devices = [
        {
            "name": dev.name,
            "index": i,
            "mcu": dev.part.name,
            "port": dev.port,
            "flash_bytes": dev.flash_bytes,
            "ram_bytes": dev.ram_bytes,
            "clock_hz": dev.clock_hz,
            "cpm": dev.cpm,
            "flash_used": ev.flash_used[i],
            "ram_used": ev.ram_used[i],
            "compute_s": ev.compute[i],
            "send_s": ev.send[i],
            "recv_s": ev.recv[i],
            "intermediate_s": ev.inter[i],
        }
        for i, dev in enumerate(devs)
    ]
    return {
        "model": chain.name,
        "source": chain.source_path,
        "boards": boards.source_path,
        "objective": plan.objective,
        "solver": plan.solver,
        "optimal": plan.optimal,
        "gap": plan.gap,
        "nodes": plan.nodes,
        "solve_time_s": plan.solve_time_s,
        "latency_s": plan.latency_s,
        "throughput_per_s": _num(plan.throughput_per_s),
        "throughput_ref9_per_s": _num(plan.throughput_ref9_per_s),
        "waiting_s": ev.waiting_s,
        "bottleneck_device": devs[ev.bottleneck].name,
        "link": {"baud": boards.link.baud, "bits_per_byte": boards.link.bits_per_byte},
        "assignment": list(plan.assignment),
        "devices": devices,
        "submodels": submodels,
    }
