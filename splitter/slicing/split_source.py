"""Write a layer split (:mod:`splitter.graph.split`) into the model file itself.

Slicing cuts the loaded model's file by tensor names, so the slices and the concat of a split
must exist there too. :func:`split_loaded` returns a :class:`~splitter.importers.LoadedModel`
whose bytes carry the rewrite and whose graph is :func:`splitter.graph.split.split_graph` of the
loaded graph, with the same op and tensor names:

* ONNX (float): the nodes computing the op's output from its input (the Conv / Gemm / MatMul
  and what the importer fused into it: BatchNormalization, bias Add, Relu / Clip) are replaced
  by, per slice, a ``Conv`` (the original node's attributes) or a ``Gemm`` (``transB = 1``)
  with the importer's folded weights ``W_i``, ``B_i``, its activation node, then one ``Concat``
  writing the original output name. Initializers no node reads any more are dropped.
* TFLite (float and int8): the operator is replaced by ``k`` copies reading sliced filter and
  bias buffers (rows ``[r_i, r_{i+1})`` of the file's own arrays, their per-channel scales and
  zero points cut the same way, per-tensor ones kept) and writing new output tensors with the
  output's quantisation, then one ``CONCATENATION`` writing the original output tensor.

Validation then checks the rewritten model against the user's file
(:func:`splitter.slicing.validate.normalisation_stats`: float within 1e-5, int8 bit-exact).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

from splitter.errors import SplitRequestError
from splitter.graph.split import (
    LayerSplit,
    channel_axis,
    conv_groups,
    input_channels,
    slice_groups,
    split_graph,
)
from splitter.importers import LoadedModel
from splitter.ir import Graph, Op

#: ONNX activation node per fused ``act`` the rewrite can write (``None``: no node).
ONNX_ACTS = (None, "relu", "relu6", "clip")


def split_loaded(model: LoadedModel, splits: Sequence[LayerSplit]) -> LoadedModel:
    """``model`` with ``splits`` written into its bytes and its graph (module docstring)."""
    todo = [s for s in splits if s.slices > 1]
    if not todo:
        return model
    ops = {op.name: op for op in model.graph.ops}
    if model.format == "onnx":
        proto = model.onnx_model()
        for split in todo:
            op = ops[split.op]
            if model.graph.tensors[op.outputs[0]].dtype == "int8":
                _split_qdq(proto, model.graph, op, split)
            else:
                _split_onnx(proto, model.graph, op, split)
        data = proto.SerializeToString()
    else:
        from splitter.importers.tflite_writer import pack_model
        from splitter.slicing.tflite_slice import load_tflite_model

        _, tfl = load_tflite_model(model.path, model.data)
        for split in todo:
            _split_tflite(tfl, model.graph, ops[split.op], split)
        data = pack_model(tfl)
    return replace(model, data=data, graph=split_graph(model.graph, todo))


# --- ONNX ------------------------------------------------------------------------------------


def _split_onnx(proto: onnx.ModelProto, graph: Graph, op: Op, split: LayerSplit) -> None:
    """Replace the nodes computing ``op`` by its slices and a Concat (module docstring)."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    path = _node_path(g, op.inputs[0], op.outputs[0], inits, op.name)
    first = path[0]
    new: list[onnx.NodeProto] = []
    for i, (r0, r1) in enumerate(split.ranges):
        new.extend(_onnx_slice(g, op, split, i, r0, r1, first))
    new.append(
        onnx.helper.make_node(
            "Concat",
            [f"{op.outputs[0]}.slice{i}" for i in range(split.slices)],
            [op.outputs[0]],
            name=split.concat_name,
            axis=channel_axis(op, graph),
        )
    )
    at = min(list(g.node).index(n) for n in path)
    kept = [n for n in g.node if all(n is not p for p in path)]
    del g.node[:]
    g.node.extend(kept[:at] + new + kept[at:])
    _drop_unused_initializers(g)
    drop = {n for node in path for n in node.output} - {op.outputs[0]}
    keep_vi = [v for v in g.value_info if v.name not in drop]
    del g.value_info[:]
    g.value_info.extend(keep_vi)


