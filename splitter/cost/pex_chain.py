"""Partial execution in the planner: the chain with its PEX loops fused into layers.

:func:`partial_chain` runs the PEX scheduler (:mod:`splitter.cost.pex`) over the chain's ops with
the loops the generated C can execute (:data:`EXECUTABLE`) and ``everywhere=True`` (every loop
that lowers memory somewhere, so each board of a split plan gets its own reduction), then fuses
the layers each loop touches into one layer carrying the loop (:attr:`splitter.ir.Layer.loops`).
For int8 NHWC convolutions it also offers row loops (:mod:`splitter.cost.rows`: exact, no
accumulators), and the scheduler picks, group by group, whichever lowers memory more.
The fused layer's RAM_j is its arena planned with the loop (:func:`splitter.cost.memory.
plan_layer_memory` with ``loops``), the very plan the C generator lays out, so the planner's
estimate is the generated arena; ``whole_ram`` keeps RAM_j run op by op. A loop is kept only
where it lowers that RAM. FLASH and MACs are the layers' sums: partial execution runs exactly
the MACs of ordinary execution (every op computes each output once). Its instructions are
those of the kernels the loops call (:func:`splitter.cost.kernels.layer_ops_instructions`), not
the ops run whole: a loop calls its kernels once per channel, on one-channel shapes.

A fused layer is atomic for the partition: no cut inside a loop (a cut there would send the
expanded tensor, the very buffer the loop avoids, over a link).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import reduce

import numpy as np

from splitter.cost.kernels import layer_ops_instructions, loop_instructions, ops_instructions
from splitter.cost.layer import itemsize_function
from splitter.cost.memory import plan_layer_memory
from splitter.cost.pex import LoopRules, PartialSchedule, channel_axis, partial_schedule
from splitter.ir import Chain, ChannelLoop, Graph, Layer, LayerCost, Op, TensorSpec
from splitter.ops import ACTIVATIONS

#: Standalone activation kinds (no parameters) the generated loops run one plane at a time.
LOOP_ACTIVATIONS = frozenset({"relu", "relu6", "sigmoid", "tanh", "hardswish"}) & frozenset(
    ACTIVATIONS
)

#: The modes of ``--partial-execution``.
MODES = ("off", "auto", "on")


def _kernels_for(op: Op, graph: Graph) -> str:
    """``"f32"`` (float32 NCHW: a channel is one contiguous plane), ``"i8"`` (int8 NHWC,
    per-tensor activations: the loops' slices are planes of their own) or ``""`` (no loop)."""
    specs = [graph.tensors[n] for n in (*op.inputs, *op.outputs)]
    if any(len(spec.shape) != 4 for spec in specs):
        return ""
    if graph.layout != "NHWC" and all(spec.dtype == "float32" for spec in specs):
        return "f32"
    if all(spec.dtype == "int8" and _per_tensor(spec) for spec in specs):
        w = op.weights.get("W")
        return "i8" if w is None or np.asarray(w).dtype == np.int8 else ""
    return ""


def _per_tensor(spec: TensorSpec) -> bool:
    return spec.quant is not None and len(spec.quant.scale) == 1


def _channels(spec: TensorSpec) -> int:
    return int(spec.shape[channel_axis(spec, "NHWC" if spec.dtype == "int8" else "NCHW")])


def _depthwise(op: Op, graph: Graph) -> bool:
    c = _channels(graph.tensors[op.inputs[0]])
    groups = int(op.attr("groups", 1) or 1)
    out = _channels(graph.tensors[op.outputs[0]])
    return op.kind == "conv2d" and groups == c == out and c > 1 and "W" in op.weights


def _channelwise(op: Op, graph: Graph) -> bool:
    """Depthwise conv (float or int8) or a standalone float activation, one input."""
    kernels = _kernels_for(op, graph)
    if not kernels or len(op.inputs) != 1:
        return False
    return _depthwise(op, graph) or (kernels == "f32" and op.kind in LOOP_ACTIVATIONS)


def _generates(op: Op, graph: Graph) -> bool:
    """A conv with ``groups == 1`` computes one output channel (``k_conv2d`` / ``k_q_conv2d``
    with ``O = 1``)."""
    return (
        op.kind == "conv2d"
        and int(op.attr("groups", 1) or 1) == 1
        and "W" in op.weights
        and bool(_kernels_for(op, graph))
    )


def _pointwise(op: Op, graph: Graph) -> bool:
    """A 1x1, stride 1, unpadded conv accumulates one input channel (``k_pex_accumulate``,
    ``k_q_pex_accumulate``)."""
    w = op.weights.get("W")
    return (
        _generates(op, graph)
        and w is not None
        and tuple(w.shape[2:]) == (1, 1)
        and tuple(op.attr("strides", (1, 1))) == (1, 1)
        and not any(op.attr("pads", (0, 0, 0, 0)))
    )


#: The loops ``splitter/codegen/pex.py`` emits: start with a generating conv or a channel-wise op
#: (on
#: channel ``c`` of its full input), continue with channel-wise ops, end with a pointwise conv
#: (accumulate) or a channel-wise op (writing channel ``c`` of its full output).
EXECUTABLE = LoopRules(
    start=lambda op, g: _generates(op, g) or _channelwise(op, g),
    middle=_channelwise,
    end=lambda op, g: _pointwise(op, g) or _channelwise(op, g),
)


def _row_op(op: Op, graph: Graph) -> bool:
    """An int8 NHWC conv (per-tensor activations) streams rows (``codegen/pex_rows.py``)."""
    return op.kind == "conv2d" and _kernels_for(op, graph) == "i8"


#: channels per iteration of an int8 channel loop, tried in this order (the planner keeps the
#: first whose plan fits, :func:`loop_steps`): sixteen channels feed the whole-op tuned kernels
#: (a 16-output pointwise GEMM, four 4-channel depthwise blocks, four input channels per
#: accumulator pass, ``codegen/pex.py``) with their per-call set-up spread over 16 channels;
#: four hold less; one channel is the least memory.
Q8_STEPS = (16, 4, 1)


def loop_steps(chain: Chain) -> tuple[int, ...]:
    """The channels per iteration of the chain's channel loops the planner tries, best time
    first: :data:`Q8_STEPS` for an integer model (int8 NHWC loops), else ``(1,)`` (the float
    NCHW loops run one plane per iteration)."""
    graph = chain.graph
    if graph is None or not any(s.dtype in ("int8", "uint8") for s in graph.tensors.values()):
        return (1,)
    return Q8_STEPS


def chain_schedule(
    chain: Chain,
    activation_bytes: int | None = None,
    step: int | None = None,
    *,
    wide: bool = False,
) -> PartialSchedule | None:
    """The executable PEX schedule of the chain's ops (None for a layer profile); ``step``
    channels per iteration of its channel loops (None: the first of :func:`loop_steps`);
    ``wide``: row loops in bands of rows up to the schedule's peak
    (``splitter.cost.pex._widened``)."""
    if chain.graph is None:
        return None
    graph = chain.graph
    integer = any(spec.dtype in ("int8", "uint8") for spec in graph.tensors.values())
    ops = [op for layer in chain.layers for op in layer.ops]
    return partial_schedule(
        graph,
        itemsize_function(activation_bytes),
        ops=ops,
        channels_per_step=loop_steps(chain)[0] if step is None else step,
        accumulator_bytes=4 if integer and activation_bytes is None else None,
        rules=EXECUTABLE,
        everywhere=True,
        row_rule=_row_op,
        wide=wide,
    )


def partial_chain(
    chain: Chain,
    activation_bytes: int | None = None,
    step: int | None = None,
    *,
    wide: bool = False,
) -> Chain:
    """``chain`` with every useful executable loop fused into one layer (module docstring),
    its channel loops ``step`` channels per iteration (None: the first of :func:`loop_steps`);
    the chain itself when no loop lowers any layer's RAM, or when the chain is at operator
    granularity (its cuts carry several live tensors, which fused loop layers do not keep).
    ``wide``: row loops in bands of rows up to the schedule's peak (faster; the planner tries
    it first, :mod:`splitter.partition.partial`); else one row per iteration."""
    if chain.granularity == "op":
        return chain
    schedule = chain_schedule(chain, activation_bytes, step, wide=wide)
    if schedule is None or not schedule.loops:
        return chain
    owner = [layer.index for layer in chain.layers for _op in layer.ops]
    groups: list[tuple[int, int, list[ChannelLoop]]] = []
    for lp in schedule.loops:
        names = schedule.op_names[lp.first : lp.last + 1]
        step = lp.step if lp.by == "channel" else 1
        loop = ChannelLoop(names, lp.channels, lp.by, step, lp.band)
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
    fused = Layer(
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
    if not cost.instructions:
        return fused
    layout = chain.graph.layout or "NCHW"
    instr = tuple(
        (build, round(layer_ops_instructions(fused, chain.graph.tensors, layout, build), 1))
        for build, _ in cost.instructions
    )
    return replace(fused, cost=replace(fused.cost, instructions=instr))


def describe_loop(loop: ChannelLoop, price: tuple[float, float] | None = None) -> str:
    """``conv_a -> dw_b -> conv_c over 96 channels`` (``over 112 rows`` for a row loop, ``over
    112 rows, 8 per iteration`` in bands of rows); with ``price`` (seconds of the loop, seconds
    of its ops run whole, :func:`loop_price`) its time price: ``(+12.3 ms, 4.1x the ops run
    whole)``."""
    text = f"{' -> '.join(loop.ops)} over {loop.channels} {loop.by}s"
    if loop.step > 1:
        text += f", {loop.step} per iteration"
    if loop.band > 1:
        text += f", {loop.band} per iteration"
    if price is None or price[1] <= 0:
        return text
    extra, ratio = price[0] - price[1], price[0] / price[1]
    return f"{text} ({extra * 1e3:+.1f} ms, {ratio:.2f}x the ops run whole)"


def loop_price(
    layer: Layer, loop: ChannelLoop, tensors: Mapping[str, TensorSpec], layout: str, build: str
) -> tuple[float, float]:
    """Instructions of ``loop`` as the generated C runs it and of the same ops run whole, from
    the kernel table (:func:`splitter.cost.kernels.loop_instructions` and
    :func:`~splitter.cost.kernels.ops_instructions`): the time price of fitting by partial
    execution, before the core's cycles per instruction."""
    by_name = {op.name: op for op in layer.ops}
    ops = [by_name[n] for n in loop.ops]
    looped = loop_instructions(
        ops, loop.channels, tensors, layout, build, by=loop.by, step=loop.step, band=loop.band
    )
    return looped, ops_instructions(ops, tensors, layout, build)
