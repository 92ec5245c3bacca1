"""QDQ ONNX (``onnxruntime.quantization.quantize_static``, QDQ format) to int8 canonical ops.

A QDQ graph spells an int8 model in float ops: every quantised activation ``t`` appears as
``QuantizeLinear(t) -> t_q (int8) -> DequantizeLinear -> t_dq (float)``, every int8 weight as a
constant ``DequantizeLinear(W_q, scale, zero_point, axis)``, and every compute node
(Conv, Gemm, MatMul, Add, MaxPool, AveragePool, GlobalAveragePool, Flatten / Reshape, Relu)
reads ``*_dq`` tensors and writes a float tensor that a single ``QuantizeLinear`` consumes.
:func:`lower_qdq` recognises that pattern and emits the integer model the int8 kernels
(``kernels_q8.c``, TFLite arithmetic) run:

* a compute node becomes one canonical op (the float converter of
  :mod:`splitter.importers.onnx_ops` gives kind and attributes) that reads the ``t_q`` tensors
  of its inputs and writes the ``QuantizeLinear`` output after it, with int8 weights ``W``
  (canonical layout), int32 bias ``B`` (``DequantizeLinear`` of an int32 initializer whose
  scale is ``s_in * s_w``, or a float bias quantised to that scale) and ``attrs["w_scale"]`` /
  ``attrs["w_zero_point"]`` (one per output channel, or one per tensor);
* ``QuantizeLinear`` of a float graph input becomes ``quantize`` and ``DequantizeLinear``
  writing a graph output becomes ``dequantize``; every other Q / DQ node is absorbed;
* GlobalAveragePool becomes ``mean`` over H, W (the int8 kernel, TFLite's MEAN arithmetic);
* Slice and Concat (a layer split's input channel slice and concat,
  :mod:`splitter.slicing.split_source`) keep the quantisation (bytes are copied); a rank-4 one
  has its bounds / axis moved to the NHWC order;
* any other operator (onnxruntime leaves Softmax, Sigmoid and others in float) runs on its float
  kernel, as onnxruntime runs it: each int8 input it reads through a DequantizeLinear becomes a
  ``dequantize`` writing that DequantizeLinear's float output, the op is converted by the float
  converter on the float names, and a QuantizeLinear reading its output becomes a mid-graph
  ``quantize`` (its output may also be a float graph output). Such float islands hold rank <= 3
  tensors, or rank-4 ones with ``C == 1`` or ``H * W == 1`` (NCHW and NHWC orders agree).

Layout: the int8 kernels are NHWC, so every rank-4 int8 tensor of the graph is NHWC in the
firmware's arena; its :class:`~splitter.ir.TensorSpec` carries the NHWC shape (same bytes, the
name of the ONNX tensor) while float tensors keep the ONNX NCHW shapes. The graph input's
``quantize`` and an output's ``dequantize`` carry ``attrs["perm"]`` (the transpose between the
float and the int8 tensor). A Flatten / Reshape of an int8 tensor is a view only when the NCHW
and NHWC orders agree (``H * W == 1`` or ``C == 1``); otherwise it is reported unsupported.

The sub-models keep the QDQ form: the boundary tensors are the ``t_q`` int8 tensors, which
exist in the ONNX file, so the slicer cuts there and int8 bytes (1 per element) cross the
links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from splitter.errors import UnsupportedOpError, quoted
from splitter.importers.onnx_nodes import ImportContext, OnnxNode, Unsupported
from splitter.importers.onnx_ops import CONVERTERS
from splitter.ir import Op, QuantParams, TensorSpec

#: The two QDQ operators (default domain).
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
#: Compute nodes a QDQ graph may hold between DequantizeLinear and QuantizeLinear.
COMPUTE_OPS = frozenset(
    {
        "Conv",
        "Gemm",
        "MatMul",
        "Add",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "Flatten",
        "Reshape",
        "Squeeze",
        "Unsqueeze",
        "Relu",
        "Slice",
        "Concat",
    }
)
#: The int8 op kind each ONNX operator of a QDQ graph becomes (``splitter ops`` lists these).
INT8_KINDS = {
    "QuantizeLinear": "quantize",
    "DequantizeLinear": "dequantize",
    "Conv": "conv2d",
    "Gemm": "dense",
    "MatMul": "dense",
    "Add": "add",
    "MaxPool": "maxpool",
    "AveragePool": "avgpool",
    "GlobalAveragePool": "mean",
    "Flatten": "reshape",
    "Reshape": "reshape",
    "Squeeze": "reshape",
    "Unsqueeze": "reshape",
    "Relu": "relu",
    "Slice": "slice",
    "Concat": "concat",
}
#: Op kinds whose constant ``W`` is quantised (int8 weights, int32 bias).
_WEIGHTED = frozenset({"conv2d", "dense"})
#: Op kinds whose int8 kernel keeps the input's scale and zero point (TFLite's convention).
_SAME_SCALE = frozenset({"maxpool", "avgpool", "reshape", "slice", "concat"})
#: NCHW -> NHWC.
TO_NHWC = (0, 2, 3, 1)


def is_qdq(nodes: Sequence[OnnxNode]) -> bool:
    """True when the graph holds QuantizeLinear / DequantizeLinear nodes (a QDQ model)."""
    return any(n.op_type in QDQ_OPS and n.domain in ("", "ai.onnx") for n in nodes)


@dataclass(frozen=True)
class _Weight:
    """A constant DequantizeLinear: int values, scales, zero points, axis (``None``: scalar)."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None


