"""C for a layer with PEX partial execution loops (:attr:`splitter.ir.Layer.loops`).

A loop over ops ``s..e`` and ``C`` channels becomes one C ``for`` over ``c`` (float32 NCHW: a
channel is one contiguous ``H*W`` plane; the rules are ``splitter.cost.pex_chain.EXECUTABLE``):

* a generating conv (``groups == 1``, any window) runs ``k_conv2d`` with ``O = 1`` on its full
  input, its weights row-major ``(O, C*kh*kw)`` so row ``c`` is output channel ``c``'s filter;
* a depthwise conv runs ``k_conv2d`` on one plane (``C = O = groups = 1``), weights ``(C, kh*kw)``
  as the model has them; a standalone activation runs ``k_act`` on one plane; at the loop's
  start these read plane ``c`` of their full input, at its end write plane ``c`` of their full
  output;
* an accumulating pointwise conv is zeroed with its bias before the loop (``k_pex_fill``), adds
  plane ``c``'s contribution at each iteration (``k_pex_accumulate``, weights row-major
  ``(O, C)``, column ``c`` read with stride ``C``) and applies its fused activation after the
  loop (float accumulates in place, no wider buffer).

Every op computes each output once: the MACs are those of the op run whole. Offsets are the
layer's arena plan with its loops (``splitter.cost.memory.plan_layer_memory``): the inner
tensors' one-channel buffers and the loop context, so the arena is the planner's RAM_j. Ops
outside loops are emitted by :mod:`codegen.ops` as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from codegen import ops as emitters
from codegen.escape import c_comment
from codegen.ops.base import ACT_CODES, EmitContext, act_args, act_params, act_record
from codegen.ops.conv import window_record
from codegen.ops.literals import c_float
from splitter.cost.memory import accumulates
from splitter.ir import ChannelLoop, Layer, Op, TensorSpec


def emit_layer(layer: Layer, ctx: EmitContext) -> list[str]:
    """The C statements of ``layer``: its loops as ``for`` loops, other ops as usual."""
    starts = {loop.ops[0]: loop for loop in layer.loops}
    inside = {name for loop in layer.loops for name in loop.ops}
    lines: list[str] = []
    for op in layer.ops:
        if op.name in starts:
            lines.extend(emit_loop(starts[op.name], layer, ctx))
        elif op.name not in inside:
            lines.extend(emitters.emit(op, ctx))
    return lines


def emit_loop(loop: ChannelLoop, layer: Layer, ctx: EmitContext) -> list[str]:
    """One partial execution loop (module docstring)."""
    by_name = {op.name: op for op in layer.ops}
    ops = [by_name[name] for name in loop.ops]
    inner = {op.outputs[0] for op in ops[:-1]}
    plane = _sliced(ops, inner, ctx.tensors)
    sub = replace(ctx, tensors=plane)
    last = ops[-1]
    acc = accumulates(last)
    head = [f"/* PEX loop: {c_comment(' -> '.join(loop.ops))} over {loop.channels} channels */"]
    lines = ["{"]
    if acc:
        bias = ctx.const(last, "B") if "B" in last.weights else "0"
        out = ctx.tensors[last.outputs[0]].shape
        lines.append(f"    k_pex_fill({ctx.ptr(last.outputs[0])}, {bias}, {out[1]}, {_hw(out)});")
    lines.append(f"    for (int c = 0; c < {loop.channels}; c++) {{")
    for k, op in enumerate(ops):
        first_gen = k == 0 and not _channelwise(op)
        if k == len(ops) - 1 and acc:
            body = _accumulate(op, ctx, inner)
        elif first_gen:
            body = _generate(op, ctx, sub)
        else:
            body = _channel_op(op, ctx, sub, inner)
        text = [f"/* {c_comment(op.name)}: {op.kind} */", "{", *("    " + b for b in body), "}"]
        lines.extend("        " + line for line in text)
    lines.append("    }")
    if acc and last.attr("act") is not None:
        y = last.outputs[0]
        n = ctx.tensors[y].size
        lines.append(f"    k_act({ctx.ptr(y)}, {ctx.ptr(y)}, {n}, {act_args(last)});")
    return [*head, *lines, "}"]


def _channelwise(op: Op) -> bool:
    return not (op.kind == "conv2d" and int(op.attr("groups", 1) or 1) == 1)


def _hw(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape[2:]))


def _sliced(
    ops: list[Op], inner: set[str], tensors: Mapping[str, TensorSpec]
) -> dict[str, TensorSpec]:
    """The tensors as one loop iteration sees them: every tensor a channel-wise op touches, and
    every inner one, has one channel (the records' ``C`` / ``O``)."""
    out = dict(tensors)
    for k, op in enumerate(ops):
        touched = set(op.outputs) & inner
        if _channelwise(op):
            touched |= {op.inputs[0], op.outputs[0]}
        elif k > 0:
            touched.add(op.inputs[0])
        for name in touched:
            spec = tensors[name]
            out[name] = replace(spec, shape=(spec.shape[0], 1, *spec.shape[2:]))
    return out


def _plane(name: str, ctx: EmitContext, inner: set[str]) -> str:
    """Pointer to channel ``c`` of ``name``: its one-channel buffer, or plane ``c`` of it."""
    if name in inner:
        return ctx.ptr(name)
    return f"{ctx.ptr(name)} + c * {_hw(ctx.tensors[name].shape)}"


def _generate(op: Op, ctx: EmitContext, sub: EmitContext) -> list[str]:
    """Output channel ``c`` of a ``groups == 1`` conv from its full input."""
    w = np.asarray(op.weights["W"], dtype=np.float32)
    rows = w.reshape(w.shape[0], -1)
    wn = ctx.weights.add(f"{op.name}_W", rows)
    bn = f"{ctx.const(op, 'B')} + c" if "B" in op.weights else "0"
    params = window_record(op, sub, w.shape[2:], groups=1, act=act_record(op))
    call = f"k_conv2d(&p, {ctx.ptr(op.inputs[0])}, {wn} + c * {rows.shape[1]}, {bn}, "
    return [*params, call + f"{ctx.ptr(op.outputs[0])});"]


def _channel_op(op: Op, ctx: EmitContext, sub: EmitContext, inner: set[str]) -> list[str]:
    """Channel ``c`` of a depthwise conv or an activation."""
    x, y = _plane(op.inputs[0], ctx, inner), _plane(op.outputs[0], ctx, inner)
    if op.kind != "conv2d":
        hw = _hw(ctx.tensors[op.outputs[0]].shape)
        p0, p1 = act_params(op, op.kind)
        code = ACT_CODES[op.kind]
        return [f"k_act({x}, {y}, {hw}, {code}, {c_float(p0)}, {c_float(p1)});"]
    w = np.asarray(op.weights["W"], dtype=np.float32)
    taps = int(np.prod(w.shape[1:]))
    wn = ctx.const(op, "W", w)
    bn = f"{ctx.const(op, 'B')} + c" if "B" in op.weights else "0"
    params = window_record(op, sub, w.shape[2:], groups=1, act=act_record(op))
    return [*params, f"k_conv2d(&p, {x}, {wn} + c * {taps}, {bn}, {y});"]


def _accumulate(op: Op, ctx: EmitContext, inner: set[str]) -> list[str]:
    """Input channel ``c``'s contribution to a pointwise conv's full output."""
    w = np.asarray(op.weights["W"], dtype=np.float32)
    o, cin = w.shape[:2]
    wn = ctx.weights.add(f"{op.name}_W", w.reshape(o, cin))
    y = op.outputs[0]
    hw = _hw(ctx.tensors[y].shape)
    x = _plane(op.inputs[0], ctx, inner)
    return [f"k_pex_accumulate({x}, {wn} + c, {cin}, {o}, {hw}, {ctx.ptr(y)});"]
