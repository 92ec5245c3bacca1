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

int8 NHWC loops (a channel is strided there, so each slice is a plane of its own) generate with
``k_q_pex_pointwise`` (1x1 convs) or ``k_q_conv2d`` (``O = 1``; the filter row ``c`` of the OHWI
weights, multiplier / shift / bias ``c``), run depthwise convs on one channel (``k_q_dw_plane``,
weights ``(C, kh*kw)``, reading / writing channel ``c`` of a full NHWC tensor at the loop's
ends) and accumulate into int32 accumulators (``k_q_pex_fill`` /
``k_q_pex_accumulate``), requantised in place after the loop (``k_q_pex_requant``) as
``k_q_conv2d`` rounds: bit for bit the ops run whole. On a core with the DSP extension
(``ctx.isa == "dsp"``) the pointwise, depthwise, accumulating and requantising kernels are the
tuned ``_dsp`` ones of ``kernels_q8_pex.c`` (:func:`pex_kernel`; same bytes), the accumulating
conv's weights then stored transposed, ``(C, O)``, so input channel ``c``'s are contiguous.
The accumulators occupy the output's block (``4 * elements`` bytes); the int8 result lands at
its start, or at its end when the block is the layer output at the top of the arena
(:func:`placed_offsets` says where).

An int8 loop of ``G = loop.step > 1`` channels per iteration (:func:`emit_step_loop`; the
planner's first choice, ``splitter.cost.pex_chain.loop_steps``) holds ``G``-channel NHWC slabs
of its inner tensors: the generating conv and a depthwise after it call the ops' own tuned
kernels on ``G`` channels (``splitter.cost.memory.slab_op``, their weights laid out per block of
``G`` channels, their scratch the loop's one block), a depthwise ending the loop writes its slab
in that block and ``k_q_pex_put`` copies it into its full output, a depthwise reading a full
tensor runs plane by plane, and the accumulating conv adds ``G`` input channels per pass
(``k_q_pex_accumulate_g``, raw codes: its accumulators start from ``b - in_zp * sum_c w``); a
last iteration runs the ``C % G`` channels left. Same bytes as the ops run whole.

Row loops (``by == "row"``, int8 NHWC convolutions streaming output rows through windows of
rows) are emitted by :mod:`splitter.codegen.pex_rows`.

Every op computes each output once: the MACs are those of the op run whole. Offsets are the
layer's arena plan with its loops (``splitter.cost.memory.plan_layer_memory``): the inner
tensors' one-channel buffers and the loop context, so the arena is the planner's RAM_j. Ops
outside loops are emitted by :mod:`splitter.codegen.ops` as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

import numpy as np

from splitter.codegen import ops as emitters
from splitter.codegen.escape import c_comment
from splitter.codegen.ops.base import (
    ACT_CODES,
    EmitContext,
    act_args,
    act_params,
    act_record,
    is_quantised,
)
from splitter.codegen.ops.conv import ohwi, q8_conv_kind, q_record, window_record
from splitter.codegen.ops.literals import WeightTable, c_float
from splitter.codegen.ops.q8_variants import conv_weights, depthwise_weights, variant_name
from splitter.codegen.ops.quant import bias, gemm_rounding, qp, requant_arrays
from splitter.codegen.pex_rows import emit_rows
from splitter.cost.handlers import handler
from splitter.cost.memory import accumulates, slab_op, slab_out_bytes
from splitter.ir import ChannelLoop, Layer, Op, TensorSpec


def emit_layer(layer: Layer, ctx: EmitContext) -> list[str]:
    """The C statements of ``layer``: its loops as ``for`` loops, other ops as usual."""
    starts = {loop.ops[0]: loop for loop in layer.loops}
    inside = {name for loop in layer.loops for name in loop.ops}
    lines: list[str] = []
    for op in layer.ops:
        if op.name in starts and starts[op.name].by == "row":
            lines.extend(emit_rows(starts[op.name], layer, ctx))
        elif op.name in starts:
            lines.extend(emit_loop(starts[op.name], layer, ctx))
        elif op.name not in inside:
            lines.extend(emitters.emit(op, ctx))
    return lines


def placed_offsets(layer: Layer, offsets: Mapping[str, int], sizes: Mapping[str, int],
                   tensors: Mapping[str, TensorSpec]) -> dict[str, int]:  # fmt: skip
    """``offsets`` with each int8 accumulating output at its int8 result (the start of its
    accumulator block, or its last ``elements`` bytes when it is the layer output placed at the
    top, offset > 0), the accumulators under ``"<name>:acc"``."""
    out = dict(offsets)
    for loop in (lp for lp in layer.loops if lp.by == "channel"):
        last = next(op for op in layer.ops if op.name == loop.ops[-1])
        y = last.outputs[0]
        if accumulates(last) and tensors[y].dtype == "int8":
            out[f"{y}:acc"] = offsets[y]
            n = tensors[y].size
            if y == layer.output.name and offsets[y] != 0:
                out[y] = offsets[y] + sizes[y] - n
    return out


def emit_loop(loop: ChannelLoop, layer: Layer, ctx: EmitContext) -> list[str]:
    """One partial execution loop (module docstring)."""
    by_name = {op.name: op for op in layer.ops}
    ops = [by_name[name] for name in loop.ops]
    inner = {op.outputs[0] for op in ops[:-1]}
    q8 = is_quantised(ops[0], ctx.tensors)
    if q8:  # the int8 kernels are NHWC whatever the graph's layout (splitter/codegen/ops/base.py)
        ctx = replace(ctx, layout="NHWC")
    if loop.step > 1:
        if not q8:
            raise ValueError(f"PEX loop over {loop.ops[0]}: several channels per step (int8 only)")
        return emit_step_loop(loop, ops, ctx)
    sub = replace(ctx, tensors=_sliced(ops, inner, ctx.tensors, q8))
    last = ops[-1]
    acc = accumulates(last)
    head = [f"/* PEX loop: {c_comment(' -> '.join(loop.ops))} over {loop.channels} channels */"]
    lines = ["{"]
    if acc:
        lines.extend("    " + line for line in (_q8_fill if q8 else _fill)(last, ctx))
    lines.append(f"    for (int c = 0; c < {loop.channels}; c++) {{")
    for k, op in enumerate(ops):
        if k == len(ops) - 1 and acc:
            body = (_q8_accumulate if q8 else _accumulate)(op, ctx, inner)
        elif k == 0 and not _channelwise(op):
            body = (_q8_generate if q8 else _generate)(op, ctx, sub)
        else:
            body = (_q8_channel_op if q8 else _channel_op)(op, ctx, sub, inner)
        text = [f"/* {c_comment(op.name)}: {op.kind} */", "{", *("    " + b for b in body), "}"]
        lines.extend("        " + line for line in text)
    lines.append("    }")
    if acc:
        lines.extend("    " + line for line in (_q8_finish if q8 else _finish)(last, ctx))
    return [*head, *lines, "}"]


def _fill(op: Op, ctx: EmitContext) -> list[str]:
    """Float output planes set to the bias before the loop."""
    bias = ctx.const(op, "B") if "B" in op.weights else "0"
    out = ctx.tensors[op.outputs[0]].shape
    return [f"k_pex_fill({ctx.ptr(op.outputs[0])}, {bias}, {out[1]}, {_hw(out)});"]


def _finish(op: Op, ctx: EmitContext) -> list[str]:
    """The accumulating conv's fused activation over its whole float output."""
    if op.attr("act") is None:
        return []
    y = op.outputs[0]
    return [f"k_act({ctx.ptr(y)}, {ctx.ptr(y)}, {ctx.tensors[y].size}, {act_args(op)});"]


def _channelwise(op: Op) -> bool:
    return not (op.kind == "conv2d" and int(op.attr("groups", 1) or 1) == 1)


def _hw(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape[2:]))


def _sliced(
    ops: list[Op], inner: set[str], tensors: Mapping[str, TensorSpec], q8: bool
) -> dict[str, TensorSpec]:
    """The tensors as one loop iteration sees them: every tensor a channel-wise op touches, and
    every inner one, has one channel (the records' ``C`` / ``O``; NHWC for int8)."""
    out = dict(tensors)
    for k, op in enumerate(ops):
        touched = set(op.outputs) & inner
        if _channelwise(op):
            touched |= {op.inputs[0], op.outputs[0]}
        elif k > 0:
            touched.add(op.inputs[0])
        for name in touched:
            spec = tensors[name]
            one = (*spec.shape[:3], 1) if q8 else (spec.shape[0], 1, *spec.shape[2:])
            out[name] = replace(spec, shape=one)
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


# ------------------------------------------------------------------------------ int8 ----


def _q8_generate(op: Op, ctx: EmitContext, sub: EmitContext) -> list[str]:
    """Output channel ``c`` of an int8 ``groups == 1`` conv: ``k_q_pex_pointwise`` for a 1x1,
    stride-1, unpadded one, else ``k_q_conv2d`` with ``O = 1``."""
    w = ohwi(np.asarray(op.weights["W"]))
    taps = int(np.prod(w.shape[1:]))
    wn = ctx.weights.add(f"{op.name}_W", w, np.int8)
    q, b = _q8_channel_requant(op, ctx)
    x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
    pointwise = taps == w.shape[-1] and tuple(op.attr("strides", (1, 1))) == (1, 1)
    if pointwise and not any(op.attr("pads", (0, 0, 0, 0))):
        shape = ctx.tensors[op.inputs[0]].shape  # NHWC
        hw = int(shape[1] * shape[2])
        fn = pex_kernel("q_pex_pointwise", ctx.isa)
        return [*q, f"{fn}(&q, {x}, {taps}, {hw}, {wn} + c * {taps}, {b}, {y});"]
    params = window_record(op, sub, np.asarray(op.weights["W"]).shape[2:], groups=1)
    return [*params, *q, f"k_q_conv2d(&p, &q, {x}, {wn} + c * {taps}, {b}, {y});"]


def _q8_channel_requant(op: Op, ctx: EmitContext) -> tuple[list[str], str]:
    """The ``k_q_params q`` of output channel ``c`` (a ``const`` record: its pointers depend
    on ``c``) and the C expression of its bias pointer."""
    bn = bias(op, ctx)
    mult, shift, nq = requant_arrays(op, ctx)
    k = " + c" if nq > 1 else ""
    q = q_record(op, ctx, (f"{mult}{k}", f"{shift}{k}", 1), gemm_rounding(op))
    q[0] = q[0].replace("static const", "const", 1)
    return q, (f"{bn} + c" if bn != "0" else "0")


def _q8_channel_op(op: Op, ctx: EmitContext, sub: EmitContext, inner: set[str]) -> list[str]:
    """Channel ``c`` of an int8 depthwise conv (``k_q_dw_plane``): its one-channel slices, or
    channel ``c`` of a full NHWC input / output (stride ``C``)."""
    w = ohwi(np.asarray(op.weights["W"]))  # (C, kh, kw, 1): channel c's taps contiguous
    taps = int(np.prod(w.shape[1:]))
    wn = ctx.weights.add(f"{op.name}_W", w, np.int8)
    q, b = _q8_channel_requant(op, ctx)
    params = window_record(op, sub, np.asarray(op.weights["W"]).shape[2:], groups=1)
    (x, xs), (y, ys) = (_q8_plane(name, ctx, inner) for name in (op.inputs[0], op.outputs[0]))
    fn = pex_kernel("q_dw_plane", ctx.isa)
    call = f"{fn}(&p, &q, {x}, {xs}, {wn} + c * {taps}, {b}, {y}, {ys});"
    return [*params, *q, call]


def _q8_plane(name: str, ctx: EmitContext, inner: set[str]) -> tuple[str, int]:
    """Pointer to channel ``c`` of int8 ``name`` and its channel stride."""
    if name in inner:
        return ctx.p8(name), 1
    return f"{ctx.p8(name)} + c", int(ctx.tensors[name].shape[-1])


def _q8_fill(op: Op, ctx: EmitContext) -> list[str]:
    """int32 accumulators set to the bias before the loop."""
    y = op.outputs[0]
    hw = int(np.prod(ctx.tensors[y].shape[1:3]))
    o = ctx.tensors[y].shape[3]
    return [f"k_q_pex_fill(A8 + {ctx.offsets[y + ':acc']}, {bias(op, ctx)}, {o}, {hw});"]


def _q8_accumulate(op: Op, ctx: EmitContext, inner: set[str]) -> list[str]:
    """Input channel ``c``'s contribution to an int8 pointwise conv's accumulators."""
    w = np.asarray(op.weights["W"])
    o, cin = w.shape[:2]
    y = op.outputs[0]
    hw = int(np.prod(ctx.tensors[y].shape[1:3]))
    _, in_zp = qp(ctx.tensors[op.inputs[0]])
    x = ctx.p8(op.inputs[0])
    acc = f"A8 + {ctx.offsets[y + ':acc']}"
    if ctx.isa == "dsp":  # weights (C, O): input channel c's O weights contiguous
        wn = ctx.weights.add(f"{op.name}_W", np.ascontiguousarray(w.reshape(o, cin).T), np.int8)
        fn = pex_kernel("q_pex_accumulate", ctx.isa)
        return [f"{fn}({x}, {wn} + c * {o}, {in_zp}, {o}, {hw}, {acc});"]
    wn = ctx.weights.add(f"{op.name}_W", w.reshape(o, cin), np.int8)
    return [f"k_q_pex_accumulate({x}, {wn} + c, {cin}, {in_zp}, {o}, {hw}, {acc});"]


def _q8_finish(op: Op, ctx: EmitContext) -> list[str]:
    """The accumulators requantised in place into the int8 output."""
    y = op.outputs[0]
    hw = int(np.prod(ctx.tensors[y].shape[1:3]))
    o = ctx.tensors[y].shape[3]
    q = q_record(op, ctx, requant_arrays(op, ctx), gemm_rounding(op))
    acc = f"A8 + {ctx.offsets[y + ':acc']}"
    fn = pex_kernel("q_pex_requant", ctx.isa)
    return ["{", *("    " + line for line in q),
            f"    {fn}(&q, {acc}, {o}, {hw}, {ctx.p8(y)});", "}"]  # fmt: skip


#: the channel-loop kernels with a tuned ``_dsp`` variant (kernels_q8_pex.c)
PEX_DSP = frozenset({"q_pex_pointwise", "q_pex_accumulate", "q_pex_requant", "q_dw_plane"})


def pex_kernel(name: str, isa: str) -> str:
    """The C function of channel-loop kernel ``name`` on ISA ``isa``: ``k_<name>_dsp`` with the
    DSP extension (kernels_q8_pex.c), else the generic ``k_<name>`` (kernels_q8.c; the
    Cortex-M0+ build), the same bytes either way."""
    return f"k_{name}_dsp" if isa == "dsp" and name in PEX_DSP else f"k_{name}"


# ------------------------------------------------------- int8, several channels per step ----


def emit_step_loop(loop: ChannelLoop, ops: list[Op], ctx: EmitContext) -> list[str]:
    """An int8 loop of ``G = loop.step`` channels per iteration (a last one of ``C % G``): each
    inner tensor an ``HW x G`` NHWC slab; the generating conv and a depthwise between two slabs
    run the ops' tuned whole-op kernels on ``G`` channels (:func:`splitter.cost.memory.slab_op`,
    their scratch the loop's one block), a depthwise on a full tensor runs plane by plane
    (``k_q_dw_plane``), and the accumulating conv adds ``G`` input channels per pass
    (``k_q_pex_accumulate_g``, raw codes: the fill's bias carries ``-in_zp * sum_c w``)."""
    channels, step = loop.channels, loop.step
    tail = channels % step
    once = cast(WeightTable, _Once(ctx.weights))  # the tail's body names the same arrays
    ctx = replace(ctx, weights=once)
    inner = {op.outputs[0] for op in ops[:-1]}
    acc = accumulates(ops[-1])
    head = f"/* PEX loop: {c_comment(' -> '.join(loop.ops))} over {channels} channels */"
    lines = [head, f"/* ({step} channels per iteration) */", "{"]
    if acc:
        lines.extend("    " + line for line in _q8_fill_folded(ops[-1], ctx))
    lines.append(f"    for (int c = 0; c + {step} <= {channels}; c += {step}) {{")
    lines.extend("        " + line for line in _step_body(ops, ctx, inner, step, step, channels))
    lines.append("    }")
    if tail:
        lines.append(f"    {{ /* the last {tail} channel(s) */")
        lines.append(f"        const int c = {channels - tail};")
        body = _step_body(ops, ctx, inner, tail, step, channels)
        lines.extend("        " + line for line in body)
        lines.append("    }")
    if acc:
        lines.extend("    " + line for line in _q8_finish(ops[-1], ctx))
    return [*lines, "}"]


class _Once:
    """The weights blob adding each array once per name (a loop's tail iteration emits the
    same calls again on the same arrays)."""

    def __init__(self, blob: Any) -> None:
        self.blob = blob
        self.names: dict[str, str] = {}

    def add(self, hint: str, values: np.ndarray, dtype: type = np.float32) -> str:
        if hint not in self.names:
            self.names[hint] = self.blob.add(hint, values, dtype)
        return self.names[hint]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.blob, name)