@dataclass
class _Patterns:
    """What the QDQ nodes say: weights, activation quantisation and where int8 tensors are."""

    weights: dict[str, _Weight]  # DQ output name -> weight
    quant: dict[str, QuantParams]  # int8 activation name -> its scale / zero point
    dq_of: dict[str, str]  # float DQ output -> int8 tensor it reads
    q_after: dict[str, str]  # float tensor -> int8 output of the QuantizeLinear reading it
    q_nodes: dict[str, OnnxNode]  # int8 output -> its QuantizeLinear
    readers: dict[str, int]  # tensor -> number of nodes reading it
    dq_nodes: dict[str, OnnxNode]  # float DQ output -> its DequantizeLinear
    dequantized: set[str] = field(default_factory=set)  # DQ outputs a float op's dequantize wrote


def lower_qdq(
    nodes: Sequence[OnnxNode],
    ctx: ImportContext,
    inputs: Sequence[str],
    outputs: Sequence[str],
    path: Path,
) -> tuple[list[Op], dict[str, TensorSpec]]:
    """The int8 canonical ops of a QDQ graph and the spec of every tensor they touch.

    Raises one :class:`UnsupportedOpError` listing every node outside the pattern.
    """
    pat = _patterns(nodes, ctx)
    # the float converters read the weights' int values as the DQ outputs' constants (a copy:
    # the normalised model keeps the DequantizeLinear nodes, not folded initializers)
    consts = {name: w.q.astype(np.float32) for name, w in pat.weights.items()}
    ctx = replace(ctx, consts=ctx.consts | consts)
    ops: list[Op] = []
    problems: list[str] = []
    for node in nodes:
        try:
            ops.extend(_lower(node, pat, ctx, inputs, outputs))
        except Unsupported as why:
            problems.append(f"{node.label}: {why}")
    if problems:
        raise UnsupportedOpError(
            f"{path}: {len(problems)} node(s) of the QDQ model cannot run on the int8 kernels: "
            f"{'; '.join(problems)}; quantise with onnxruntime.quantization.quantize_static "
            f"(QDQ format, int8) around {', '.join(sorted(COMPUTE_OPS))}"
        )
    return ops, _specs(ops, pat, ctx, inputs)


def _patterns(nodes: Sequence[OnnxNode], ctx: ImportContext) -> _Patterns:
    pat = _Patterns({}, {}, {}, {}, {}, {}, {})
    for n in nodes:
        for name in set(n.inputs):
            pat.readers[name] = pat.readers.get(name, 0) + 1
        if n.op_type == "DequantizeLinear" and ctx.is_const(n.inputs[0]):
            pat.weights[n.outputs[0]] = _weight(n, ctx)
        elif n.op_type == "DequantizeLinear":
            pat.dq_of[n.outputs[0]] = n.inputs[0]
            pat.dq_nodes[n.outputs[0]] = n
        elif n.op_type == "QuantizeLinear":
            pat.q_after[n.inputs[0]] = n.outputs[0]
            pat.q_nodes[n.outputs[0]] = n
            pat.quant[n.outputs[0]] = _act_quant(n, ctx)
    return pat


