"""Exact latency by label setting over the layers (a resource-constrained shortest path).

A *label* at layer ``j`` is a prefix assignment of layers ``0..j`` summarised by: the device of
layer ``j``, its latency so far (compute plus transfers, eq. 13), its number of sub-models, its
lexicographic rank among the prefixes of layer ``j``, and the flash it uses on every *binding*
device (a device is binding when the layers that fit it need more flash than it has; the others
can never overflow and are not tracked). Extending a label by layer ``j+1`` on device ``k`` adds
``L_{j+1,k}`` and, when ``k`` differs, ``comm_j``.

Pruning, both exact:

* bound: ``cost + h[j][i]`` (exact cost-to-go ignoring flash, see :func:`bnb.cost_to_go`) above the
  incumbent ``UB * (1 + 1e-9)`` cannot lead to an optimal (or tied) plan;
* dominance, within labels ending on the same device: ``A`` dominates ``B`` when ``A`` uses no more
  flash on any binding device and either ``A`` is no worse on latency, sub-model count and rank
  (so every completion of ``B`` is matched by a completion of ``A`` that wins or ties under the
  SPEC.md tie rule), or ``A`` is cheaper by more than the tie tolerance at ``UB``.

The incumbent comes from a beam run of the same label setting (best labels by ``cost + h``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.bnb import cost_to_go
from splitter.partition.problem import TOL, Problem, value_of

BEAM_WIDTHS = (16, 64, 256)


@dataclass(slots=True)
class _Label:
    dev: int
    cost: float
    nsub: int
    rank: int
    fvec: tuple[int, ...]
    parent: int  # index into the previous layer's label list, -1 at layer 0


def solve_dp(problem: Problem, objective: str, **options: object) -> SolverResult:
    """Exact minimum latency; ``objective`` must be ``"latency"``.

    Phases: a narrow beam gives an incumbent; Lagrangian multipliers of the binding flash
    constraints are fitted against it; wider beams guided by the penalised cost-to-go improve the
    incumbent; the exact label setting then runs with every bound.
    """
    from splitter.errors import SolverError

    if objective != "latency":
        raise SolverError("dp solves latency only; use --solver bnb or cpsat for throughput")
    h = cost_to_go(problem)
    binding = _binding(problem)
    plain = [(h, [0.0] * len(binding))]
    nodes = 0
    ub = float("inf")
    best: tuple[int, ...] | None = None
    start = options.get("incumbent")
    if start is not None:
        best = tuple(int(x) for x in start)  # type: ignore[attr-defined]
        ub = value_of(problem, best, "latency")
    bounds = plain
    for width in BEAM_WIDTHS:
        if not binding and ub < float("inf"):
            break
        found, used = _label_setting(problem, bounds, ub, beam=width)
        nodes += used
        if found is not None and value_of(problem, found, "latency") < ub:
            best, ub = found, value_of(problem, found, "latency")
        if binding and ub < float("inf"):
            bounds = plain + _lagrangian_bounds(problem, binding, ub)
    limit = options.get("time_limit")
    deadline = time.perf_counter() + float(limit) if limit else None  # type: ignore[arg-type]
    try:
        found, used = _label_setting(problem, bounds, ub, None, deadline, best)
    except _Stop as stop:  # time limit: the incumbent, not proved optimal
        return SolverResult(stop.incumbent, nodes=nodes + stop.nodes, optimal=False)
    return SolverResult(found, nodes=nodes + used, optimal=True)


class _Stop(Exception):
    def __init__(self, incumbent: tuple[int, ...] | None, nodes: int) -> None:
        super().__init__("time limit")
        self.incumbent, self.nodes = incumbent, nodes


def _binding(problem: Problem) -> list[int]:
    """Devices whose flash the layers that fit them could overflow."""
    out = []
    for i in range(problem.d):
        need = int(problem.flash[problem.allowed[:, i]].sum())
        if need > problem.dev_flash[i]:
            out.append(i)
    return out


def _penalised_cost_to_go(
    problem: Problem, binding: list[int], lam: list[float]
) -> tuple[list[list[float]], float, list[int]]:
    """Cost-to-go with ``L_ij + lam_i FLASH_j`` on binding devices, root value and its path."""
    n, d, t, comm = problem.n, problem.d, problem.t_list, problem.comm_list
    pen = [0.0] * d
    for k, i in enumerate(binding):
        pen[i] = lam[k]
    flash = [float(x) for x in problem.flash]
    inf = float("inf")
    tp = [[t[j][i] + pen[i] * flash[j] if problem.allowed[j, i] else inf for i in range(d)]
          for j in range(n)]  # fmt: skip
    h = [[0.0] * d for _ in range(n)]
    for j in range(n - 2, -1, -1):
        nxt = [tp[j + 1][k] + h[j + 1][k] for k in range(d)]
        best = min(nxt)
        h[j] = [min(nxt[i], comm[j] + best) for i in range(d)]
    root = [tp[0][i] + h[0][i] for i in range(d)]
    path = [min(range(d), key=lambda i: root[i])]
    for j in range(n - 1):
        i = path[-1]
        path.append(
            min(range(d), key=lambda k: tp[j + 1][k] + h[j + 1][k] + (comm[j] if k != i else 0.0))
        )
    return h, min(root), path


def _lagrangian_bounds(
    problem: Problem, binding: list[int], ub: float, iterations: int = 25
) -> list[tuple[list[list[float]], list[float]]]:
    """Penalised cost-to-go tables for a few multipliers ``lam >= 0`` found by subgradient ascent.

    For any ``lam >= 0`` and any feasible completion from a label with remaining flash ``rem_i``:
    ``cost + h_lam[j][i] - sum_i lam_i rem_i`` is a lower bound on the final latency (Lagrangian
    relaxation of constraint (4)).
    """
    caps = [float(problem.dev_flash[i]) for i in binding]
    flash = [float(x) for x in problem.flash]
    lam = [0.0] * len(binding)
    out: list[tuple[list[list[float]], list[float]]] = []
    best_lb = -float("inf")
    for _ in range(iterations):
        h, root, path = _penalised_cost_to_go(problem, binding, lam)
        lb = root - sum(lm * c for lm, c in zip(lam, caps, strict=True))
        if lb > best_lb + 1e-12 * abs(ub):
            best_lb = lb
            out.append((h, list(lam)))
        grad = [-c for c in caps]
        for j, i in enumerate(path):
            if i in binding:
                grad[binding.index(i)] += flash[j]
        norm = sum(g * g for g in grad)
        if norm == 0 or best_lb >= ub:
            break
        step = (ub - lb) / norm
        lam = [max(0.0, lm + step * g) for lm, g in zip(lam, grad, strict=True)]
    return out[-3:]


def _label_setting(
    problem: Problem,
    bounds: list[tuple[list[list[float]], list[float]]],
    ub: float,
    beam: int | None,
    deadline: float | None = None,
    incumbent: tuple[int, ...] | None = None,
) -> tuple[tuple[int, ...] | None, int]:
    """One forward pass; returns the best complete assignment found and the labels created.

    ``bounds`` are ``(h_lam, lam)`` pairs: cost-to-go tables (penalised by ``lam`` on the binding
    devices, ``lam = 0`` for the plain one); a label is cut when any of them bounds it above UB.
    """
    n, d, t, comm = problem.n, problem.d, problem.t_list, problem.comm_list
    binding = _binding(problem)
    slot = {dev: k for k, dev in enumerate(binding)}
    caps = [int(problem.dev_flash[i]) for i in binding]
    flash = [int(x) for x in problem.flash]
    allowed = problem.allowed.tolist()
    limit = ub * (1 + TOL)
    h = bounds[0][0]
    extra = [(hb, lam) for hb, lam in bounds[1:] if any(lam)]
    margin = TOL * ub * (1 + TOL) * (1 + 1e-6) if ub < float("inf") else float("inf")
    layers: list[list[_Label]] = []
    labels = [_Label(-1, 0.0, 0, 0, tuple([0] * len(binding)), -1)]
    nodes = 0
    for j in range(n):
        if deadline is not None and time.perf_counter() > deadline:
            raise _Stop(incumbent, nodes)
        children: list[_Label] = []
        for pidx, lab in enumerate(labels):
            for i in range(d):
                if not allowed[j][i]:
                    continue
                fvec = lab.fvec
                if i in slot:
                    s = slot[i]
                    used = fvec[s] + flash[j]
                    if used > caps[s]:
                        continue
                    fvec = (*fvec[:s], used, *fvec[s + 1 :])
                change = lab.dev >= 0 and lab.dev != i
                cost = lab.cost + t[j][i] + (comm[j - 1] if change else 0.0)
                if cost + h[j][i] > limit:
                    continue
                if extra and _lagrange_cut(extra, j, i, cost, fvec, caps, limit):
                    continue
                nsub = lab.nsub + (1 if change or j == 0 else 0)
                children.append(_Label(i, cost, nsub, len(children), fvec, pidx))
        nodes += len(children)
        if deadline is not None and time.perf_counter() > deadline:
            raise _Stop(incumbent, nodes)
        if beam is not None:
            children = _beam_cut(children, bounds[-1], caps, j, 4 * beam)
        survivors = _dominance_filter(children, margin, deadline)
        if survivors is None:
            raise _Stop(incumbent, nodes)
        labels = survivors
        if beam is not None:
            labels = _beam_cut(labels, bounds[-1], caps, j, beam)
        layers.append(labels)
        if not labels:
            return None, nodes
    return _best_final(problem, layers), nodes


def _beam_cut(
    labels: list[_Label],
    bound: tuple[list[list[float]], list[float]],
    caps: list[int],
    j: int,
    width: int,
) -> list[_Label]:
    """The ``width`` labels of least (penalised) bound, in rank order (beam phases only)."""
    if len(labels) <= width:
        return labels
    hb, lam = bound

    def key(lb: _Label) -> tuple[float, int]:
        slack = sum(lm * (c - u) for lm, c, u in zip(lam, caps, lb.fvec, strict=True))
        return (lb.cost + hb[j][lb.dev] - slack, lb.rank)

    return sorted(sorted(labels, key=key)[:width], key=lambda lb: lb.rank)


def _lagrange_cut(
    extra: list[tuple[list[list[float]], list[float]]],
    j: int,
    i: int,
    cost: float,
    fvec: tuple[int, ...],
    caps: list[int],
    limit: float,
) -> bool:
    """``cost + h_lam[j][i] - sum_k lam_k (cap_k - used_k) > UB``: no feasible completion wins."""
    for hb, lam in extra:
        slack = sum(lm * (c - u) for lm, c, u in zip(lam, caps, fvec, strict=True))
        if cost + hb[j][i] - slack > limit:
            return True
    return False


def _dominance_filter(
    children: list[_Label], margin: float, deadline: float | None = None
) -> list[_Label] | None:
    """Drop dominated labels (see module docstring); the survivors in rank order.

    None when ``deadline`` passes during the filter.
    """
    groups: dict[int, list[_Label]] = {}
    for lab in children:
        groups.setdefault(lab.dev, []).append(lab)
    kept_all: list[_Label] = []
    for group in groups.values():
        group.sort(key=lambda lb: (lb.cost, lb.nsub, lb.rank))
        kept: list[_Label] = []
        for count, lab in enumerate(group):
            if deadline is not None and count % 256 == 255 and time.perf_counter() > deadline:
                return None
            if not any(_dominates(k, lab, margin) for k in kept):
                kept.append(lab)
        kept_all.extend(kept)
    kept_all.sort(key=lambda lb: lb.rank)
    return kept_all


def _dominates(a: _Label, b: _Label, margin: float) -> bool:
    if any(x > y for x, y in zip(a.fvec, b.fvec, strict=True)):
        return False
    if b.cost - a.cost > margin:
        return True
    return a.cost <= b.cost and a.nsub <= b.nsub and a.rank <= b.rank


def _best_final(problem: Problem, layers: list[list[_Label]]) -> tuple[int, ...] | None:
    inc = Incumbent()
    for idx in range(len(layers[-1])):
        a = _backtrack(layers, idx)
        inc.offer(value_of(problem, a, "latency"), a)
    return inc.assignment


def _backtrack(layers: list[list[_Label]], idx: int) -> tuple[int, ...]:
    out = []
    for j in range(len(layers) - 1, -1, -1):
        lab = layers[j][idx]
        out.append(lab.dev)
        idx = lab.parent
    return tuple(reversed(out))
