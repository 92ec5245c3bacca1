"""Cut an ONNX model into sub-models at the plan's boundary tensors.

Node selection is :class:`onnx.utils.Extractor` (walk back from the outputs, stop at the
inputs). Its pitfalls are handled here:

* it needs a ``ValueInfoProto`` for every cut tensor, so the model is shape-inferred first and a
  tensor still lacking a static shape is a :class:`~splitter.errors.ShapeError`;
* it copies value_info for the sub-model's own inputs/outputs too (duplicates are dropped);
* it forgets that IR < 4 lists initializers among the graph inputs (they are added back);
* a sub-model with no node (the input layer alone) has the same tensor as input and output;
  Extractor would emit it with a duplicate value_info, here it is a clean node-less graph;
* it never checks that the cut is closed: a node reading a tensor that is neither produced inside,
  an initializer nor a cut input means the plan's boundary does not separate the graph, which is
  reported instead of writing a model onnxruntime rejects.

Each sub-model keeps the original IR version, opset imports, local functions, producer fields and
``metadata_props`` (plus the plan's ``splitter.*`` keys), and passes
``onnx.checker.check_model(full_check=True)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnx.checker
import onnx.helper
import onnx.shape_inference
import onnx.utils

from splitter.errors import ShapeError, ValidationError
from splitter.importers import LoadedModel
from splitter.ir import TensorSpec
from splitter.slicing.boundaries import Cut, SlicedModel

#: IR version from which initializers need not be listed as graph inputs (onnx IR.md).
_IR_INITIALIZERS_NOT_INPUTS = 4


def slice_onnx(model: LoadedModel, cuts: Sequence[Cut]) -> list[SlicedModel]:
    """Serialised sub-models of ``model``, one per cut, each checked with ``full_check``.

    ``model`` is the normalised model of :func:`splitter.importers.load_model`, so the user's
    input-shape overrides hold in every sub-model and constant subgraphs the importer folded
    are initializers there, not nodes.
    """
    proto = model.onnx_model()
    inferred = _infer(proto)
    extractor = onnx.utils.Extractor(inferred)
    return [_slice_one(proto, extractor, cut) for cut in cuts]


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with shapes inferred (``data_prop`` so Reshape targets propagate)."""
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError or plain RuntimeError
        raise ShapeError(
            f"{model.graph.name}: ONNX shape inference failed ({exc}); "
            "fix the model or give static shapes with --input-shape"
        ) from exc


def _slice_one(original: onnx.ModelProto, ex: onnx.utils.Extractor, cut: Cut) -> SlicedModel:
    """Extract, repair and check one sub-model."""
    ins, outs = cut.input_names, cut.output_names
    _require_value_info(ex, ins + outs, cut)
    if set(outs) <= set(ins):
        sub = _identity_model(ex, cut)
    else:
        sub = ex.extract_model(ins, outs)
        _check_closed(sub, cut)
        _drop_io_value_info(sub)
        if original.ir_version < _IR_INITIALIZERS_NOT_INPUTS:
            _initializers_as_inputs(sub)
    _copy_model_fields(original, sub, cut)
    try:
        onnx.checker.check_model(sub, full_check=True)
    except Exception as exc:
        raise ValidationError(
            f"sub-model {cut.file_stem}: onnx checker rejects it ({_first_line(exc)}); "
            f"the cut at layers {cut.first}..{cut.last} is not a valid boundary"
        ) from exc
    return SlicedModel(
        cut=cut,
        data=sub.SerializeToString(),
        suffix=".onnx",
        inputs=tuple(_spec(v) for v in sub.graph.input if v.name not in _init_names(sub)),
        outputs=tuple(_spec(v) for v in sub.graph.output),
        op_count=len(sub.graph.node),
    )