def _weight(n: OnnxNode, ctx: ImportContext) -> _Weight:
    scale = np.asarray(ctx.consts.get(n.inputs[1], np.float32(0)), np.float32)
    zp_name = n.input(2)
    q = np.asarray(ctx.consts[n.inputs[0]])
    zp = np.asarray(ctx.consts[zp_name]) if zp_name else np.zeros_like(scale, q.dtype)
    axis = int(n.attr("axis", 1)) if scale.ndim == 1 and scale.size > 1 else None
    return _Weight(q, scale.reshape(-1), zp.reshape(-1), axis)


def _act_quant(n: OnnxNode, ctx: ImportContext) -> QuantParams:
    """Per-tensor int8 scale / zero point of an activation QuantizeLinear."""
    if not ctx.is_const(n.inputs[1]) or (n.input(2) and not ctx.is_const(n.inputs[2])):
        raise UnsupportedOpError(f"{ctx.path}: {n.label}: scale / zero point are not constants")
    scale = np.asarray(ctx.consts[n.inputs[1]], np.float32).reshape(-1)
    zp = np.asarray(ctx.consts[n.inputs[2]]) if n.input(2) else np.zeros(1, np.uint8)
    return QuantParams(tuple(float(s) for s in scale), tuple(int(z) for z in zp.reshape(-1)), None)


def _lower(
    node: OnnxNode,
    pat: _Patterns,
    ctx: ImportContext,
    inputs: Sequence[str],
    outputs: Sequence[str],
) -> list[Op]:
    """The ops ``node`` becomes (none for an absorbed Q / DQ)."""
    if node.op_type == "QuantizeLinear":
        return _quantize(node, pat, ctx, inputs)
    if node.op_type == "DequantizeLinear":
        return _dequantize(node, pat, ctx, outputs)
    if node.op_type not in COMPUTE_OPS:
        return _float_island(node, pat, ctx)
    return [_compute(node, pat, ctx)]


def _float_island(node: OnnxNode, pat: _Patterns, ctx: ImportContext) -> list[Op]:
    """An operator with no int8 lowering, run on its float kernel: ``dequantize`` of each int8
    input, the float op, ``quantize`` of its output when a QuantizeLinear reads it."""
    if node.op_type not in CONVERTERS:
        raise Unsupported(f"{node.op_type} has no kernel")
    acts = [i for i in node.inputs if i and not ctx.is_const(i)]
    ops: list[Op] = []
    for a in acts:
        if a in pat.weights:
            raise Unsupported(f"int8 constant operand {quoted(a)} of a float op")
        if a not in pat.dq_of:  # a float graph input, or another float op's output
            if ctx.dtype(a) != "float32":
                raise Unsupported(f"input {quoted(a)} is {ctx.dtype(a)} (float32 or a DQ output)")
            continue
        _same_order(a, ctx)
        if a not in pat.dequantized:  # several float ops may read one DequantizeLinear
            pat.dequantized.add(a)
            ops.append(_island_dequantize(a, pat))
    ops.extend(CONVERTERS[node.op_type](node, ctx))
    for out in node.outputs:
        if out in pat.q_after:
            y = pat.q_after[out]
            _int8_dtype(y, ctx)
            _same_order(out, ctx)
            q = pat.q_nodes[y]
            ops.append(Op(q.name, "quantize", (out,), (y,), {"perm": None}, {}, (q.name,)))
    return [replace(op, source_nodes=op.source_nodes or (node.name,)) for op in ops]


def _island_dequantize(a: str, pat: _Patterns) -> Op:
    """``dequantize`` of the int8 tensor behind DequantizeLinear output ``a`` into ``a``."""
    name = pat.dq_nodes[a].name
    return Op(name, "dequantize", (pat.dq_of[a],), (a,), {"perm": None}, {}, (name,))


def _same_order(name: str, ctx: ImportContext) -> None:
    """A float tensor next to an int8 one must have the same element order in NCHW and NHWC."""
    shape = ctx.shape(name)
    if len(shape) == 4 and shape[1] != 1 and shape[2] * shape[3] != 1:
        raise Unsupported(
            f"float tensor {quoted(name)} {shape} next to an int8 one (int8 tensors are held "
            "NHWC; a float op between them runs on rank <= 3 tensors only)"
        )


