"""C for a PEX row loop (:class:`splitter.ir.ChannelLoop` with ``by == "row"``).

The schedule is :mod:`splitter.cost.rows`' (its module docstring, :func:`~splitter.cost.rows.
band_schedule`): for each band of ``loop.band`` output rows of the last op, the rows ``n_i``
every op must have produced are computed from the last op down, then each op, first to last,
produces its missing rows ``d_i .. n_i - 1`` in one call. Op ``i`` writes into the
window of its output (the inner tensor's block of the arena plan, ``window_rows[i]`` rows of
``W * C`` int8 bytes, NHWC) at slot ``d_i - l_i``, after dropping the rows its consumer no
longer reads (``k_q_slide``, four words per step, to the front: ``l_i`` is the first row
held); the last
op writes row ``d`` of the full output. Every op is an int8 convolution run by the kernel the
op run whole calls (:func:`splitter.codegen.ops.conv.q8_kernel`: the tuned ``k_q_conv_<isa>``,
``k_q_pointwise_<isa>`` or ``k_q_depthwise_<isa>``, the conv and pointwise ones with the op's
im2col scratch block, live over the whole loop; the generic ``k_q_conv2d`` for grouped convs),
with the same weights and TFLite arithmetic, so the bytes of the op run whole, on one output
band: its record ``p_i`` is copied to the stack, and each call sets ``OH`` to the rows it
computes, ``H`` to the input rows present and ``pt`` / ``pb`` to the rows missing above / below
them (the kernels skip the taps outside ``[0, H)``, exactly as for the padded whole input). In
bands of more than one row the depthwise gets its line ring (``k_q_depthwise_scratch``) in
the loop's scratch block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from splitter.codegen.escape import c_comment
from splitter.codegen.ops.base import EmitContext
from splitter.codegen.ops.conv import q8_kernel, q_record, window_record
from splitter.codegen.ops.quant import bias, gemm_rounding, requant_arrays
from splitter.cost.rows import RowGeom, loop_windows, row_bytes
from splitter.ir import ChannelLoop, Layer, Op


def emit_rows(loop: ChannelLoop, layer: Layer, ctx: EmitContext) -> list[str]:
    """One row loop (module docstring)."""
    by_name = {op.name: op for op in layer.ops}
    ops = [by_name[name] for name in loop.ops]
    ctx = replace(ctx, layout="NHWC")  # the int8 kernels are NHWC whatever the graph's layout
    band = loop.band
    found = loop_windows(ops, ctx.tensors, band)
    assert found is not None, loop.ops
    _windows, geoms = found
    n = len(ops)
    head = f"/* PEX row loop: {c_comment(' -> '.join(loop.ops))} over {loop.channels} rows */"
    if band > 1:
        head += f" /* {band} rows per iteration */"
    lines = [head, "{"]
    for i, op in enumerate(ops):
        lines.extend("    " + line for line in _records(op, i, ctx))
    counters = ", ".join([f"d{i} = 0" for i in range(n)] + [f"l{i} = 0" for i in range(n - 1)])
    lines.append(f"    int {counters};")
    rows = geoms[-1].h_out
    lines.append(f"    for (int r = 0; r < {rows}; r += {band}) {{")
    body = [f"const int n{n - 1} = r + {band} < {rows} ? r + {band} : {rows};"]
    for i in range(n - 1, 0, -1):
        g = geoms[i]
        body.append(f"int n{i - 1} = (n{i} - 1) * {g.s} - {g.pad} + {g.k};")
        body.append(f"if (n{i - 1} < 0) n{i - 1} = 0;")
        body.append(f"if (n{i - 1} > {g.h_in}) n{i - 1} = {g.h_in};")
    for i, op in enumerate(ops):
        body.extend(_produce(i, op, ops, geoms, ctx, band))
    lines.extend("        " + line for line in body)
    lines.append("    }")
    return [*lines, "}"]


def _records(op: Op, i: int, ctx: EmitContext) -> list[str]:
    """The op's ``k_window_params p<i>`` (on the stack; ``H``, ``OH``, ``pt`` and ``pb`` set per
    call) and ``k_q_params q<i>``."""
    wt = np.asarray(op.weights["W"])
    groups = int(op.attr("groups", 1) or 1)
    p = window_record(op, ctx, wt.shape[2:], groups=groups)
    p[0] = p[0].replace("static const k_window_params p =", f"k_window_params p{i} =", 1)
    q = q_record(op, ctx, requant_arrays(op, ctx), gemm_rounding(op))
    q[0] = q[0].replace(" q =", f" q{i} =", 1)
    return [*p, *q]


def _produce(
    i: int, op: Op, ops: Sequence[Op], geoms: Sequence[RowGeom], ctx: EmitContext, band: int
) -> list[str]:
    """``if (d_i < n_i)``: slide op ``i``'s window, compute its rows ``d_i .. n_i - 1`` in one
    call (:func:`splitter.cost.rows.call_rows`: ``H`` the input rows it reads, ``pt`` / ``pb``
    the rows missing above / below them)."""
    g = geoms[i]
    n = len(ops)
    x_spec = ctx.tensors[op.inputs[0]]
    y_spec = ctx.tensors[op.outputs[0]]
    x_row, y_row = row_bytes(x_spec, 1), row_bytes(y_spec, 1)
    first = "a0" if i == 0 else f"(a0 - l{i - 1})"  # the input row's index in its buffer
    fn, wn, scratch = q8_kernel(op, ctx, whole=False, band=band)
    s = f"{scratch}, " if scratch else ""
    body: list[str] = []
    if i < n - 1:
        nxt = geoms[i + 1]
        win = ctx.p8(op.outputs[0])
        body += [
            f"int keep = d{i + 1} * {nxt.s} - {nxt.pad};",
            "if (keep < 0) keep = 0;",
            f"if (keep > d{i}) keep = d{i};",
            f"if (keep > l{i}) {{",
            f"    k_q_slide({win} + (size_t)(keep - l{i}) * {y_row}, {win},",
            f"              (d{i} - keep) * {y_row});",
            f"    l{i} = keep;",
            "}",
        ]
        y = f"{win} + (size_t)(d{i} - l{i}) * {y_row}"
    else:
        y = f"{ctx.p8(op.outputs[0])} + (size_t)d{i} * {y_row}"
    body += [
        f"const int a = d{i} * {g.s} - {g.pad};",
        f"const int e = (n{i} - 1) * {g.s} - {g.pad} + {g.k};",
        "const int a0 = a < 0 ? 0 : a;",
        f"const int a1 = e > {g.h_in} ? {g.h_in} : e;",
        f"p{i}.H = a1 - a0;",
        f"p{i}.OH = n{i} - d{i};",
        f"p{i}.pt = a0 - a;",
        f"p{i}.pb = e - a1;",
        f"{fn}(&p{i}, &q{i}, {ctx.p8(op.inputs[0])} + (size_t){first} * {x_row}, {wn}, "
        f"{bias(op, ctx)}, {s}{y});",
        f"d{i} = n{i};",
    ]
    return [
        f"/* {c_comment(op.name)}: conv2d, {g.k} rows window, stride {g.s} */",
        f"if (d{i} < n{i}) {{",
        *("    " + line for line in body),
        "}",
    ]
