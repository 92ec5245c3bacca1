"""The op tables, derived from the one definition per kind: the ``definition`` of each op class
registered in :data:`splitter.codegen.ops.KINDS`.

An :class:`OpDef` says what the rest of the pipeline needs to know about a kind without running
it: the attributes importers fill, whether it is an element-wise activation (and so may be fused
into a producer's ``attrs["act"]``), whether it hosts such a fused activation, which layer a
directly following op of this kind joins in the chain, whether it is a zero-cost view, which
source operators map to it, and which ``(layout, dtype)`` pairs have C kernels.

Derived here: :data:`OPS`, :data:`OP_KINDS`, :data:`ACTIVATIONS`, :data:`ACT_HOSTS`,
:data:`FUSED_ACT_ATTRS`, :data:`ZERO_COST_KINDS`, :data:`POOL_KINDS`. The importers' converter
tables cannot live in an op class without reversing the pipeline's imports;
``tests/test_ops_table.py`` checks them against :data:`OPS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from splitter.codegen.ops import KINDS
from splitter.codegen.ops.opdef import ALL as ALL
from splitter.codegen.ops.opdef import F32_NCHW as F32_NCHW
from splitter.codegen.ops.opdef import F32_NHWC as F32_NHWC
from splitter.codegen.ops.opdef import FLOAT as FLOAT
from splitter.codegen.ops.opdef import I8_NHWC as I8_NHWC
from splitter.codegen.ops.opdef import Kernel as Kernel
from splitter.codegen.ops.opdef import OpDef as OpDef

#: Canonical op kind -> its definition, in a fixed order.
OPS: Mapping[str, OpDef] = MappingProxyType({k: c.definition for k, c in KINDS.items()})

#: Canonical op kinds and the attributes each one carries (importers fill exactly these).
OP_KINDS: Mapping[str, tuple[str, ...]] = MappingProxyType({k: d.attrs for k, d in OPS.items()})

#: Element-wise activations an op may carry in ``attrs["act"]`` (and standalone kinds).
ACTIVATIONS: tuple[str, ...] = tuple(k for k, d in OPS.items() if d.activation)

#: Op kinds that may carry a fused activation (``"act"`` among their attributes).
ACT_HOSTS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.act_host)

#: Attributes a fused activation brings into its host (``act_min``, ``alpha``, ...).
FUSED_ACT_ATTRS: frozenset[str] = frozenset(a for k in ACTIVATIONS for a in OPS[k].attrs)

#: Op kinds whose only effect is a new view of the same bytes (zero cost, zero-copy).
ZERO_COST_KINDS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.zero_cost)

#: Pooling kinds (a chain layer joins at most one, after a host in ``OpDef.joins``).
POOL_KINDS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.pool)


def kinds_with_kernel(layout: str, dtype: str) -> frozenset[str]:
    """Op kinds whose :attr:`OpDef.kernels` include ``(layout, dtype)``."""
    return frozenset(k for k, d in OPS.items() if d.has_kernel(layout, dtype))