def _quantize(
    node: OnnxNode, pat: _Patterns, ctx: ImportContext, inputs: Sequence[str]
) -> list[Op]:
    """A QuantizeLinear after a compute node is absorbed; of a graph input it is ``quantize``."""
    x, y = node.inputs[0], node.outputs[0]
    if x not in inputs:
        return []
    _int8_dtype(y, ctx)
    readers = pat.readers.get(x, 0)
    if readers != 1:  # the kernel quantises in place in the input's bytes
        raise Unsupported(f"graph input {quoted(x)} is read by {readers} nodes (1 supported)")
    rank = len(ctx.shape(x))
    attrs = {"perm": TO_NHWC if rank == 4 else None}
    return [Op(node.name, "quantize", (x,), (y,), attrs, {}, (node.name,))]


def _dequantize(
    node: OnnxNode, pat: _Patterns, ctx: ImportContext, outputs: Sequence[str]
) -> list[Op]:
    """A DequantizeLinear of a weight or before a compute node is absorbed; one writing a graph
    output is ``dequantize``."""
    x, y = node.inputs[0], node.outputs[0]
    if y in pat.weights or y not in outputs:
        return []
    if x not in pat.quant:
        raise Unsupported(f"input {quoted(x)} is not written by a QuantizeLinear")
    if len(ctx.shape(y)) == 4:
        raise Unsupported(f"rank-4 graph output {quoted(y)} (int8 tensors are held NHWC)")
    return [Op(node.name, "dequantize", (x,), (y,), {"perm": None}, {}, (node.name,))]


def _int8_dtype(name: str, ctx: ImportContext) -> None:
    if ctx.dtype(name) != "int8":
        raise Unsupported(f"{quoted(name)} is {ctx.dtype(name)} (int8 activations only)")


def _compute(node: OnnxNode, pat: _Patterns, ctx: ImportContext) -> Op:
    """The int8 op of a compute node: float converter on the int8 names, weights quantised."""
    acts = [i for i in node.inputs if i and i not in pat.weights and not ctx.is_const(i)]
    for a in acts:
        if a not in pat.dq_of:
            raise Unsupported(f"input {quoted(a)} is not a DequantizeLinear output")
    out = node.outputs[0]
    if out not in pat.q_after:
        raise Unsupported(f"output {quoted(out)} is not quantised by a QuantizeLinear")
    y = pat.q_after[out]
    _int8_dtype(y, ctx)
    rename = {a: pat.dq_of[a] for a in acts} | {out: y}
    renamed = replace(
        node,
        inputs=tuple(rename.get(i, i) for i in node.inputs),
        outputs=(y, *node.outputs[1:]),
    )
    converted = CONVERTERS[node.op_type](renamed, ctx)
    if len(converted) != 1:
        raise Unsupported("does not map to a single op")
    op = converted[0]
    if op.kind == "global_avgpool":
        op = replace(op, kind="mean", attrs={"axes": (1, 2), "keepdims": 1, "act": None})
    if op.kind == "reshape":
        _check_view(node, pat, ctx, rename)
    if op.kind in ("slice", "concat") and len(ctx.shape(y)) == 4:
        op = _nhwc_axes(op)
    if op.kind in _SAME_SCALE and pat.quant[op.inputs[0]] != pat.quant[y]:
        raise Unsupported(f"{op.kind} changes the quantisation (the int8 kernel keeps it)")
    if op.kind in _WEIGHTED:
        op = _quantised_weights(op, node, pat, ctx, rename)
    elif op.weights:
        raise Unsupported(f"constant operand of {op.kind} (int8 activations only)")
    if op.kind not in _WEIGHTED | _SAME_SCALE | {"mean", "add", "relu"}:
        raise Unsupported(f"{op.kind} has no int8 kernel")
    return replace(op, source_nodes=(node.name,))


def _nhwc_axes(op: Op) -> Op:
    """A rank-4 int8 slice / concat with its NCHW bounds or axis in the NHWC order the int8
    tensors are held in (module docstring): ``d_nhwc = TO_NHWC.index(d_nchw)``."""
    if op.kind == "concat":
        return replace(op, attrs={**op.attrs, "axis": TO_NHWC.index(int(op.attr("axis")))})
    attrs = {k: tuple(op.attr(k)[p] for p in TO_NHWC) for k in ("starts", "ends", "steps")}
    return replace(op, attrs={**op.attrs, **attrs})


