"""Planning with PEX partial execution: ``--partial-execution off | auto | on``.

* ``off``: the chain as imported, every op run whole.
* ``on``: the chain with its executable loops fused (:func:`splitter.cost.pex_chain.
  partial_chain`): every loop that lowers a layer's RAM, whether or not a board needs it.
* ``auto`` (the default): plan without partial execution; only when no plan fits the boards
  (:class:`InfeasibleError`) plan again with the loops. A plan that fits is never changed:
  partial execution costs no extra MACs, but its one-channel / one-row kernel calls run slower
  than the whole-tensor kernels (``benchmarks/results/pex.md``, int8 on the emulated M4F: channel
  loops 1.9x and row loops 1.2x the instructions of their ops run whole, 1.36x on a network that
  fits only with loops) and a loop's layers can no longer be cut apart, so it is used when RAM
  demands it.
"""

from __future__ import annotations

from splitter.cost.pex_chain import MODES, partial_chain
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
    if mode == "on":
        return fused, plan_chain(fused, boards, objective, solver, host_io=host_io, **options)
    try:
        return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
    except InfeasibleError:
        if fused is chain:
            raise
    return fused, plan_chain(fused, boards, objective, solver, host_io=host_io, **options)
