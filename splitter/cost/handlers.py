"""Shape, MACs and scratch of each op kind, as the cost model and the graph builder ask for them.

The formulas live with each op kind (:data:`splitter.codegen.ops.KINDS`, one class per kind;
the MAC convention in :mod:`splitter.codegen.ops.formulas`): every op class answers

* ``infer_shape`` - the output shape from the input shapes (used to check importers);
* ``macs`` - multiply-accumulates of one inference (MAC_j of SPEC.md);
* ``mac_class`` - which of :data:`MAC_CLASSES` they count in;
* ``scratch_bytes`` - extra working memory the kernel needs while it runs.

This module is the cost layer's view of them: :data:`HANDLERS` is that registry and
:func:`handler` the lookup with the error a user sees.
"""

from __future__ import annotations

from collections.abc import Mapping

from splitter.codegen.ops import KINDS
from splitter.codegen.ops.base import OpKind
from splitter.codegen.ops.conv import q8_conv_kind as q8_conv_kind
from splitter.codegen.ops.formulas import BATCHNORM_MACS_PER_ELEMENT as BATCHNORM_MACS_PER_ELEMENT
from splitter.codegen.ops.formulas import MAC_CLASSES as MAC_CLASSES
from splitter.codegen.ops.formulas import SOFTMAX_MACS_PER_ELEMENT as SOFTMAX_MACS_PER_ELEMENT
from splitter.codegen.ops.formulas import Shape as Shape
from splitter.codegen.ops.formulas import op_flash as op_flash
from splitter.codegen.ops.gather import block_slice as block_slice
from splitter.errors import UnsupportedOpError
from splitter.ir import Op

#: The handler of an op kind is its op class (shape, MACs, scratch next to its code).
OpHandler = OpKind

#: op kind -> handler; every kind of :data:`splitter.ops.OP_KINDS` has exactly one entry.
HANDLERS: Mapping[str, OpKind] = KINDS


def handler(op: Op) -> OpKind:
    """The handler of ``op.kind`` (:class:`UnsupportedOpError` naming the op otherwise)."""
    try:
        return HANDLERS[op.kind]
    except KeyError:
        raise UnsupportedOpError(
            f"{op.name}: no op class for op kind '{op.kind}'; add one to "
            "splitter/codegen/ops/ (it registers itself; CONTRIBUTING.md, adding an op)"
        ) from None