def _node_path(
    g: onnx.GraphProto, x: str, y: str, inits: set[str], name: str
) -> list[onnx.NodeProto]:
    """The nodes from the one reading ``x`` to the one writing ``y``, each fed by the last."""
    producer = {out: n for n in g.node for out in n.output}
    path: list[onnx.NodeProto] = []
    tensor = y
    while tensor != x:
        node = producer.get(tensor)
        data = [t for t in node.input if t and t not in inits] if node is not None else []
        if node is None or not data or len(path) > 8:
            raise SplitRequestError(
                f"{name}: cannot find the ONNX nodes computing it from its input; "
                "this layer cannot be split in this file"
            )
        path.append(node)
        tensor = data[0]
    return path[::-1]


def _onnx_slice(
    g: onnx.GraphProto, op: Op, split: LayerSplit, i: int, r0: int, r1: int, first: Any
) -> list[onnx.NodeProto]:
    """The nodes of slice ``i``: Conv or Gemm on the folded weights, then the activation."""
    name, out = split.slice_name(i), f"{op.outputs[0]}.slice{i}"
    act = op.attr("act")
    pre = out if act is None else f"{out}.pre"
    inputs = [op.inputs[0]]
    cut: list[onnx.NodeProto] = []
    if conv_groups(op) > 1:  # a grouped conv's slice reads its input channels only
        cut = [_onnx_input_slice(g, op, split, i)]
        inputs = [cut[0].output[0]]
    for key in ("W", "B"):
        if key in op.weights:
            w = np.ascontiguousarray(op.weights[key][r0:r1]).astype(op.weights[key].dtype)
            g.initializer.append(onnx.numpy_helper.from_array(w, f"{name}.{key}"))
            inputs.append(f"{name}.{key}")
    if op.kind == "conv2d":
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in first.attribute}
        attrs["group"] = slice_groups(op, split, i)
        nodes = [*cut, onnx.helper.make_node("Conv", inputs, [pre], name=name, **attrs)]
    else:
        nodes = [onnx.helper.make_node("Gemm", inputs, [pre], name=name, transB=1)]
    if act is None:
        return nodes
    return [*nodes, _onnx_act(g, op, name, pre, out)]


def _onnx_input_slice(g: onnx.GraphProto, op: Op, split: LayerSplit, i: int) -> onnx.NodeProto:
    """``Slice`` of the input channels ``[c0, c1)`` slice ``i`` of a grouped conv reads (axis 1,
    NCHW), named as :func:`splitter.graph.split.split_graph` names it."""
    c0, c1 = input_channels(op, split, i)
    name = f"{op.name}.in{i}"
    consts = []
    for tag, v in (("starts", c0), ("ends", c1), ("axes", 1)):
        g.initializer.append(onnx.numpy_helper.from_array(np.array([v], np.int64), f"{name}.{tag}"))
        consts.append(f"{name}.{tag}")
    return onnx.helper.make_node(
        "Slice", [op.inputs[0], *consts], [f"{op.outputs[0]}.in{i}"], name=name
    )


def _onnx_act(g: onnx.GraphProto, op: Op, name: str, pre: str, out: str) -> onnx.NodeProto:
    """The activation node ``act`` of ``op`` from ``pre`` to ``out`` (``Clip`` with min / max
    inputs: the normalised model's opset is 11 or later, :mod:`splitter.importers.onnx_opset`)."""
    act = op.attr("act")
    if act == "relu":
        return onnx.helper.make_node("Relu", [pre], [out], name=f"{name}.relu")
    lo, hi = (0.0, 6.0) if act == "relu6" else (op.attr("act_min"), op.attr("act_max"))
    bounds = []
    for tag, v in (("min", lo), ("max", hi)):
        g.initializer.append(onnx.numpy_helper.from_array(np.array(v, np.float32), f"{name}.{tag}"))
        bounds.append(f"{name}.{tag}")
    return onnx.helper.make_node("Clip", [pre, *bounds], [out], name=f"{name}.clip")


