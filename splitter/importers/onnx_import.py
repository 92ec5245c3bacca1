"""ONNX importer: an ``.onnx`` file to a canonical :class:`~splitter.ir.Graph`.

Pipeline (each step a small function below):

1. read the file, check the default-domain opset (7..21) and that the graph has nodes,
   inputs and outputs;
2. list every unsupported op at once, before anything else can fail on it; upgrade opsets
   7..10 to 17 with ``onnx.version_converter`` (``onnx_opset``) and list again;
3. apply ``--input-shape`` overrides, reject remaining dynamic input dims, run
   ``onnx.checker`` and strict shape inference with data propagation
   (``onnx.shape_inference.infer_shapes``);
4. fold constant subgraphs with ``onnx.reference.ReferenceEvaluator`` (``onnx_fold``) and drop
   ``Identity``/``Dropout``;
5. convert node by node (``onnx_ops.CONVERTERS``), then fold BatchNorm/bias and fuse
   activations (``onnx_fuse``); a QDQ model (QuantizeLinear / DequantizeLinear nodes) is
   instead lowered to int8 ops by ``onnx_qdq.lower_qdq`` and nothing is folded;
6. (:func:`import_onnx`) write the folded values back as initializers in place of the folded
   nodes (``onnx_fold.folded_model``) and infer shapes again: the normalised model that slicing
   and validation read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import onnx
from onnx import numpy_helper
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from splitter.errors import (
    InputFileError,
    ShapeError,
    SplitterError,
    UnsupportedOpError,
    escaped,
    quoted,
)
from splitter.importers.onnx_fold import (
    NO_OPS,
    constant_nodes,
    fold_constants,
    folded_model,
    remove_no_ops,
)
from splitter.importers.onnx_fuse import fuse
from splitter.importers.onnx_nodes import (
    DEFAULT_DOMAINS,
    ImportContext,
    OnnxNode,
    Shape,
    Unsupported,
    read_nodes,
)
from splitter.importers.onnx_ops import CONVERTERS
from splitter.importers.onnx_opset import MIN_UPGRADE_OPSET, upgrade_opset
from splitter.importers.onnx_qdq import is_qdq, lower_qdq
from splitter.inputs import MODEL_MAX_BYTES, read_input_file
from splitter.ir import Graph, Op, TensorSpec

#: Default-domain opsets the importer reads as they are (older ones from
#: ``MIN_UPGRADE_OPSET`` on are upgraded on load).
MIN_OPSET, MAX_OPSET = 11, 21
#: Opset suggested when converting an out-of-range model.
TARGET_OPSET = 17
#: Old operator names the opset upgrade replaces by a supported one (old name -> new name).
UPGRADED_NAMES = {"Upsample": "Resize"}


#: graph names exporters write whatever the model (torch.onnx.export: "main_graph", older
#: "torch_jit" / "torch-jit-export"; tf2onnx: "tf2onnx"): the file's stem names the model better
EXPORTER_GRAPH_NAMES = frozenset({"", "main_graph", "torch_jit", "torch-jit-export", "tf2onnx"})


def graph_name(name: str, path: Path) -> str:
    """The model's name in plans and reports: the ONNX graph's, unless an exporter's default."""
    return path.stem if name in EXPORTER_GRAPH_NAMES else name


