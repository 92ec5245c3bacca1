"""LayerCost of one layer: FLASH, RAM (arena rule), MACs by class and output bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from splitter.cost.handlers import handler, op_flash
from splitter.cost.kernels import builds, moves_instructions, ops_instructions
from splitter.cost.memory import plan_layer_memory
from splitter.ir import LayerCost, Op, TensorSpec

ItemsizeOf = Callable[[TensorSpec], int]


def itemsize_function(activation_bytes: int | None) -> ItemsizeOf:
    """Bytes per activation element: ``activation_bytes`` when given, else the dtype's itemsize."""
    if activation_bytes is None:
        return lambda spec: spec.itemsize
    return lambda spec: activation_bytes


def op_macs(op: Op, tensors: Mapping[str, TensorSpec]) -> tuple[str, int]:
    """(MAC class, MACs) of one op by its handler (formulas in splitter/cost/handlers.py)."""
    ins = [tensors[name] for name in op.inputs]
    out = tensors[op.outputs[0]]
    h = handler(op)
    return h.mac_class(op, ins), h.macs(op, ins, out)


def layer_cost(
    ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    input_name: str,
    output_name: str,
    itemsize_of: ItemsizeOf,
    out_names: Sequence[str] | None = None,
    layout: str | None = None,
) -> LayerCost:
    """Cost of the layer made of ``ops`` between ``input_name`` and ``output_name``.

    * ``flash`` = sum of the ops' weight bytes (FLASH_j, arena rule);
    * ``macs`` = sum of the handlers' MACs, also split by class in ``macs_by_class``;
    * ``ram`` = :func:`plan_layer_memory` size (RAM_j);
    * ``out_bytes`` = elements * itemsize of ``out_names`` (default: the output tensor only;
      the virtual-sink layer of a multi-output model passes every graph output).
    """
    classes: dict[str, int] = {}
    for op in ops:
        cls, macs = op_macs(op, tensors)
        if macs:
            classes[cls] = classes.get(cls, 0) + macs
    memory = plan_layer_memory(ops, tensors, input_name, output_name, itemsize_of)
    outs = out_names if out_names is not None else (output_name,)
    return LayerCost(
        flash=sum(op_flash(op) for op in ops),
        ram=memory.size,
        macs=sum(classes.values()),
        out_bytes=sum(tensors[n].size * itemsize_of(tensors[n]) for n in outs),
        macs_by_class=tuple(sorted(classes.items())),
        instructions=()
        if layout is None
        else table_instructions(ops, tensors, layout, (), output_name),
    )


def table_instructions(
    ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    layout: str,
    moved: Sequence[tuple[int, int, int]] = (),
    output: str = "",
) -> tuple[tuple[str, float], ...]:
    """``((build, instructions), ...)`` of ``ops`` for every build of the kernel cost table,
    plus the compaction ``memmove`` s ``moved`` (``(from, to, bytes)`` each) after them (an
    operator-granularity layer: :func:`splitter.cost.kernels.moves_instructions`); ``output``:
    the layer's output (a reshape writing it copies, :func:`splitter.cost.kernels.copies`)."""
    return tuple(
        (
            build,
            round(
                ops_instructions(ops, tensors, layout or "NCHW", build, output=output)
                + moves_instructions(moved, build),
                1,
            ),
        )
        for build in builds()
    )