def _drop_unused_initializers(g: onnx.GraphProto) -> None:
    """Remove initializers no node reads (the split op's own weights), and their graph-input
    entries (IR < 4 lists initializers among the inputs)."""
    used = {t for n in g.node for t in n.input} | {o.name for o in g.output}
    dropped = {t.name for t in g.initializer if t.name not in used}
    keep = [t for t in g.initializer if t.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(keep)
    keep_in = [v for v in g.input if v.name not in dropped]
    del g.input[:]
    g.input.extend(keep_in)


# --- QDQ ONNX --------------------------------------------------------------------------------


def _split_qdq(proto: onnx.ModelProto, graph: Graph, op: Op, split: LayerSplit) -> None:
    """Replace the QDQ nodes computing int8 ``op`` (its Conv / Gemm / MatMul, any node between
    it and the QuantizeLinear writing the output, that QuantizeLinear) by, per slice, the
    compute node on sliced int8 weights (DequantizeLinear of the rows of the file's own weight
    and bias initializers, their per-channel scales cut the same way) and a QuantizeLinear with
    the output's scale, then ``DequantizeLinear -> Concat -> QuantizeLinear`` writing the output
    (the same scale in and out: the bytes are copied). A grouped conv's slice reads
    ``DequantizeLinear -> Slice -> QuantizeLinear`` of its input channels
    (:mod:`splitter.importers.onnx_qdq` lowers both to int8 ``slice`` / ``concat``)."""
    g = proto.graph
    producer = {out: n for n in g.node for out in n.output}
    q_out = producer[op.outputs[0]]
    path = [q_out]
    while path[-1].op_type not in ("Conv", "Gemm", "MatMul"):
        node = producer.get(path[-1].input[0])
        if node is None or len(path) > 4:
            raise SplitRequestError(f"{op.name}: cannot find its QDQ nodes; cannot split it here")
        path.append(node)
    compute, between = path[-1], path[1:-1][::-1]
    x_dq = producer[compute.input[0]]  # DequantizeLinear of the input
    y_q = (q_out.input[1], q_out.input[2] if len(q_out.input) > 2 else "")
    new: list[onnx.NodeProto] = []
    for i in range(split.slices):
        new.extend(_qdq_slice(g, producer, op, split, i, (compute, between, x_dq, y_q)))
    new.extend(_qdq_concat(op, split, y_q))
    at = min(list(g.node).index(n) for n in path)
    kept = [n for n in g.node if all(n is not p for p in path)]
    del g.node[:]
    g.node.extend(kept[:at] + new + kept[at:])
    _drop_dead_dequantize(g)
    _drop_unused_initializers(g)


def _qdq_slice(
    g: onnx.GraphProto,
    producer: dict[str, onnx.NodeProto],
    op: Op,
    split: LayerSplit,
    i: int,
    nodes: tuple[onnx.NodeProto, list[onnx.NodeProto], onnx.NodeProto, tuple[str, str]],
) -> list[onnx.NodeProto]:
    """The QDQ nodes of slice ``i`` (:func:`_split_qdq`)."""
    compute, between, x_dq, (y_scale, y_zp) = nodes
    name, out = split.slice_name(i), f"{op.outputs[0]}.slice{i}"
    r0, r1 = split.ranges[i]
    made: list[onnx.NodeProto] = []
    x = compute.input[0]
    if conv_groups(op) > 1:
        made, x = _qdq_input_slice(g, op, split, i, x_dq)
    transposed = _weights_transposed(compute)
    inputs = [x]
    for k, key in ((1, "W"), (2, "B")):
        if len(compute.input) > k and compute.input[k]:
            axis = 1 if key == "W" and transposed else 0
            dq, deq = _sliced_dequantize(g, producer[compute.input[k]], (r0, r1), axis, name, key)
            made.append(dq)
            inputs.append(deq)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in compute.attribute}
    if compute.op_type == "Conv":
        attrs["group"] = slice_groups(op, split, i)
    pre = f"{out}.f"
    made.append(onnx.helper.make_node(compute.op_type, inputs, [pre], name=name, **attrs))
    for j, node in enumerate(between):  # element-wise nodes before the output's QuantizeLinear
        nxt = f"{pre}.{j}"
        made.append(_copy_node(node, pre, nxt, f"{name}.{node.op_type.lower()}{j}"))
        pre = nxt
    made.append(_q(f"{name}.q", pre, out, y_scale, y_zp))
    return made


