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

from dataclasses import dataclass

from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.bnb import cost_to_go
from splitter.partition.problem import TOL, Problem, value_of

BEAM_WIDTHS = (16, 256)


@dataclass(slots=True)
class _Label:
    dev: int
    cost: float
    nsub: int
    rank: int
    fvec: tuple[int, ...]
    parent: int  # index into the previous layer's label list, -1 at layer 0


def solve_dp(problem: Problem, objective: str, **options: object) -> SolverResult:
    """Exact minimum latency; ``objective`` must be ``"latency"``."""
    from splitter.errors import SolverError

    if objective != "latency":
        raise SolverError("dp solves latency only; use --solver bnb or cpsat for throughput")
    h = cost_to_go(problem)
    nodes = 0
    ub = float("inf")
    start = options.get("incumbent")
    if start is not None:
        ub = value_of(problem, tuple(start), "latency")  # type: ignore[arg-type]
    else:
        for width in BEAM_WIDTHS:
            found, used = _label_setting(problem, h, ub, beam=width)
            nodes += used
            if found is not None:
                ub = value_of(problem, found, "latency")
                break
    found, used = _label_setting(problem, h, ub, beam=None)
    return SolverResult(found, nodes=nodes + used, optimal=True)


def _binding(problem: Problem) -> list[int]:
    """Devices whose flash the layers that fit them could overflow."""
    out = []
    for i in range(problem.d):
        need = int(problem.flash[problem.allowed[:, i]].sum())
        if need > problem.dev_flash[i]:
            out.append(i)
    return out


def _label_setting(
    problem: Problem, h: list[list[float]], ub: float, beam: int | None
) -> tuple[tuple[int, ...] | None, int]:
    """One forward pass; returns the best complete assignment found and the labels created."""
    n, d, t, comm = problem.n, problem.d, problem.t_list, problem.comm_list
    binding = _binding(problem)
    slot = {dev: k for k, dev in enumerate(binding)}
    caps = [int(problem.dev_flash[i]) for i in binding]
    flash = [int(x) for x in problem.flash]
    allowed = problem.allowed.tolist()
    limit = ub * (1 + TOL)
    margin = TOL * ub * (1 + TOL) * (1 + 1e-6) if ub < float("inf") else float("inf")
    layers: list[list[_Label]] = []
    labels = [_Label(-1, 0.0, 0, 0, tuple([0] * len(binding)), -1)]
    nodes = 0
    for j in range(n):
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
                nsub = lab.nsub + (1 if change or j == 0 else 0)
                children.append(_Label(i, cost, nsub, len(children), fvec, pidx))
        nodes += len(children)
        labels = _dominance_filter(children, margin)
        if beam is not None and len(labels) > beam:
            labels.sort(key=lambda lb: (lb.cost + h[j][lb.dev], lb.rank))
            labels = sorted(labels[:beam], key=lambda lb: lb.rank)
        layers.append(labels)
        if not labels:
            return None, nodes
    return _best_final(problem, layers), nodes


def _dominance_filter(children: list[_Label], margin: float) -> list[_Label]:
    """Drop dominated labels (see module docstring); the survivors in rank order."""
    groups: dict[int, list[_Label]] = {}
    for lab in children:
        groups.setdefault(lab.dev, []).append(lab)
    kept_all: list[_Label] = []
    for group in groups.values():
        group.sort(key=lambda lb: (lb.cost, lb.nsub, lb.rank))
        kept: list[_Label] = []
        for lab in group:
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
