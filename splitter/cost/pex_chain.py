"""Partial execution in the planner: the chain with its PEX loops fused into layers.

:func:`partial_chain` runs the PEX scheduler (:mod:`splitter.cost.pex`) over the chain's ops with
the loops the generated C can execute (:data:`EXECUTABLE`) and ``everywhere=True`` (every loop
that lowers memory somewhere, so each board of a split plan gets its own reduction), then fuses
the layers each loop touches into one layer carrying the loop (:attr:`splitter.ir.Layer.loops`).
The fused layer's RAM_j is its arena planned with the loop (:func:`splitter.cost.memory.
plan_layer_memory` with ``loops``), the very plan the C generator lays out, so the planner's
estimate is the generated arena; ``whole_ram`` keeps RAM_j run op by op. A loop is kept only
where it lowers that RAM. FLASH and MACs are the layers' sums: partial execution runs exactly
the MACs of ordinary execution (every op computes each output once).

A fused layer is atomic for the partition: no cut inside a loop (a cut there would send the
expanded tensor, the very buffer the loop avoids, over a link).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import reduce

from splitter.cost.layer import itemsize_function
from splitter.cost.memory import plan_layer_memory
from splitter.cost.pex import LoopRules, PartialSchedule, partial_schedule
from splitter.ir import ACTIVATIONS, Chain, ChannelLoop, Layer, LayerCost, Op, TensorSpec

#: Standalone activation kinds (no parameters) the generated loops run one plane at a time.
LOOP_ACTIVATIONS = frozenset({"relu", "relu6", "sigmoid", "tanh", "hardswish"}) & frozenset(
    ACTIVATIONS
)

#: The modes of ``--partial-execution``.
MODES = ("off", "auto", "on")


def _float_nchw(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """The loops' kernels are the float32 NCHW ones (a channel is one contiguous plane)."""
    names = (*op.inputs, *op.outputs)
    return all(tensors[n].dtype == "float32" and len(tensors[n].shape) == 4 for n in names)


def _depthwise(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    c = tensors[op.inputs[0]].shape[1]
    groups = int(op.attr("groups", 1) or 1)
    return op.kind == "conv2d" and groups == c == tensors[op.outputs[0]].shape[1] and c > 1


def _channelwise(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """Depthwise conv or a standalone activation, one input."""
    if not _float_nchw(op, tensors) or len(op.inputs) != 1:
        return False
    return _depthwise(op, tensors) or op.kind in LOOP_ACTIVATIONS


def _generates(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """A conv with ``groups == 1`` computes one output channel (``k_conv2d`` with ``O = 1``)."""
    return (
        op.kind == "conv2d"
        and int(op.attr("groups", 1) or 1) == 1
        and _float_nchw(op, tensors)
        and "W" in op.weights
    )


def _pointwise(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """A 1x1, stride 1, unpadded conv accumulates one input channel (``k_pex_accumulate``)."""
    w = op.weights.get("W")
    return (
        _generates(op, tensors)
        and w is not None
        and tuple(w.shape[2:]) == (1, 1)
        and tuple(op.attr("strides", (1, 1))) == (1, 1)
        and not any(op.attr("pads", (0, 0, 0, 0)))
    )


#: The loops ``codegen/pex.py`` emits: start with a generating conv or a channel-wise op,
#: continue with channel-wise ops, end with a pointwise conv (accumulate) or a channel-wise op.
EXECUTABLE = LoopRules(
    start=lambda op, t: _generates(op, t) or _channelwise(op, t),
    middle=_channelwise,
    end=lambda op, t: _pointwise(op, t) or _channelwise(op, t),
)


def chain_schedule(chain: Chain, activation_bytes: int | None = None) -> PartialSchedule | None:
    """The executable PEX schedule of the chain's ops (None for a layer profile)."""
    if chain.graph is None:
        return None
    graph = chain.graph
    integer = any(spec.dtype in ("int8", "uint8") for spec in graph.tensors.values())
    ops = [op for layer in chain.layers for op in layer.ops]
    return partial_schedule(
        graph,
        itemsize_function(activation_bytes),
        ops=ops,
        accumulator_bytes=4 if integer and activation_bytes is None else None,
        rules=EXECUTABLE,
        everywhere=True,
    )


def partial_chain(chain: Chain, activation_bytes: int | None = None) -> Chain:
    """``chain`` with every useful executable loop fused into one layer (module docstring);
    the chain itself when no loop lowers any layer's RAM."""
    schedule = chain_schedule(chain, activation_bytes)
    if schedule is None or not schedule.loops:
        return chain
    owner = [layer.index for layer in chain.layers for _op in layer.ops]
    groups: list[tuple[int, int, list[ChannelLoop]]] = []
    for lp in schedule.loops:
        loop = ChannelLoop(schedule.op_names[lp.first : lp.last + 1], lp.channels)
        a, b = owner[lp.first], owner[lp.last]
        if groups and a <= groups[-1][1]:
            first, last, loops = groups.pop()
            groups.append((first, max(last, b), [*loops, loop]))
        else:
            groups.append((a, b, [loop]))
    itemsize_of = itemsize_function(activation_bytes)
    layers: list[Layer] = []
    pos = 0
    for first, last, loops in groups:
        layers.extend(chain.layers[pos:first])
        fused = fuse_layers(chain, chain.layers[first : last + 1], loops, itemsize_of)
        layers.extend(
            [fused] if fused.cost.ram < fused.whole_ram else chain.layers[first : last + 1]
        )
        pos = last + 1
    layers.extend(chain.layers[pos:])
    if len(layers) == len(chain.layers) and all(not x.loops for x in layers):
        return chain
    renumbered = tuple(replace(layer, index=k) for k, layer in enumerate(layers))
    return replace(chain, layers=renumbered)


def fuse_layers(
    chain: Chain,
    layers: Sequence[Layer],
    loops: Sequence[ChannelLoop],
    itemsize_of: Callable[[TensorSpec], int],
) -> Layer:
    """One layer running ``layers``' ops with ``loops``; RAM_j planned with the loops."""
    assert chain.graph is not None
    first, last = layers[0], layers[-1]
    assert first.input is not None
    ops = tuple(op for layer in layers for op in layer.ops)
    memory = plan_layer_memory(
        ops, chain.graph.tensors, first.input.name, last.output.name, itemsize_of, loops
    )
    cost: LayerCost = reduce(lambda a, b: a + b, (layer.cost for layer in layers))
    name = first.name if len(layers) == 1 else f"{first.name}..{last.name}"
    return Layer(
        index=first.index,
        name=name,
        kind="super",
        ops=ops,
        input=first.input,
        output=last.output,
        cost=replace(cost, ram=memory.size),
        loops=tuple(loops),
        whole_ram=max(layer.cost.ram for layer in layers),
    )


def describe_loop(loop: ChannelLoop) -> str:
    """``conv_a -> dw_b -> conv_c over 96 channels``."""
    return f"{' -> '.join(loop.ops)} over {loop.channels} channels"