def _qdq_input_slice(
    g: onnx.GraphProto, op: Op, split: LayerSplit, i: int, x_dq: onnx.NodeProto
) -> tuple[list[onnx.NodeProto], str]:
    """``Slice`` of the dequantised input's channels ``[c0, c1)`` (axis 1) named ``N.in<i>``,
    quantised to ``<y>.in<i>`` with the input's scale and dequantised again for the conv."""
    c0, c1 = input_channels(op, split, i)
    name, q = f"{op.name}.in{i}", f"{op.outputs[0]}.in{i}"
    consts = []
    for tag, v in (("starts", c0), ("ends", c1), ("axes", 1)):
        g.initializer.append(onnx.numpy_helper.from_array(np.array([v], np.int64), f"{name}.{tag}"))
        consts.append(f"{name}.{tag}")
    scale, zp = x_dq.input[1], x_dq.input[2] if len(x_dq.input) > 2 else ""
    return [
        onnx.helper.make_node("Slice", [x_dq.output[0], *consts], [f"{q}.f"], name=name),
        _q(f"{name}.q", f"{q}.f", q, scale, zp),
        onnx.helper.make_node("DequantizeLinear", [q, scale, zp], [f"{q}.dq"], name=f"{name}.dq"),
    ], f"{q}.dq"


def _qdq_concat(op: Op, split: LayerSplit, y_q: tuple[str, str]) -> list[onnx.NodeProto]:
    """``DequantizeLinear`` of every slice, ``Concat`` (``N.concat``) along axis 1 (the channels
    of the file's NCHW or rank-2 tensor), ``QuantizeLinear`` writing the op's output."""
    scale, zp = y_q
    y = op.outputs[0]
    parts = [f"{y}.slice{i}" for i in range(split.slices)]
    nodes = [
        onnx.helper.make_node("DequantizeLinear", [p, scale, zp], [f"{p}.dq"], name=f"{p}.dq")
        for p in parts
    ]
    nodes.append(
        onnx.helper.make_node(
            "Concat", [f"{p}.dq" for p in parts], [f"{y}.cat"], name=split.concat_name, axis=1
        )
    )
    nodes.append(_q(f"{split.concat_name}.q", f"{y}.cat", y, scale, zp))
    return nodes