def _step_body(
    ops: list[Op], ctx: EmitContext, inner: set[str], g: int, step: int, channels: int
) -> list[str]:
    """One iteration over channels ``c .. c + g - 1`` of a loop of ``step`` channels per
    iteration (:func:`emit_step_loop`)."""
    sub = replace(ctx, tensors=_slabs(ops, inner, ctx.tensors, g))
    lines: list[str] = []
    for k, op in enumerate(ops):
        if k == len(ops) - 1 and accumulates(op):
            body = _q8_accumulate_g(op, ctx, g)
        elif slab_op(ops, k, g, ctx.tensors) is not None:
            body = _q8_slab_op(ops, k, ctx, sub, g, step)
        else:
            body = _q8_planes(op, ctx, sub, inner, g, channels)
        lines.extend(
            [f"/* {c_comment(op.name)}: {op.kind} */", "{", *("    " + b for b in body), "}"]
        )
    return lines


def _slabs(
    ops: list[Op], inner: set[str], tensors: Mapping[str, TensorSpec], g: int
) -> dict[str, TensorSpec]:
    """The tensors as one iteration sees them: each inner tensor ``g`` channels (NHWC)."""
    out = dict(tensors)
    for name in inner:
        spec = tensors[name]
        out[name] = replace(spec, shape=(*spec.shape[:3], g))
    return out


