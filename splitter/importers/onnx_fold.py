"""Constant folding and removal of no-op nodes for the ONNX importer.

A node is *constant* when every input it reads is an initializer or the output of another constant
node; ``Shape`` and ``Size`` of an activation are constant too once shape inference has given that
activation a static shape. All constant nodes (``Constant``, ``ConstantOfShape``, ``Shape``
arithmetic, ``Cast``, constant ``Reshape`` targets ...) are evaluated in ONE run of
``onnx.reference.ReferenceEvaluator`` on a small model holding just them, so op semantics come from
onnx itself and the cost is one evaluator set-up per model, not one per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import onnx
from onnx import helper

from splitter.errors import InputFileError
from splitter.importers.onnx_nodes import DEFAULT_DOMAINS, ImportContext, OnnxNode

#: Ops with random results: never folded (and unsupported as layers).
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"}
)
#: Ops whose output depends only on the input's static shape.
SHAPE_OPS = frozenset({"Shape", "Size"})
#: Pass-through ops the importer drops (output aliases input).
NO_OPS = frozenset({"Identity", "Dropout"})


def constant_nodes(
    nodes: Iterable[OnnxNode],
    known_consts: Iterable[str],
    static: Callable[[str], bool] = lambda _: True,
) -> set[str]:
    """Names of the nodes that fold to constants.

    ``Shape``/``Size`` of an activation fold when ``static(activation)`` says its shape is known;
    the default assumes every shape will be (used before shape inference, to list unsupported
    ops without running inference).
    """
    consts = set(known_consts)
    folded: set[str] = set()
    for node in nodes:
        if node.domain not in DEFAULT_DOMAINS or node.op_type in NONDETERMINISTIC:
            continue
        present = [i for i in node.inputs if i]
        shape_op = node.op_type in SHAPE_OPS and static(node.inputs[0])
        if shape_op or all(i in consts for i in present):
            folded.add(node.name)
            consts.update(o for o in node.outputs if o)
    return folded


def _shape_value(node: OnnxNode, ctx: ImportContext) -> np.ndarray:
    """``Shape`` (with opset-15 ``start``/``end`` slicing) or ``Size`` of a static activation."""
    shape = ctx.shape(node.inputs[0])
    if node.op_type == "Size":
        return np.array(int(np.prod(shape)), dtype=np.int64)
    start, end = node.attr("start", 0), node.attr("end", None)
    return np.array(shape[start:end], dtype=np.int64)


def _evaluate(
    batch: list[OnnxNode], protos: Mapping[str, onnx.NodeProto], ctx: ImportContext
) -> None:
    """Evaluate ``batch`` (constant nodes in topological order) with ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator  # imported on first use: ~60 ms of op modules

    produced = {o for n in batch for o in n.outputs if o}
    needed = {i for n in batch for i in n.inputs if i and i not in produced}
    inits = [
        ctx.initializer_protos[i]
        if i in ctx.initializer_protos
        else onnx.numpy_helper.from_array(ctx.consts[i], i)
        for i in sorted(needed)
    ]
    outs = sorted(produced)
    graph = helper.make_graph(
        [protos[n.name] for n in batch],
        "fold",
        [],
        [onnx.ValueInfoProto(name=o) for o in outs],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", ctx.opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    try:
        values = ReferenceEvaluator(model).run(outs, {})
    except Exception as exc:  # onnx raises many types; report one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        names = ", ".join(n.label for n in batch[:5])
        raise InputFileError(
            f"{ctx.path}: cannot fold constant nodes ({names}...): {first}; "
            "check the model with onnx.checker.check_model"
        ) from exc
    for name, value in zip(outs, values, strict=True):
        ctx.consts[name] = np.asarray(value)


def fold_constants(
    nodes: list[OnnxNode], protos: Mapping[str, onnx.NodeProto], ctx: ImportContext
) -> tuple[list[OnnxNode], list[OnnxNode]]:
    """Fold constant nodes into ``ctx.consts``; return ``(remaining nodes, folded nodes)``.

    Shape/Size of activations are computed from inferred shapes first (they may feed other
    constant nodes); then every other constant node is evaluated in one ReferenceEvaluator run.
    """
    foldable = constant_nodes(nodes, ctx.consts, ctx.is_static)
    batch: list[OnnxNode] = []
    remaining: list[OnnxNode] = []
    for node in nodes:
        if node.name not in foldable:
            remaining.append(node)
        elif node.op_type in SHAPE_OPS and node.inputs[0] not in ctx.consts:
            batch_outputs = {o for n in batch for o in n.outputs}
            if node.inputs[0] in batch_outputs:
                batch.append(node)
            else:
                ctx.consts[node.outputs[0]] = _shape_value(node, ctx)
        else:
            batch.append(node)
    if batch:
        _evaluate(batch, protos, ctx)
    return remaining, [n for n in nodes if n.name in foldable]


def remove_no_ops(
    nodes: list[OnnxNode], graph_inputs: Iterable[str], graph_outputs: Iterable[str]
) -> tuple[list[OnnxNode], dict[str, str], list[tuple[OnnxNode, str, str]]]:
    """Drop ``Identity``/``Dropout`` nodes.

    Returns ``(nodes, rename, copies)``: ``rename`` maps tensor names to the name that replaces
    them everywhere, and ``copies`` lists ``(node, src, dst)`` no-ops that must stay as zero-cost
    reshapes because both ends are graph inputs/outputs that cannot be renamed. When a removed
    node's output is a graph output, the producer's tensor is renamed to the graph output's name
    so the model keeps its output names.
    """
    alias: dict[str, str] = {}
    owner: dict[str, OnnxNode] = {}
    kept = []
    for node in nodes:
        if node.op_type in NO_OPS and node.domain in DEFAULT_DOMAINS:
            src = node.inputs[0]
            alias[node.outputs[0]] = alias.get(src, src)
            owner[node.outputs[0]] = node
        else:
            kept.append(node)
    outputs = list(graph_outputs)
    fixed = set(graph_inputs) | set(outputs)
    rename = dict(alias)
    copies = []
    for out in outputs:
        root = alias.get(out)
        if root is None:
            continue
        rename.pop(out, None)
        if root in fixed:
            copies.append((owner[out], root, out))
            continue
        for key, val in alias.items():
            if val == root and key != out:
                rename[key] = out
        rename[root] = out
        fixed.add(root)
    return kept, rename, copies


#: IR version from which initializers need not be listed as graph inputs (onnx IR.md).
IR_INITIALIZERS_NOT_INPUTS = 4


def folded_model(
    model: onnx.ModelProto,
    kept: Iterable[onnx.NodeProto],
    consts: Mapping[str, np.ndarray],
    elem_types: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """``model`` with the folded nodes replaced by initializers holding their values.

    ``kept`` are the node protos that did not fold, in file order; every tensor they read that
    folding computed (``consts``) becomes an initializer of the same name, so tensor names, and
    with them the :class:`~splitter.ir.Graph`'s boundary names, stay. Initializers only folded
    nodes read are dropped (and, for IR < 4, their graph-input entries); value_info keeps only
    tensors the kept nodes compute. Graph inputs stay even when only ``Shape`` read them.
    A value is stored with the element type shape inference gave its tensor (``elem_types``),
    should the reference evaluator have returned another numpy dtype.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    nodes = list(kept)
    read = [i for n in nodes for i in n.input if i]
    needed = dict.fromkeys(read)  # first-use order, for a deterministic file
    inits = [t for t in graph.initializer if t.name in needed]
    dropped = {t.name for t in graph.initializer} - set(needed)
    have = {t.name for t in inits}
    new = [
        onnx.numpy_helper.from_array(_typed(consts[n], (elem_types or {}).get(n)), n)
        for n in needed
        if n in consts and n not in have
    ]
    produced = {o for n in nodes for o in n.output}
    values = [v for v in graph.value_info if v.name in produced]
    inputs = [v for v in graph.input if v.name not in dropped]
    if out.ir_version < IR_INITIALIZERS_NOT_INPUTS:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in new]
    del graph.node[:], graph.initializer[:], graph.value_info[:], graph.input[:]
    graph.node.extend(nodes)
    graph.initializer.extend([*inits, *new])
    graph.value_info.extend(values)
    graph.input.extend(inputs)
    return out


def _typed(value: np.ndarray, elem_type: int | None) -> np.ndarray:
    """``value`` cast to ONNX element type ``elem_type`` when given and different."""
    array = np.asarray(value)
    if not elem_type:
        return array
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return array if array.dtype == dtype else array.astype(dtype)