def _weights_transposed(node: onnx.NodeProto) -> bool:
    """True when the output channels are axis 1 of the weights: MatMul ``(in, out)``, a Gemm
    without ``transB``; axis 0 for Conv and a ``transB = 1`` Gemm."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return node.op_type == "MatMul" or (node.op_type == "Gemm" and not attrs.get("transB", 0))


def _q(name: str, x: str, y: str, scale: str, zp: str) -> onnx.NodeProto:
    return onnx.helper.make_node(
        "QuantizeLinear", [x, scale, *([zp] if zp else [])], [y], name=name
    )


def _copy_node(node: onnx.NodeProto, x: str, y: str, name: str) -> onnx.NodeProto:
    """``node`` reading ``x`` (its first input) and writing ``y``, named ``name``."""
    out = copy.deepcopy(node)
    out.input[0], out.output[0], out.name = x, y, name
    return out


def _sliced_dequantize(
    g: onnx.GraphProto, dq: onnx.NodeProto, rows: tuple[int, int], axis: int, name: str, key: str
) -> tuple[onnx.NodeProto, str]:
    """A DequantizeLinear of ``[r0, r1)`` along ``axis`` of the constant ``dq`` dequantises
    (its per-channel scale and zero point cut the same way, per-tensor ones shared)."""
    if dq.op_type != "DequantizeLinear":
        raise SplitRequestError(f"{name}: its {key} is not a DequantizeLinear of a constant")
    inits = {t.name: t for t in g.initializer}
    r0, r1 = rows
    values = onnx.numpy_helper.to_array(inits[dq.input[0]])
    index = tuple(slice(r0, r1) if d == axis else slice(None) for d in range(values.ndim))
    ins = [f"{name}.{key}_q"]
    g.initializer.append(onnx.numpy_helper.from_array(np.ascontiguousarray(values[index]), ins[0]))
    for k, tag in ((1, "scale"), (2, "zero_point")):
        if len(dq.input) <= k or not dq.input[k]:
            continue
        v = onnx.numpy_helper.to_array(inits[dq.input[k]])
        if v.ndim == 1 and v.size == values.shape[axis] and v.size > 1:
            ins.append(f"{name}.{key}_{tag}")
            g.initializer.append(onnx.numpy_helper.from_array(v[r0:r1].copy(), ins[-1]))
        else:
            ins.append(dq.input[k])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in dq.attribute}
    if "axis" in attrs:
        attrs["axis"] = axis
    out = f"{name}.{key}"
    return onnx.helper.make_node("DequantizeLinear", ins, [out], name=f"{out}.dq", **attrs), out


def _drop_dead_dequantize(g: onnx.GraphProto) -> None:
    """Remove DequantizeLinear nodes whose output nothing reads (the split op's weights')."""
    used = {t for n in g.node for t in n.input} | {o.name for o in g.output}
    keep = [n for n in g.node if n.op_type != "DequantizeLinear" or n.output[0] in used]
    del g.node[:]
    g.node.extend(keep)


# --- TFLite ----------------------------------------------------------------------------------


def _split_tflite(model: Any, graph: Graph, op: Op, split: LayerSplit) -> None:
    """Replace the operator writing ``op``'s output by its slices and a CONCATENATION."""
    from ai_edge_litert import schema_py_generated as schema

    from splitter.slicing.tflite_slice import tensor_names

    sg = model.subgraphs[0]
    names = tensor_names(sg)
    y = names.index(op.outputs[0])
    at = next(k for k, o in enumerate(sg.operators) if y in list(o.outputs))
    orig = sg.operators[at]
    new_ops = []
    outs = []
    depthwise = _is_builtin(model, orig, schema.BuiltinOperator.DEPTHWISE_CONV_2D)
    for i, (r0, r1) in enumerate(split.ranges):
        ins = [int(orig.inputs[0])]
        if conv_groups(op) > 1:  # a grouped conv's slice reads its input channels only
            cut = _tflite_input_slice(model, sg, op, split, i)
            new_ops.append(cut)
            ins = [int(cut.outputs[0])]
        for k, t in enumerate(list(orig.inputs)[1:]):
            axis = 3 if depthwise and k == 0 else 0  # depthwise filter (1, kh, kw, O)
            ins.append(-1 if t < 0 else _sliced_const(model, sg, int(t), (r0, r1), axis, i))
        out = _copy_tensor(sg.tensors[y], f"{op.outputs[0]}.slice{i}")
        out.shape[channel_axis(op, graph)] = r1 - r0
        sg.tensors.append(out)
        outs.append(len(sg.tensors) - 1)
        sliced = copy.deepcopy(orig)
        sliced.inputs, sliced.outputs = ins, [outs[-1]]
        new_ops.append(sliced)
    cat = schema.OperatorT()
    cat.opcodeIndex = _opcode(model, schema.BuiltinOperator.CONCATENATION)
    cat.inputs, cat.outputs = outs, [y]
    cat.builtinOptionsType = schema.BuiltinOptions.ConcatenationOptions
    cat.builtinOptions = schema.ConcatenationOptionsT()
    cat.builtinOptions.axis = channel_axis(op, graph)
    sg.operators[at : at + 1] = [*new_ops, cat]


def _copy_tensor(t: Any, name: str) -> Any:
    """A copy of tensor ``t`` named ``name`` (activation: buffer 0, no signature)."""
    out = copy.deepcopy(t)
    out.name = name
    out.shape = [int(d) for d in t.shape]
    out.shapeSignature = None
    out.buffer = 0
    return out


def _sliced_const(
    model: Any, sg: Any, t: int, rows: tuple[int, int], axis: int, i: int, name: str = ""
) -> int:
    """A new constant tensor holding ``[r0, r1)`` of constant ``t`` along ``axis`` (0, or 3 for
    a depthwise filter ``(1, kh, kw, O)``); a per-channel quantisation along ``axis`` is cut
    the same way, a per-tensor one kept."""
    src = sg.tensors[t]
    buf = model.buffers[src.buffer]
    if buf is None or buf.data is None or not len(buf.data):
        raise SplitRequestError(
            f"{name}: its weights are not constant buffers in the file (computed or "
            "dequantised at run time); this layer cannot be split"
        )
    shape = [int(d) for d in src.shape]
    r0, r1 = rows
    data = np.frombuffer(bytes(bytearray(buf.data)), dtype=_np_dtype(src.type)).reshape(shape)
    index = tuple(slice(r0, r1) if d == axis else slice(None) for d in range(len(shape)))
    out = copy.deepcopy(src)
    out.name = f"{_name(src.name)}.slice{i}"
    out.buffer = _add_buffer(model, data[index])
    out.shape = list(data[index].shape)
    out.shapeSignature = None
    q = out.quantization
    if q is not None and q.scale is not None and len(q.scale) == shape[axis] and shape[axis] > 1:
        if int(q.quantizedDimension or 0) != axis:
            raise SplitRequestError(f"{name}: weights quantised along another axis; cannot split")
        q.scale = list(q.scale)[r0:r1]
        if q.zeroPoint is not None and len(q.zeroPoint) == shape[axis]:
            q.zeroPoint = list(q.zeroPoint)[r0:r1]
    sg.tensors.append(out)
    return len(sg.tensors) - 1