def _first_line(exc: BaseException) -> str:
    """First non-empty line of an exception's text (one-line error messages)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def read_model(path: Path) -> tuple[onnx.ModelProto, bytes | None]:
    """Load ``path``; InputFileError for missing/corrupt files.

    Returns the model and the file's bytes (``None`` when tensors live in external data files,
    which are loaded into the model), so the checker and shape inference can reuse the bytes
    instead of serialising a multi-megabyte model again.
    """
    raw = read_input_file(path, "ONNX model", MODEL_MAX_BYTES)
    try:
        data: bytes | None = raw
        model = onnx.load_model_from_string(raw)
        if any(uses_external_data(t) for t in model.graph.initializer):
            load_external_data_for_model(model, str(path.parent))
            data = None
    except Exception as exc:  # protobuf DecodeError, OSError, external-data errors...
        raise InputFileError(
            f"{path}: not a readable ONNX model ({_first_line(exc)}); "
            "the file is corrupt or truncated, export it again"
        ) from exc
    if not model.HasField("graph") or model.ir_version == 0:
        raise InputFileError(
            f"{path}: not an ONNX model (no graph or IR version); "
            "the file is corrupt or truncated, export it again"
        )
    return model, data


def model_opset(model: onnx.ModelProto, path: Path) -> int:
    """The default-domain opset; InputFileError with a conversion recipe when it is neither
    in ``MIN_OPSET..MAX_OPSET`` nor old enough to upgrade (``MIN_UPGRADE_OPSET..``)."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise InputFileError(
            f"{path}: model declares no default-domain opset; the file is corrupt or truncated"
        )
    opset = int(versions[0])
    if not MIN_UPGRADE_OPSET <= opset <= MAX_OPSET:
        raise InputFileError(
            f"{path}: opset {opset} is not supported (need {MIN_UPGRADE_OPSET}..{MAX_OPSET}); "
            "convert it "
            f'with onnx.version_converter: python -c "import onnx; from onnx import '
            f"version_converter as vc; onnx.save(vc.convert_version(onnx.load('{path}'), "
            f"{TARGET_OPSET}), 'model_opset{TARGET_OPSET}.onnx')\""
        )
    return opset


def check_nonempty(model: onnx.ModelProto, path: Path) -> None:
    """Reject graphs without nodes, inputs or outputs."""
    graph = model.graph
    if not graph.node:
        raise InputFileError(
            f"{path}: graph {quoted(graph.name)} has no nodes; export the model again"
        )
    inits = {i.name for i in graph.initializer}
    if not [i for i in graph.input if i.name not in inits] or not graph.output:
        raise InputFileError(
            f"{path}: graph {quoted(graph.name)} has no inputs or no outputs; "
            "export the model again"
        )


def check_model(model: onnx.ModelProto | bytes, path: Path) -> None:
    """``onnx.checker.check_model`` (after input-shape overrides, which may complete inputs)."""
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and friends
        raise InputFileError(
            f"{path}: invalid ONNX model ({_first_line(exc)}); export the model again"
        ) from exc