def _require_value_info(ex: onnx.utils.Extractor, names: list[str], cut: Cut) -> None:
    """Every cut tensor must exist with a static shape after inference."""
    for name in names:
        info = ex.value_infos.get(name)
        if info is None and name not in ex.outmap:
            raise ShapeError(
                f"sub-model {cut.file_stem}: tensor '{name}' is not in {ex.graph.name or 'the'} "
                "model; the chain and the model file disagree (re-import the model)"
            )
        if info is None:
            raise ShapeError(
                f"sub-model {cut.file_stem}: tensor '{name}' has no shape after ONNX shape "
                "inference; give static shapes with --input-shape"
            )
        if any(not d.HasField("dim_value") for d in info.type.tensor_type.shape.dim):
            raise ShapeError(
                f"sub-model {cut.file_stem}: tensor '{name}' has a dynamic shape; "
                "give static shapes with --input-shape"
            )


def _check_closed(sub: onnx.ModelProto, cut: Cut) -> None:
    """Raise if a node reads a tensor the sub-model neither produces, holds nor receives."""
    known = {v.name for v in sub.graph.input} | _init_names(sub) | {""}
    for node in sub.graph.node:
        missing = [name for name in node.input if name not in known]
        if missing:
            raise ValidationError(
                f"sub-model {cut.file_stem}: node '{node.name or node.op_type}' reads "
                f"'{missing[0]}' from outside layers {cut.first}..{cut.last}; the boundary "
                f"{cut.input_names} does not separate the graph"
            )
        known.update(node.output)


def _drop_io_value_info(sub: onnx.ModelProto) -> None:
    """Remove value_info entries that duplicate a graph input or output."""
    io = {v.name for v in sub.graph.input} | {v.name for v in sub.graph.output}
    keep = [v for v in sub.graph.value_info if v.name not in io]
    del sub.graph.value_info[:]
    sub.graph.value_info.extend(keep)


def _initializers_as_inputs(sub: onnx.ModelProto) -> None:
    """IR < 4: list every initializer among the graph inputs, as that IR requires."""
    listed = {v.name for v in sub.graph.input}
    for init in sub.graph.initializer:
        if init.name not in listed:
            sub.graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )


def _identity_model(ex: onnx.utils.Extractor, cut: Cut) -> onnx.ModelProto:
    """A node-less model whose outputs are its inputs (a sub-model holding only the input layer;
    a model with several inputs passes every one on).

    Each tensor keeps its name on both sides so the boundary names of the plan stay the same;
    the checker and onnxruntime accept a graph output that is a graph input.
    """
    ins = [ex.value_infos[name] for name in cut.input_names]
    outs = [ex.value_infos[name] for name in cut.output_names]
    graph = onnx.helper.make_graph([], "passthrough", ins, outs)
    return onnx.helper.make_model(graph, opset_imports=list(ex.model.opset_import))


def _copy_model_fields(original: onnx.ModelProto, sub: onnx.ModelProto, cut: Cut) -> None:
    """Original IR, opsets, producer and metadata; the plan's facts as ``splitter.*`` props."""
    sub.ir_version = original.ir_version
    del sub.opset_import[:]
    sub.opset_import.extend(original.opset_import)
    sub.producer_name = original.producer_name or "splitter"
    sub.producer_version = original.producer_version
    sub.domain = original.domain
    sub.model_version = original.model_version
    sub.doc_string = original.doc_string
    sub.graph.name = f"{original.graph.name or 'model'}_{cut.file_stem}"
    props = {p.key: p.value for p in original.metadata_props}
    props.update(cut.metadata())
    onnx.helper.set_model_props(sub, props)


def _init_names(model: onnx.ModelProto) -> set[str]:
    return {t.name for t in model.graph.initializer}


def _spec(info: onnx.ValueInfoProto) -> TensorSpec:
    """A :class:`TensorSpec` from a (static) ONNX value info."""
    tensor_type = info.type.tensor_type
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).name
    shape = tuple(
        int(d.dim_value) if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim
    )
    return TensorSpec(name=info.name, shape=shape, dtype=dtype)


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
