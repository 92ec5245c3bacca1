"""The planner's choice of layer splits (issue 27): which layer, into how many slices.

A conv or dense op can be split into ``k`` output-channel slices (:mod:`splitter.graph.split`);
the split graph is planned at operator granularity (its cuts carry the slices' shared input and
the slices done so far). The choice:

* **when**: the chain is planned whole first (the same call as without this module, PEX
  loops included); only when that finds no plan is a split tried, so a model every layer of
  which fits (or fits with PEX) keeps its plan exactly;
* **which layers**: then every layer that fits no device of the board file on its own (SPEC.md
  constraints (4)-(5) with the firmware's lower-bound code reserve, the test of
  :func:`splitter.partition.constraints.global_violation`) and holds a splittable op (its
  splittable op with the most weight bytes); when none does, the layers that fit no device
  with the upper-bound reserve (every kernel of the model on the device). The layers the user
  names (``--split-layer NAME:K``, ``K`` fixed; ``K = 1`` keeps the layer whole) are split
  whatever the whole chain does;
* **how many slices**: exact over ``k``: every combination of ``k_j in 2..K_j`` over the
  considered layers is planned (each with the whole planning pipeline, reserves repair and PEX
  included) and the best plan by the objective is kept (latency: smallest; throughput: largest;
  ties: fewer slices in all). ``K_j = min(C_j, max(2, D))`` with ``C_j`` the op's output
  channels (its groups for a grouped or depthwise conv, cut at group boundaries) and ``D`` the
  devices: ``k > D`` slices put two slices on one device, which the same
  plan with those two merged does with fewer bytes on the links;
* ``mode = "search"`` also considers the splittable op with the most MACs when no layer needs a
  split, and keeps its split only when it strictly improves the objective (a throughput plan
  whose bottleneck is one heavy layer can share it over two boards).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from splitter.errors import InfeasibleError, SolverError, SplitRequestError
from splitter.graph.split import (
    LayerSplit,
    layer_split,
    max_slices,
    resolve_splits,
    split_graph,
    why_not_splittable,
)
from splitter.ir import Boards, Chain, Op, Plan
from splitter.manifest import LayerSplitEntry

#: ``--split`` modes: "auto" (layers that fit no board), "search" (also try the heaviest layer),
#: "off" (never split, but for ``--split-layer``).
MODES = ("auto", "search", "off")
#: Plans one split choice: the chain it is for and the plan.
PlanFn = Callable[[Chain], tuple[Chain, Plan]]
#: Builds the op-granularity chain of a split graph.
ChainFn = Callable[[Chain, Sequence[LayerSplit]], Chain]


@dataclass(frozen=True)
class SplitPlan:
    """The chain planned, its plan and the splits applied to its graph (empty: none)."""

    chain: Chain
    plan: Plan
    splits: tuple[LayerSplit, ...]


def plan_with_splits(
    chain: Chain,
    boards: Boards,
    plan_fn: PlanFn,
    build_fn: ChainFn,
    *,
    requested: Mapping[str, int] | None = None,
    mode: str = "auto",
    objective: str = "latency",
    trial_fn: PlanFn | None = None,
) -> SplitPlan:
    """The best plan over the split choices of the module docstring. ``trial_fn`` plans the
    split chains tried after the unsplit chain found no plan (default ``plan_fn``): when they
    all fail, the unsplit chain's error is raised, so the trials need not explain theirs (the
    remedies of a "does not fit" error cost seconds each, and there may be hundreds of ``k``
    combinations)."""
    if mode not in MODES:
        raise ValueError(f"split mode {mode!r}: one of {', '.join(MODES)}")
    graph = chain.graph
    where = chain.source_path or chain.name
    if graph is None:
        if requested:
            raise SplitRequestError(
                f"{where}: --split-layer needs a model (.onnx or .tflite); a layer profile has "
                "no ops to split"
            )
        return SplitPlan(*plan_fn(chain), ())
    fixed = resolve_splits(graph, dict(requested or {}), where)
    taken = {s.op for s in fixed}
    devices = len(boards.devices)
    if any(s.slices > 1 for s in fixed):
        free = [] if mode == "off" else _needing_split(chain, boards, taken, upper=False)
        return _best(chain, plan_fn, build_fn, fixed, free, devices, objective)
    try:
        base = SplitPlan(*plan_fn(chain), ())
    except (InfeasibleError, SolverError) as exc:
        if mode == "off":
            raise
        free = _needing_split(chain, boards, taken, upper=False)
        free = free or _needing_split(chain, boards, taken, upper=True)
        if not free or _hopeless(chain, boards, build_fn, [*fixed, *_most(free, devices)]):
            if free:
                raise type(exc)(f"{exc} ({_tried(free, devices)}: no plan either)") from exc
            raise
        try:
            return _best(chain, trial_fn or plan_fn, build_fn, fixed, free, devices, objective)
        except (InfeasibleError, SolverError):
            raise type(exc)(f"{exc} ({_tried(free, devices)}: no plan either)") from exc
    if mode == "search":
        return _search(chain, base, boards, plan_fn, build_fn, objective)
    return base


def _most(free: Sequence[Op], devices: int) -> list[LayerSplit]:
    """Every op of ``free`` split into its most slices."""
    return [_split_of(op, _k_max(op, devices)) for op in free]


def _hopeless(
    chain: Chain, boards: Boards, build_fn: ChainFn, splits: Sequence[LayerSplit]
) -> bool:
    """Whether no ``k`` combination can plan, decided on the split into the most slices: a
    layer of its chain fits no device (SPEC.md constraints (4)-(5) with the lower-bound code
    reserve) both run whole and with every PEX loop that lowers RAM
    (:func:`splitter.cost.pex_chain.partial_chain`). Fewer slices make no slice smaller and
    leave the other layers as they are, so then every combination fails and none is planned
    (a MobileNet whose first layers need more RAM than any board has: hundreds of ``k``
    combinations of its depthwise and pointwise layers, each planned in full, otherwise)."""
    from splitter.cost.pex_chain import partial_chain
    from splitter.partition.planner import chain_problem

    split = build_fn(chain, splits)
    for candidate in (split, partial_chain(split, None)):
        problem = chain_problem(candidate, boards, upper=False)
        if all(problem.allowed[j].any() for j in range(problem.n)):
            return False
    return True


def _needing_split(chain: Chain, boards: Boards, taken: set[str], *, upper: bool) -> list[Op]:
    """Per layer that fits no device alone, its splittable op with the most weight bytes.

    ``upper=False``: with each device's lower-bound code reserve (the runtime and one link, no
    kernel), so the layer fits no device whatever the plan; ``upper=True`` (asked once the
    unsplit chain found no plan): with the reserve of every kernel of the model."""
    from splitter.partition.planner import chain_problem

    problem = chain_problem(chain, boards, upper=upper)
    graph = chain.graph
    assert graph is not None
    out = []
    for j, layer in enumerate(chain.layers):
        if problem.allowed[j].any():
            continue
        ops = [op for op in layer.ops if op.name not in taken]
        ops = [op for op in ops if why_not_splittable(op, graph) is None]
        if ops:
            out.append(max(ops, key=lambda op: sum(int(w.nbytes) for w in op.weights.values())))
    return out


def _best(
    chain: Chain,
    plan_fn: PlanFn,
    build_fn: ChainFn,
    fixed: Sequence[LayerSplit],
    free: Sequence[Op],
    devices: int,
    objective: str,
) -> SplitPlan:
    """Plan every ``k`` combination of ``free`` (with ``fixed``); keep the best."""
    choices = [range(2, _k_max(op, devices) + 1) for op in free]
    best: tuple[tuple[float, int], SplitPlan] | None = None
    first_error: InfeasibleError | SolverError | None = None
    for ks in itertools.product(*choices):
        splits = (*fixed, *(_split_of(op, k) for op, k in zip(free, ks, strict=True)))
        try:
            planned, plan = plan_fn(build_fn(chain, splits))
        except (InfeasibleError, SolverError) as exc:  # no plan with these k
            first_error = first_error or exc
            continue
        key = (_value(plan, objective), sum(s.slices for s in splits))
        if best is None or key < best[0]:
            best = (key, SplitPlan(planned, plan, tuple(s for s in splits if s.slices > 1)))
    if best is None:
        assert first_error is not None
        note = f" ({_tried(free, devices)}: no plan either)" if free else ""
        raise type(first_error)(f"{first_error}{note}") from first_error
    return best[1]


def _tried(free: Sequence[Op], devices: int) -> str:
    """What was tried, for an error message: ``conv3 split into 2..3 slices``."""
    return ", ".join(f"{op.name} split into 2..{_k_max(op, devices)} slices" for op in free)


def _search(
    chain: Chain,
    base: SplitPlan,
    boards: Boards,
    plan_fn: PlanFn,
    build_fn: ChainFn,
    objective: str,
) -> SplitPlan:
    """``base`` (the plan without a split), unless splitting the heaviest splittable op beats
    it."""
    graph = chain.graph
    assert graph is not None
    ops = [op for layer in chain.layers for op in layer.ops]
    ops = [op for op in ops if why_not_splittable(op, graph) is None]
    if not ops:
        return base
    heavy = max(ops, key=lambda op: _op_macs(chain, op))
    try:
        found = _best(chain, plan_fn, build_fn, (), [heavy], len(boards.devices), objective)
    except InfeasibleError:
        return base
    better = _value(found.plan, objective) < _value(base.plan, objective)
    return found if better else base


def _op_macs(chain: Chain, op: Op) -> int:
    from splitter.cost.layer import op_macs

    assert chain.graph is not None
    return op_macs(op, chain.graph.tensors)[1]


def _k_max(op: Op, devices: int) -> int:
    """``K = min(C, max(2, D))`` (module docstring; ``C`` the groups of a grouped conv)."""
    return min(max_slices(op), max(2, devices))


def _split_of(op: Op, k: int) -> LayerSplit:
    return layer_split(op, k)


def _value(plan: Plan, objective: str) -> float:
    """The objective as a value to minimise."""
    return -plan.throughput_per_s if objective == "throughput" else plan.latency_s


def op_chain_of(activation_bytes: int | None) -> ChainFn:
    """The :data:`ChainFn` building the op chain of the split graph (``activation_bytes`` as
    the original chain's)."""

    def build(chain: Chain, splits: Sequence[LayerSplit]) -> Chain:
        from splitter.graph.chain import build_chain

        assert chain.graph is not None
        graph = split_graph(chain.graph, splits)
        return build_chain(graph, activation_bytes=activation_bytes, granularity="op")

    return build


def split_entries(
    chain: Chain, assignment: Sequence[int], boards: Boards, splits: Sequence[LayerSplit]
) -> tuple[LayerSplitEntry, ...]:
    """What the plan, its JSON and the report say about each split."""
    index = {layer.name: j for j, layer in enumerate(chain.layers)}
    out = []
    for split in splits:
        slices = [index[split.slice_name(i)] for i in range(split.slices)]
        concat = index[split.concat_name]
        first = index.get(f"{split.op}.in0", min(slices))  # a grouped conv's input slice
        last = concat
        carried = sum(
            chain.layers[p].cost.out_bytes
            for p in range(first, last)
            if assignment[p] != assignment[p + 1]
        )
        out.append(
            LayerSplitEntry(
                layer=split.op,
                channels=split.channels,
                slices=split.slices,
                ranges=split.ranges,
                devices=tuple(boards.devices[assignment[j]].name for j in slices),
                carried_bytes=int(carried),
            )
        )
    return tuple(out)
