"""Planning with PEX partial execution: ``--partial-execution off | auto | on``.

* ``off``: the chain as imported, every op run whole.
* ``on``: the chain with its executable loops fused (:func:`splitter.cost.pex_chain.
  partial_chain`): every loop that lowers a layer's RAM, whether or not a board needs it.
* ``auto`` (the default): plan without partial execution; only when no plan fits the boards
  (:class:`InfeasibleError`) plan again with the loops. A plan that fits is never changed:
  partial execution costs no extra MACs, but its one-channel / one-row kernel calls run slower
  than the whole-tensor kernels (``benchmarks/results/pex.md``) and a loop's layers can no longer
  be cut apart, so it is used when RAM demands it.

With loops, int8 channel loops first run several channels per iteration
(:func:`splitter.cost.pex_chain.loop_steps`: the tuned whole-op kernels on 16-channel slabs), and
only when that plan does not fit fewer (4, then 1: the least memory).
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
            failure = exc
    return _plan_looped(chain, fused, boards, objective, solver, activation_bytes, failure,
                        host_io=host_io, **options)  # fmt: skip


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
    """The plan of ``chain`` with its loops: ``fused`` (the loops at the first of
    :func:`splitter.cost.pex_chain.loop_steps` channels per iteration) first, then with each
    fewer channels per iteration while nothing fits (more channels per iteration run faster but
    hold more of each inner tensor; a plan that fits with one channel must still be found).
    ``failure``: why ``chain`` without loops did not fit (``auto``), raised when no loop helps;
    without it (``on``) the chain as it is is planned then."""
    wide = any(lp.step > 1 for layer in fused.layers for lp in layer.loops)
    for k, step in enumerate(loop_steps(chain)):
        if k > 0 and fused is not chain and not wide:
            break  # no loop ran several channels: the same chain
        looped = fused if k == 0 else partial_chain(chain, activation_bytes, step)
        if looped is chain:
            continue
        try:
            return looped, plan_chain(looped, boards, objective, solver, host_io=host_io,
                                      **options)  # fmt: skip
        except InfeasibleError as exc:
            failure = exc
    if failure is not None:
        raise failure
    return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