def _check_view(
    node: OnnxNode, pat: _Patterns, ctx: ImportContext, rename: Mapping[str, str]
) -> None:
    """A reshape of an NHWC-held int8 tensor keeps element order only when C or H * W is 1."""
    x = rename.get(node.inputs[0], node.inputs[0])
    shape = ctx.shape(x)
    if len(shape) == 4 and shape[1] != 1 and shape[2] * shape[3] != 1:
        raise Unsupported(
            f"reshape of int8 {quoted(x)} {shape} (held NHWC, the NCHW element order differs)"
        )
    if len(ctx.shape(node.outputs[0])) == 4:
        raise Unsupported("reshape to rank 4 of an int8 tensor")


def _quantised_weights(
    op: Op, node: OnnxNode, pat: _Patterns, ctx: ImportContext, rename: Mapping[str, str]
) -> Op:
    """``op`` with int8 ``W``, int32 ``B`` and the weight scales in its attributes."""
    wname = next((i for i in node.inputs[1:] if i in pat.weights), None)
    if wname is None:
        raise Unsupported("weights are not a DequantizeLinear of an int8 constant")
    w = pat.weights[wname]
    if w.q.dtype != np.int8:
        raise Unsupported(f"weights are {w.q.dtype} (int8 only)")
    if np.any(w.zero_point != 0):
        raise Unsupported("non-zero weight zero points (symmetric int8 weights only)")
    if op.attr("alpha", 1.0) != 1.0 or node.attr("alpha", 1.0) != 1.0:
        raise Unsupported("Gemm alpha != 1")
    if node.op_type == "Gemm" and float(node.attr("beta", 1.0)) != 1.0:
        raise Unsupported("Gemm beta != 1")
    out_channels = int(np.asarray(op.weights["W"]).shape[0])
    if w.scale.size not in (1, out_channels):
        raise Unsupported(f"{w.scale.size} weight scales for {out_channels} output channels")
    weights = {"W": np.rint(np.asarray(op.weights["W"])).astype(np.int8)}
    x = rename[node.inputs[0]]
    in_scale = np.float32(pat.quant[x].scale[0])
    bias = _bias(node, pat, ctx, in_scale * w.scale, out_channels)
    if bias is not None:
        weights["B"] = bias
    attrs = dict(op.attrs)
    attrs["w_scale"] = tuple(float(s) for s in w.scale)
    attrs["w_zero_point"] = tuple(0 for _ in w.scale)
    attrs["weight_tensors"] = {"W": wname}
    return replace(op, attrs=attrs, weights=weights)


def _bias(
    node: OnnxNode, pat: _Patterns, ctx: ImportContext, scale: np.ndarray, n: int
) -> np.ndarray | None:
    """int32 bias: the int32 initializer behind a DequantizeLinear whose scale is ``s_in * s_w``
    (what quantize_static writes), or a float bias rounded to that scale."""
    name = node.input(2)
    if not name:
        return None
    if name in pat.weights:
        b = pat.weights[name]
        if b.q.dtype != np.int32 or np.any(b.zero_point != 0):
            raise Unsupported("bias is not int32 with zero point 0")
        if not np.allclose(np.broadcast_to(b.scale, (n,)), np.broadcast_to(scale, (n,)), rtol=1e-6):
            raise Unsupported("bias scale differs from input scale * weight scale")
        return np.broadcast_to(b.q.reshape(-1), (n,)).astype(np.int32)
    value = np.asarray(ctx.const(name), np.float64).reshape(-1)
    return np.rint(np.broadcast_to(value, (n,)) / scale.astype(np.float64)).astype(np.int32)


def _specs(
    ops: Sequence[Op], pat: _Patterns, ctx: ImportContext, inputs: Sequence[str]
) -> dict[str, TensorSpec]:
    """Float tensors with their ONNX shapes; int8 tensors NHWC (rank 4) with their quant."""
    names = [*inputs, *(o for op in ops for o in op.outputs)]
    specs: dict[str, TensorSpec] = {}
    for name in names:
        shape = ctx.shape(name)
        if name in pat.quant:
            if len(shape) == 4:
                shape = tuple(shape[p] for p in TO_NHWC)
            specs[name] = TensorSpec(name, shape, "int8", pat.quant[name])
        else:
            specs[name] = TensorSpec(name, shape, ctx.dtype(name))
    return specs
