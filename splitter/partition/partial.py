"""Planning with PEX partial execution: ``--partial-execution off | auto | on``.

* ``off``: the chain as imported, every op run whole.
* ``on``: the chain with its executable loops fused (:func:`splitter.cost.pex_chain.
  partial_chain`): every loop that lowers a layer's RAM, whether or not a board needs it;
  row loops in the widest bands of rows the schedule's peak allows when that plan fits, else
  one row per iteration.
* ``auto`` (the default): plan without partial execution; only when no plan fits the boards
  (:class:`InfeasibleError`) plan again with the loops. A plan that fits is never changed:
  partial execution costs no extra MACs, but its one-channel / one-row kernel calls run slower
  than the whole-tensor kernels (``benchmarks/results/pex.md``) and a loop's layers can no longer
  be cut apart, so it is used when RAM demands it.

With loops, the fastest loops that fit: int8 channel loops first run several channels per
iteration (:func:`splitter.cost.pex_chain.loop_steps`: the tuned whole-op kernels on 16-channel
slabs), and row loops in bands of rows up to the schedule's peak (``partial_chain(wide=True)``);
only when that plan does not fit, one row per iteration, then fewer channels (4, then 1: the
least memory). Loops lower RAM only: when the layers' weights alone (``FLASH_j``, the same
with or without loops) exceed the devices' whole flash, the failure without loops is the
answer, and no looped chain is built or planned (:func:`loops_cannot_fit`).
"""

from __future__ import annotations

from splitter.cost.pex_chain import MODES, loop_steps, partial_chain
from splitter.errors import InfeasibleError
from splitter.ir import Boards, Chain, Plan
from splitter.partition.planner import plan_chain


def plan_partial(
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
    """The chain the plan is for (with loops or not, per ``mode``) and the plan (``host_io``:
    :func:`splitter.partition.planner.plan_chain`)."""
    if mode not in MODES:
        raise ValueError(f"partial execution mode {mode!r}: one of {', '.join(MODES)}")
    fused = partial_chain(chain, activation_bytes)
    if mode == "off":
        try:
            return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
        except InfeasibleError as exc:
            if fused is chain:
                raise
            looped = sum(1 for layer in fused.layers if layer.loops)
            raise InfeasibleError(
                f"{exc}; or plan with --partial-execution auto (PEX loops lower the RAM of "
                f"{looped} layer group(s))"
            ) from exc
    failure: InfeasibleError | None = None
    if mode == "auto":
        try:
            return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
        except InfeasibleError as exc:
            if loops_cannot_fit(chain, boards):
                raise
            failure = exc
    return _plan_looped(chain, fused, boards, objective, solver, activation_bytes, failure,
                        host_io=host_io, **options)  # fmt: skip


def loops_cannot_fit(chain: Chain, boards: Boards) -> bool:
    """Whether no PEX loop can make ``chain`` fit ``boards``: its layers' flash (``FLASH_j``,
    their weights, which loops run as they are) exceeds the devices' flash budgets together,
    or one layer's exceeds the largest budget: SPEC.md (1) and (2) against the budgets before
    any firmware code, so they fail whatever code the loops link."""
    layers = [layer.cost.flash for layer in chain.layers]
    budgets = [device.flash_bytes for device in boards.devices]
    return sum(layers) > sum(budgets) or max(layers, default=0) > max(budgets, default=0)


def _plan_looped(
    chain: Chain,
    fused: Chain,
    boards: Boards,
    objective: str,
    solver: str,
    activation_bytes: int | None,
    failure: InfeasibleError | None,
    *,
    host_io: bool,
    **options: object,
) -> tuple[Chain, Plan]:
    """The plan of ``chain`` with its loops, fastest first: for each of
    :func:`splitter.cost.pex_chain.loop_steps` (channels per iteration, most first) the row
    loops in bands of rows up to the schedule's peak (fewer kernel calls, more RAM where a loop
    is not the peak), then one row per iteration; the first plan that fits (a plan that fits
    with one channel and one row per iteration, the least memory, is always found).
    ``fused``: the loops at the first step, one row per iteration. ``failure``: why ``chain``
    without loops did not fit (``auto``), raised when no loop helps; without it (``on``) the
    chain as it is is planned then."""
    tried: list[object] = []
    steps = loop_steps(chain)
    for step in steps:
        for wide in (True, False):
            if step == steps[0] and not wide:
                looped = fused
            else:
                looped = partial_chain(chain, activation_bytes, step, wide=wide)
            loops = [layer.loops for layer in looped.layers]
            if looped is chain or loops in tried:
                continue
            tried.append(loops)
            try:
                return looped, plan_chain(looped, boards, objective, solver, host_io=host_io,
                                          **options)  # fmt: skip
            except InfeasibleError as exc:
                failure = exc
    if failure is not None:
        raise failure
    return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
