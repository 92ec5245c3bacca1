"""Planning with PEX partial execution: ``--partial-execution off | auto | on``.

* ``off``: the chain as imported, every op run whole.
* ``on``: the chain with its executable loops fused (:func:`splitter.cost.pex_chain.
  partial_chain`): every loop that lowers a layer's RAM, whether or not a board needs it;
  row loops in the widest bands of rows the schedule's peak allows when that plan fits, else
  one row per iteration.
* ``auto`` (the default): plan without partial execution; only when no plan fits the boards
  (:class:`InfeasibleError`) plan again with the loops. A plan that fits is never changed:
  partial execution costs no extra MACs, but its one-channel / one-row kernel calls run slower
  than the whole-tensor kernels (``benchmarks/results/pex.md``, 2026-11-27, int8 on the emulated
  M4F: channel loops 2.2x and row loops in bands of rows 1.04x the instructions of their ops run
  whole, 1.52x on a network that fits only with loops) and a loop's layers can no longer be
  cut apart, so it is used when RAM demands it.
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
    if mode == "auto":
        try:
            return chain, plan_chain(chain, boards, objective, solver, host_io=host_io, **options)
        except InfeasibleError:
            if fused is chain:
                raise
    return _plan_looped(chain, fused, boards, objective, solver, activation_bytes,
                        host_io=host_io, **options)  # fmt: skip


def _plan_looped(
    chain: Chain,
    fused: Chain,
    boards: Boards,
    objective: str,
    solver: str,
    activation_bytes: int | None,
    *,
    host_io: bool,
    **options: object,
) -> tuple[Chain, Plan]:
    """The plan with loops: first with the row loops in bands of rows up to the schedule's
    peak (``partial_chain(wide=True)``: fewer kernel calls, more RAM where a loop is not the
    peak), then, when that does not fit, one row per iteration (the least RAM)."""
    wide = partial_chain(chain, activation_bytes, wide=True)
    if [x.loops for x in wide.layers] != [x.loops for x in fused.layers]:
        try:
            return wide, plan_chain(wide, boards, objective, solver, host_io=host_io, **options)
        except InfeasibleError:
            pass
    return fused, plan_chain(fused, boards, objective, solver, host_io=host_io, **options)
