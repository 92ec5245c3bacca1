"""Every reference model in ``models/*.onnx`` imports, with every tensor shape equal to what
onnxruntime actually produces. Covers however many models the directory holds (zero included)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from splitter.importers.onnx_import import load_onnx
from splitter.ops import OP_KINDS

MODELS = sorted((Path(__file__).resolve().parent.parent / "models").glob("*.onnx"))


def _ort_values(path: Path, names: list[str], feeds: dict[str, np.ndarray]) -> dict[str, object]:
    """Run the original model in onnxruntime with ``names`` exposed as outputs."""
    model = onnx.load(str(path))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [o.name for o in model.graph.output]
    return dict(zip(wanted, session.run(wanted, feeds), strict=True))


if MODELS:  # no models: nothing collected (not a skip)

    @pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
    def test_reference_model_imports_with_onnxruntime_shapes(path: Path) -> None:
        graph = load_onnx(path)
        node_names = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
        covered = Counter(s for op in graph.ops for s in op.source_nodes)
        assert graph.ops and all(op.kind in OP_KINDS for op in graph.ops)
        assert not [s for s, k in covered.items() if k > 1]
        if all(node_names):  # named nodes: source_nodes must be their names
            assert set(covered) <= node_names
        rng = np.random.default_rng(0)
        feeds = {
            n: rng.standard_normal(graph.tensors[n].shape).astype(graph.tensors[n].dtype)
            for n in graph.inputs
        }
        names = [n for n in graph.tensors if n not in graph.inputs]
        values = _ort_values(path, names, feeds)
        for name in names:
            want = np.asarray(values[name]).shape
            if graph.tensors[name].dtype == "int8" and len(want) == 4:
                want = tuple(want[p] for p in (0, 2, 3, 1))  # QDQ int8 is held NHWC (onnx_qdq)
            assert graph.tensors[name].shape == want, name
            assert graph.tensors[name].dtype == np.asarray(values[name]).dtype.name, name