def _q8_slab_op(
    ops: list[Op], k: int, ctx: EmitContext, sub: EmitContext, g: int, step: int
) -> list[str]:
    """Op ``k`` on ``g`` channels with its tuned whole-op kernel (``k_q_<family>_<isa>``): the
    generating conv's output channels ``c ..`` of its full input, or a depthwise from slab to
    slab (the last op's slab in the loop's scratch after the kernel's own, then copied into
    channels ``c ..`` of its full output, ``k_q_pex_put``); weights in the kernel's layout per
    block of ``step`` channels, so block ``c`` starts at ``c * K``."""
    op = ops[k]
    found = slab_op(ops, k, g, ctx.tensors)
    assert found is not None
    one, ins, out = found
    family = q8_conv_kind(one, ins)
    w = ohwi(np.asarray(op.weights["W"]))
    taps = int(np.prod(w.shape[1:]))
    wn = ctx.weights.add(f"{op.name}_W", _blocked(w, family, step), np.int8)
    mult, shift, nq = requant_arrays(op, ctx)
    more = nq > 1
    q = q_record(op, ctx, (f"{mult} + c" if more else mult, f"{shift} + c" if more else shift,
                           g if more else 1), gemm_rounding(op))  # fmt: skip
    q[0] = q[0].replace("static const", "const", 1)
    bn = bias(op, ctx)
    groups = g if family == "depthwise" else 1
    shapes = replace(ctx, tensors={**sub.tensors, op.inputs[0]: ins[0], op.outputs[0]: out})
    params = window_record(one, shapes, np.asarray(op.weights["W"]).shape[2:], groups=groups)
    scratch = f"{ops[0].name}:scratch"
    own = -(-handler(one).scratch_bytes(one, ins, out, 1) // 4) * 4
    s = ctx.p8(scratch) if own else "0"
    x, y = sub.p8(op.inputs[0]), sub.p8(op.outputs[0])
    fn = "k_" + variant_name(family, ctx.isa)
    b = f"{bn} + c" if bn != "0" else "0"
    put = []
    n = slab_out_bytes(ops, k, g, ctx.tensors)
    if n:  # the last op: its slab after the kernel's scratch, then into channels c.. of y
        slab = f"(int8_t *)(A8 + {ctx.offsets[scratch] + own})"
        put = [f"k_q_pex_put({slab}, {g}, {y} + c, {int(ctx.tensors[op.outputs[0]].shape[-1])}, "
               f"{n // g});"]  # fmt: skip
        y = slab
    return [*params, *q, f"{fn}(&p, &q, {x}, {wn} + c * {taps}, {b}, {s}, {y});", *put]


def _blocked(w: np.ndarray, family: str, step: int) -> np.ndarray:
    """OHWI weights as consecutive blocks of ``step`` output channels, each in the layout of the
    kernel ``family`` (:mod:`splitter.codegen.ops.q8_variants`), ``g * K`` bytes each."""
    layout = {"conv": conv_weights, "pointwise": conv_weights, "depthwise": depthwise_weights}
    parts = []
    for c in range(0, w.shape[0], step):
        block = np.asarray(layout[family](w[c : c + step])).ravel()
        assert block.size == w[c : c + step].size, "a kernel layout that changes the byte count"
        parts.append(block)
    return np.concatenate(parts)


def _q8_planes(
    op: Op, ctx: EmitContext, sub: EmitContext, inner: set[str], g: int, channels: int
) -> list[str]:
    """A depthwise conv touching a full tensor, plane by plane (``k_q_dw_plane``): channel
    ``c + j`` of a full NHWC tensor (stride ``C``) or plane ``j`` of a slab (stride ``g``)."""
    w = ohwi(np.asarray(op.weights["W"]))
    taps = int(np.prod(w.shape[1:]))
    wn = ctx.weights.add(f"{op.name}_W", w, np.int8)
    bn = bias(op, ctx)
    mult, shift, nq = requant_arrays(op, ctx)
    k = " + c + j" if nq > 1 else ""
    q = q_record(op, ctx, (f"{mult}{k}", f"{shift}{k}", 1), gemm_rounding(op))
    q[0] = q[0].replace("static const", "const", 1)
    one = replace(ctx, tensors={**sub.tensors, **{
        n: replace(ctx.tensors[n], shape=(*ctx.tensors[n].shape[:3], 1))
        for n in (op.inputs[0], op.outputs[0])}})  # fmt: skip
    params = window_record(op, one, np.asarray(op.weights["W"]).shape[2:], groups=1)

    def plane(name: str) -> tuple[str, int]:
        if name in inner:
            return f"{ctx.p8(name)} + j", g
        return f"{ctx.p8(name)} + c + j", int(ctx.tensors[name].shape[-1])

    (x, xs), (y, ys) = plane(op.inputs[0]), plane(op.outputs[0])
    fn = pex_kernel("q_dw_plane", ctx.isa)
    b = f"{bn} + c + j" if bn != "0" else "0"
    call = f"{fn}(&p, &q, {x}, {xs}, {wn} + (c + j) * {taps}, {b}, {y}, {ys});"
    return [*params, f"for (int j = 0; j < {g}; j++) {{", *("    " + line for line in q),
            "    " + call, "}"]  # fmt: skip


def _q8_fill_folded(op: Op, ctx: EmitContext) -> list[str]:
    """int32 accumulators set to ``b[o] - in_zp * sum_c w[o, c]`` before the loop (the input
    zero point folded: ``k_q_pex_accumulate_g`` adds raw codes)."""
    y = op.outputs[0]
    hw = int(np.prod(ctx.tensors[y].shape[1:3]))
    o = ctx.tensors[y].shape[3]
    w = np.asarray(op.weights["W"]).astype(np.int64).reshape(o, -1)
    _, in_zp = qp(ctx.tensors[op.inputs[0]])
    b = np.asarray(op.weights["B"], dtype=np.int64) if "B" in op.weights else np.zeros(o, np.int64)
    folded = ctx.weights.add(
        f"{op.name}_Bz", (b - in_zp * w.sum(axis=1)).astype(np.int32), np.int32
    )
    return [f"k_q_pex_fill(A8 + {ctx.offsets[y + ':acc']}, {folded}, {o}, {hw});"]


def _q8_accumulate_g(op: Op, ctx: EmitContext, g: int) -> list[str]:
    """Input channels ``c .. c + g - 1`` added to an int8 pointwise conv's accumulators."""
    w = np.asarray(op.weights["W"])
    o, cin = w.shape[:2]
    y = op.outputs[0]
    hw = int(np.prod(ctx.tensors[y].shape[1:3]))
    wn = ctx.weights.add(f"{op.name}_W", w.reshape(o, cin), np.int8)
    fn = "k_q_pex_accumulate_g_dsp" if ctx.isa == "dsp" else "k_q_pex_accumulate_g"
    acc = f"A8 + {ctx.offsets[y + ':acc']}"
    return [f"{fn}({ctx.p8(op.inputs[0])}, {g}, {wn} + c, {cin}, {o}, {hw}, {acc});"]
