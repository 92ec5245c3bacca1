"""``--granularity auto``: the super-node chain unless one of its blocks cannot be placed.

The super-node chain (the thesis's) is kept when it passes the global checks of SPEC.md
(constraints (1)-(3) and every layer fitting one device, :func:`global_violation`) or has no
super-node; otherwise the operator-granularity chain of the same graph is used, whose cuts carry
every live tensor (issue 15), so a residual block or a long skip no board holds alone can be
split. A model without branches therefore plans exactly as before (the thesis cases included).
"""

from __future__ import annotations

from splitter.graph.chain import build_chain
from splitter.ir import Boards, Chain
from splitter.partition.constraints import global_violation
from splitter.partition.planner import chain_problem


def auto_granularity(chain: Chain, boards: Boards, activation_bytes: int | None = None) -> Chain:
    """``chain`` (super-node granularity), or the op chain of its graph when a global check
    fails and ``chain`` has a super-node (module docstring)."""
    if chain.graph is None or chain.granularity != "supernode":
        return chain
    if not any(layer.kind == "super" for layer in chain.layers):
        return chain
    if global_violation(chain_problem(chain, boards)) is None:
        return chain
    return build_chain(chain.graph, activation_bytes=activation_bytes, granularity="op")