def _add_buffer(model: Any, array: np.ndarray) -> int:
    """Index of a new (aligned) buffer holding ``array``'s bytes."""
    from ai_edge_litert import schema_py_generated as schema

    from splitter.importers.tflite_writer import aligned

    buf = schema.BufferT()
    buf.data = np.frombuffer(np.ascontiguousarray(array).tobytes(), dtype=np.uint8)
    buf.offset, buf.size = 0, 0
    model.buffers.append(aligned(buf))
    return len(model.buffers) - 1


def _tflite_input_slice(model: Any, sg: Any, op: Op, split: LayerSplit, i: int) -> Any:
    """A ``SLICE`` operator of the input channels ``[c0, c1)`` slice ``i`` of a grouped conv
    reads (NHWC, the last axis), writing a new tensor ``<y>.in<i>`` with the input's
    quantisation; its ``begin`` / ``size`` are new int32 constants."""
    from ai_edge_litert import schema_py_generated as schema

    from splitter.slicing.tflite_slice import tensor_names

    x = tensor_names(sg).index(op.inputs[0])
    shape = [int(d) for d in sg.tensors[x].shape]
    c0, c1 = input_channels(op, split, i)
    begin, size = [0] * len(shape), list(shape)
    begin[-1], size[-1] = c0, c1 - c0
    consts = []
    for tag, v in (("begin", begin), ("size", size)):
        t = schema.TensorT()
        t.name, t.type = f"{op.name}.in{i}.{tag}", schema.TensorType.INT32
        t.shape, t.buffer = [len(shape)], _add_buffer(model, np.array(v, np.int32))
        sg.tensors.append(t)
        consts.append(len(sg.tensors) - 1)
    out = _copy_tensor(sg.tensors[x], f"{op.outputs[0]}.in{i}")
    out.shape = size
    sg.tensors.append(out)
    cut = schema.OperatorT()
    cut.opcodeIndex = _opcode(model, schema.BuiltinOperator.SLICE)
    cut.inputs, cut.outputs = [x, *consts], [len(sg.tensors) - 1]
    cut.builtinOptionsType = schema.BuiltinOptions.SliceOptions
    cut.builtinOptions = schema.SliceOptionsT()
    return cut


def _is_builtin(model: Any, operator: Any, builtin: int) -> bool:
    c = model.operatorCodes[operator.opcodeIndex]
    return max(int(c.builtinCode or 0), int(c.deprecatedBuiltinCode or 0)) == builtin


def _name(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw or "")


def _np_dtype(code: int) -> Any:
    """numpy dtype of a TFLite TensorType code (the types a conv / dense constant has)."""
    from ai_edge_litert import schema_py_generated as schema

    table = {
        schema.TensorType.FLOAT32: np.float32,
        schema.TensorType.INT8: np.int8,
        schema.TensorType.INT32: np.int32,
        schema.TensorType.INT64: np.int64,
        schema.TensorType.FLOAT16: np.float16,
        schema.TensorType.INT16: np.int16,
        schema.TensorType.UINT8: np.uint8,
    }
    return table[code]


def _opcode(model: Any, builtin: int) -> int:
    """Index of the operator code ``builtin`` (version 1), added when the model has none."""
    from ai_edge_litert import schema_py_generated as schema

    for k, c in enumerate(model.operatorCodes):
        code = max(int(c.builtinCode or 0), int(c.deprecatedBuiltinCode or 0))
        if code == builtin:
            return k
    code = schema.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = 1
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1
