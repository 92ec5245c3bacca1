"""Old default-domain opsets (7..10) upgraded on load with ``onnx.version_converter``.

The classic model-zoo graphs (AlexNet, SqueezeNet, ResNet-50... as shipped in the onnx wheel's
``backend/test/data/light``) are opset 9. :func:`upgrade_opset` converts such a model to
:data:`TARGET_OPSET` before anything else reads it; the upgraded graph is what the importer
converts, slicing cuts and validation runs, and validation also runs the *file* (the old opset)
with onnxruntime against it (``splitter.slicing.validate.normalisation_stats``), so the
conversion itself is checked on every compile.

When the converter fails, the message names the first node whose own conversion fails (found
by converting each node alone, :func:`_failing_node`), so the user sees the op and the opsets.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper, version_converter

from splitter.errors import InputFileError, escaped

#: Oldest default-domain opset upgraded on load (opset 7 is the first with today's broadcasting).
MIN_UPGRADE_OPSET = 7
#: Opset old models are upgraded to.
TARGET_OPSET = 17


def _first_line(exc: BaseException) -> str:
    """First non-empty line of an exception's text, without the C++ ``file:line: func:`` prefix."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    if "Assertion" in text and "failed:" in text:
        text = text.split("failed:", 1)[1].strip()
    return text


def upgrade_opset(model: onnx.ModelProto, opset: int, path: Path) -> onnx.ModelProto:
    """``model`` (default-domain ``opset``, 7..10) converted to :data:`TARGET_OPSET`.

    InputFileError (one line: the node, its op, both opsets and the converter's reason) when
    ``onnx.version_converter`` cannot convert it.
    """
    try:
        upgraded = version_converter.convert_version(model, TARGET_OPSET)
    except Exception as exc:  # RuntimeError from the C++ adapters, InferenceError, ...
        label, reason = _failing_node(model, opset) or ("the graph", _first_line(exc))
        raise InputFileError(
            f"{path}: onnx.version_converter cannot upgrade {label} from opset {opset} to "
            f"{TARGET_OPSET} ({escaped(reason)}); export the model at opset 11..21"
        ) from exc
    upgraded.ir_version = max(upgraded.ir_version, model.ir_version)
    return upgraded


def _failing_node(model: onnx.ModelProto, opset: int) -> tuple[str, str] | None:
    """``("OpType (node name)", reason)`` of the first node that does not convert on its own."""
    for k, node in enumerate(model.graph.node):
        single = _single_node_model(model, node, opset)
        try:
            version_converter.convert_version(single, TARGET_OPSET)
        except Exception as exc:
            name = node.name or f"node {k}"
            return f"{escaped(node.op_type)} ({escaped(name)})", _first_line(exc)
    return None


def _single_node_model(model: onnx.ModelProto, node: onnx.NodeProto, opset: int) -> onnx.ModelProto:
    """A model holding ``node`` alone: its inputs as graph inputs typed as in ``model`` (float
    tensors when unknown), its outputs untyped, the model's initializers it reads kept."""
    known = {v.name: v for v in (*model.graph.input, *model.graph.value_info)}
    inits = [i for i in model.graph.initializer if i.name in node.input]
    init_names = {i.name for i in inits}
    inputs = [
        known.get(name) or helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        for name in node.input
        if name and name not in init_names
    ]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "single", inputs, outputs, inits)
    single = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    single.ir_version = model.ir_version
    return single