def check_supported(
    nodes: Sequence[OnnxNode],
    known_consts: set[str],
    path: Path,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Raise one UnsupportedOpError listing every node that is neither foldable nor supported.

    ``renamed`` maps old op names an opset upgrade will replace to their new names.
    """
    folded = constant_nodes(nodes, known_consts)
    names = renamed or {}
    bad = [
        n.label
        for n in nodes
        if n.name not in folded
        and (
            n.domain not in DEFAULT_DOMAINS
            or (names.get(n.op_type, n.op_type) not in CONVERTERS and n.op_type not in NO_OPS)
        )
    ]
    if bad:
        raise UnsupportedOpError(
            f"{path}: {len(bad)} unsupported op(s): {', '.join(bad)}; supported (default domain): "
            f"{', '.join(sorted([*CONVERTERS, *NO_OPS, 'Constant']))} and any subgraph of "
            "constants; rewrite or replace these ops before splitting"
        )


def apply_input_shapes(
    model: onnx.ModelProto, overrides: Mapping[str, tuple[int, ...]], path: Path
) -> bool:
    """Set graph-input shapes from ``overrides`` and reject any remaining dynamic dim.

    Returns True when the model was changed.
    """
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in inputs]
    for name in overrides:
        if name not in names:
            raise ShapeError(
                f"{path}: --input-shape names unknown input {quoted(name)}; inputs are {names}"
            )
    for value in inputs:
        tensor_type = value.type.tensor_type
        if value.name in overrides:
            shape = tuple(int(d) for d in overrides[value.name])
            if any(d <= 0 for d in shape):
                raise ShapeError(
                    f"{path}: --input-shape {escaped(value.name)} has a non-positive dim"
                )
            _check_static_dims(path, value, shape)
            tensor_type.shape.ClearField("dim")
            for d in shape:
                tensor_type.shape.dim.add().dim_value = d
            continue
        dims = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
        if dims is None or any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            got = "unknown" if dims is None else _dims_text(dims)
            raise ShapeError(
                f"{path}: input {quoted(value.name)} has dynamic or unknown shape {got}; give a "
                f"static shape with --input-shape {escaped(value.name)}=1x49x10x1 (your real dims, "
                "batch first)"
            )
    return bool(overrides)


def _check_static_dims(path: Path, value: onnx.ValueInfoProto, shape: tuple[int, ...]) -> None:
    """An ``--input-shape`` may fill the dims the file leaves dynamic, not contradict static
    ones: the file's model (which validation runs in onnxruntime) would refuse the input."""
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return
    dims = list(tensor_type.shape.dim)
    clash = len(dims) != len(shape) or any(
        d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != s
        for d, s in zip(dims, shape, strict=False)
    )
    if clash:
        given = "x".join(map(str, shape))
        raise ShapeError(
            f"{path}: --input-shape {escaped(value.name)}={given} contradicts the input's shape "
            f"{_dims_text(dims)} in the file; give only the dims the file leaves dynamic "
            "(or re-export the model with dynamic axes)"
        )


#: Attributes that are 0 / 1 flags in every default-domain ONNX operator that has them
#: (ONNX Operators.md: "ceil_mode: Whether to use ceil or floor (default)", "transB: Whether
#: B should be transposed", ...). The operator schemas type them as INT only, so
#: ``onnx.checker`` accepts ``ceil_mode = 7``.
FLAG_ATTRIBUTES = frozenset(
    {
        "allowzero",
        "ceil_mode",
        "count_include_pad",
        "exclusive",
        "keepdims",
        "noop_with_empty_axes",
        "reverse",
        "select_last_index",
        "storage_order",
        "transA",
        "transB",
    }
)

#: String attributes with a closed set of values (ONNX Operators.md), by (op, attribute);
#: ``""`` stands for every op.
ENUM_ATTRIBUTES: dict[tuple[str, str], frozenset[str]] = {
    ("", "auto_pad"): frozenset({"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}),
    ("Pad", "mode"): frozenset({"constant", "reflect", "edge", "wrap"}),
    ("DepthToSpace", "mode"): frozenset({"DCR", "CRD"}),
}


def check_attribute_domains(model: onnx.ModelProto, path: Path) -> None:
    """Every flag attribute is 0 or 1 and every enumerated string one of its values; else a
    one-line :class:`InputFileError` naming the node and the attribute."""
    for node in model.graph.node:
        if node.domain not in DEFAULT_DOMAINS:
            continue
        for attr in node.attribute:
            problem = _attribute_problem(node.op_type, attr)
            if problem is not None:
                label = quoted(node.name or (node.output[0] if node.output else node.op_type))
                raise InputFileError(
                    f"{path}: node {label} ({escaped(node.op_type)}) attribute {problem}; "
                    "fix the attribute or re-export the model"
                )


def _attribute_problem(op_type: str, attr: onnx.AttributeProto) -> str | None:
    """What is wrong with ``attr`` of an ``op_type`` node, or ``None``."""
    is_int = attr.type == onnx.AttributeProto.INT
    if attr.name in FLAG_ATTRIBUTES and is_int and attr.i not in (0, 1):
        return f"{attr.name} = {attr.i}, the operator allows 0 or 1"
    allowed = ENUM_ATTRIBUTES.get((op_type, attr.name)) or ENUM_ATTRIBUTES.get(("", attr.name))
    if allowed is not None and attr.type == onnx.AttributeProto.STRING:
        value = attr.s.decode("utf-8", errors="replace")
        if value not in allowed:
            return f"{attr.name} = {value[:40]!a}, the operator allows {', '.join(sorted(allowed))}"
    return None


def _dims_text(dims: Sequence[onnx.TensorShapeProto.Dimension]) -> str:
    """``1x?x10`` text of protobuf dims (dim_param shown by name)."""
    parts = []
    for d in dims:
        parts.append(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?"))
    return "x".join(parts)


def infer(model: onnx.ModelProto | bytes, path: Path) -> onnx.ModelProto:
    """Strict shape inference with data propagation (constant Shape arithmetic included)."""
    try:
        return onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception as exc:  # InferenceError, ValidationError
        raise ShapeError(
            f"{path}: shape inference failed ({_first_line(exc)}); fix the model or give "
            "consistent shapes with --input-shape NAME=1x49x10x1"
        ) from exc


def _value_shapes(graph: onnx.GraphProto) -> tuple[dict[str, Shape | None], dict[str, int]]:
    """Shapes (``None`` dims where unknown) and element types of every typed value."""
    shapes: dict[str, Shape | None] = {}
    types: dict[str, int] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor_type = value.type.tensor_type
        if tensor_type.elem_type:
            types[value.name] = tensor_type.elem_type
        if tensor_type.HasField("shape"):
            shapes[value.name] = tuple(
                d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim
            )
    return shapes, types


def make_context(model: onnx.ModelProto, inferred: onnx.ModelProto, path: Path) -> ImportContext:
    """Constants (every initializer, converted once) and inferred shapes/types."""
    shapes, types = _value_shapes(inferred.graph)
    protos = {init.name: init for init in model.graph.initializer}
    try:
        consts = {name: numpy_helper.to_array(init) for name, init in protos.items()}
    except Exception as exc:  # data size not matching dims, unknown data type...
        raise InputFileError(
            f"{path}: an initializer cannot be read ({_first_line(exc)}); export the model again"
        ) from exc
    return ImportContext(
        path=str(path),
        opset=model_opset(model, path),
        consts=consts,
        shapes=shapes,
        elem_types=types,
        initializer_protos=protos,
    )


def _renamed(node: OnnxNode, rename: Mapping[str, str]) -> OnnxNode:
    """``node`` with tensor names replaced through ``rename``."""
    return replace(
        node,
        inputs=tuple(rename.get(i, i) for i in node.inputs),
        outputs=tuple(rename.get(o, o) for o in node.outputs),
    )


def convert_nodes(nodes: Sequence[OnnxNode], ctx: ImportContext) -> list[Op]:
    """Convert every node; collect every failure and raise one UnsupportedOpError."""
    ops: list[Op] = []
    problems: list[str] = []
    for node in nodes:
        try:
            ops.extend(CONVERTERS[node.op_type](node, ctx))
        except Unsupported as why:
            problems.append(f"{node.label}: {why}")
        except SplitterError:  # ShapeError etc. are ValueErrors too: report them as they are
            raise
        except (ValueError, IndexError, KeyError, TypeError) as exc:  # malformed attrs/weights
            problems.append(f"{node.label}: malformed node ({type(exc).__name__}: {exc})")
    if problems:
        raise UnsupportedOpError(
            f"{ctx.path}: {len(problems)} op(s) cannot be mapped: {'; '.join(problems)}; "
            "rewrite these nodes (see the supported forms in splitter.importers.onnx_ops)"
        )
    return ops


def _graph_io(model: onnx.ModelProto) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Names of the graph's activation inputs (initializers excluded) and outputs."""
    inits = {i.name for i in model.graph.initializer}
    inputs = tuple(i.name for i in model.graph.input if i.name not in inits)
    return inputs, tuple(o.name for o in model.graph.output)


def fold_all(
    model: onnx.ModelProto,
    nodes: list[OnnxNode],
    protos: Mapping[str, onnx.NodeProto],
    ctx: ImportContext,
    path: Path,
) -> list[OnnxNode]:
    """Fold constants; while that leaves activation shapes unknown, infer again and refold.

    Shape inference cannot see through every constant subgraph (data propagation covers only
    some ops), so after each folding round the folded values are given to inference as
    initializers, which may resolve further shapes (and so further ``Shape`` nodes).
    """
    remaining = nodes
    for _ in range(8):
        remaining, folded = fold_constants(remaining, protos, ctx)
        unknown = [o for n in remaining for o in n.outputs if o and not ctx.is_static(o)]
        if not folded or not unknown:
            break
        reinfer(model, remaining, protos, ctx, path)
    return remaining


def reinfer(
    model: onnx.ModelProto,
    nodes: Sequence[OnnxNode],
    protos: Mapping[str, onnx.NodeProto],
    ctx: ImportContext,
    path: Path,
) -> None:
    """Run shape inference on the unfolded ``nodes`` with every folded value as an initializer."""
    produced = {o for n in nodes for o in n.outputs}
    needed = sorted({i for n in nodes for i in n.inputs if i in ctx.consts and i not in produced})
    inits = [
        ctx.initializer_protos.get(name) or numpy_helper.from_array(ctx.consts[name], name)
        for name in needed
    ]
    inputs, _ = _graph_io(model)
    graph = onnx.helper.make_graph(
        [protos[n.name] for n in nodes],
        model.graph.name,
        [i for i in model.graph.input if i.name in inputs],
        list(model.graph.output),
        inits,
    )
    partial = onnx.helper.make_model(graph, opset_imports=list(model.opset_import))
    partial.ir_version = model.ir_version
    shapes, types = _value_shapes(infer(partial, path).graph)
    ctx.shapes.update(shapes)
    ctx.elem_types.update(types)


def build_ops(
    model: onnx.ModelProto, nodes: list[OnnxNode], ctx: ImportContext, path: Path
) -> tuple[list[Op], list[onnx.NodeProto]]:
    """Fold constants, drop no-ops, convert and fuse: the canonical op list, and the protos of
    the nodes that did not fold (in file order, no-ops included)."""
    protos = dict(zip((n.name for n in nodes), model.graph.node, strict=True))
    inputs, outputs = _graph_io(model)
    remaining = fold_all(model, nodes, protos, ctx, path)
    kept = [protos[n.name] for n in remaining]
    constant_outputs = [o for o in outputs if o in ctx.consts]
    if constant_outputs:
        raise InputFileError(
            f"{path}: graph output(s) {constant_outputs} are constants, not computed from the "
            "inputs; remove them from the model's outputs"
        )
    remaining, rename, copies = remove_no_ops(remaining, inputs, outputs)
    remaining = [_renamed(n, rename) for n in remaining]
    ctx.consumed = {i for n in remaining for i in n.inputs} | set(outputs)
    ops = convert_nodes(remaining, ctx)
    for node, src, dst in copies:
        source = rename.get(src, src)
        ops.append(
            Op(node.name, "reshape", (source,), (dst,), {"shape": ctx.shape(dst)}, {}, (node.name,))
        )
    return fuse(ops, outputs, ctx.shape), kept


def tensor_specs(
    ops: Sequence[Op], inputs: Sequence[str], ctx: ImportContext
) -> dict[str, TensorSpec]:
    """A :class:`TensorSpec` for every graph input and op output (ShapeError when dynamic)."""
    names = list(inputs) + [o for op in ops for o in op.outputs]
    specs = {name: TensorSpec(name, ctx.shape(name), ctx.dtype(name)) for name in names}
    missing = sorted({i for op in ops for i in op.inputs if i not in specs})
    if missing:
        raise ShapeError(
            f"{ctx.path}: tensor(s) {missing} are read but never produced; export the model again"
        )
    return specs


def _metadata(model: onnx.ModelProto, opset: int, file_opset: int) -> dict[str, str]:
    """The model's ``metadata_props`` plus ``producer`` and ``opset`` (and
    ``upgraded_from_opset`` when the file's opset was upgraded on load)."""
    meta = {p.key: p.value for p in model.metadata_props}
    meta["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    meta["opset"] = str(opset)
    if file_opset != opset:
        meta["upgraded_from_opset"] = str(file_opset)
    return meta


def load_onnx(path: Path, *, input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> Graph:
    """Import the ONNX model at ``path`` as a canonical NCHW :class:`Graph`.

    ``input_shapes`` maps graph-input names to full static shapes (batch included) and replaces
    the declared shapes. Opsets 7..10 are upgraded to 17 first. Raises InputFileError
    (unreadable file, opset out of 7..21 or not convertible, empty graph), UnsupportedOpError
    (listing every unsupported node) or ShapeError (dynamic shapes).
    """
    return _import(Path(path), input_shapes)[1]


def import_onnx(
    path: Path, *, input_shapes: Mapping[str, tuple[int, ...]] | None = None
) -> tuple[onnx.ModelProto, Graph]:
    """:func:`load_onnx` plus the normalised model it imported.

    The model is the file's (external data loaded) with ``input_shapes`` written into its graph
    inputs, every node the importer folded replaced by an initializer of its value
    (:func:`~splitter.importers.onnx_fold.folded_model`; tensor names kept) and shapes inferred
    again (``value_info`` filled), so later stages (slicing, validation, code generation) see
    the model the graph was imported from.
    """
    inferred, graph, kept, ctx = _import(Path(path), input_shapes)
    folded = folded_model(inferred, kept, ctx.consts, ctx.elem_types)
    return infer(folded, Path(path)), graph


def _import(
    path: Path, input_shapes: Mapping[str, tuple[int, ...]] | None
) -> tuple[onnx.ModelProto, Graph, list[onnx.NodeProto], ImportContext]:
    """The inferred model, its graph, the protos of the unfolded nodes and the import context
    (constants, inferred types)."""
    model, data = read_model(path)
    file_opset = model_opset(model, path)
    nodes = read_nodes(model.graph)
    check_nonempty(model, path)
    check_attribute_domains(model, path)
    qdq = is_qdq(nodes)  # QDQ models: onnx_qdq lists what it cannot lower
    old = file_opset < MIN_OPSET
    inits = {i.name for i in model.graph.initializer}
    if not qdq:
        check_supported(nodes, inits, path, UPGRADED_NAMES if old else {})
    if old:
        model, data = upgrade_opset(model, file_opset, path), None
        nodes = read_nodes(model.graph)
        if not qdq:
            check_supported(nodes, {i.name for i in model.graph.initializer}, path)
    changed = apply_input_shapes(model, input_shapes or {}, path)
    blob = data if data is not None and not changed else model.SerializeToString()
    check_model(blob, path)
    inferred = infer(blob, path)
    ctx = make_context(model, inferred, path)
    inputs, outputs = _graph_io(model)
    if qdq:  # int8 ops on the int8 kernels; nothing folded, so sub-models keep the QDQ form
        ctx.consumed = {i for n in nodes for i in n.inputs} | set(outputs)
        ops, tensors = lower_qdq(nodes, ctx, inputs, outputs, path)
        kept = list(model.graph.node)
    else:
        ops, kept = build_ops(model, nodes, ctx, path)
        tensors = tensor_specs(ops, inputs, ctx)
    produced = set(tensors)
    lost = [o for o in outputs if o not in produced]
    if lost:
        raise InputFileError(f"{path}: graph output(s) {lost} are not computed by any node")
    graph = Graph(
        name=graph_name(model.graph.name, path),
        ops=tuple(ops),
        tensors=tensors,
        inputs=inputs,
        outputs=outputs,
        layout="NCHW",
        source_format="onnx",
        source_path=str(path),
        metadata=_metadata(model, ctx.opset, file_opset),
    )
    return inferred, graph, kept, ctx
