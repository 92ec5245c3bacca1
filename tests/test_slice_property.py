"""Property: any plan's cuts of a real model slice into sub-models that chain back exactly."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitter.compile import slice_model
from splitter.importers import load_chain, load_model
from splitter.partition.problem import runs
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.validate import require_pass, validate_models

MODELS = Path(__file__).resolve().parent.parent / "models"
CHAINS = {name: load_chain(MODELS / name) for name in ("tiny_cnn.onnx", "tiny_cnn_int8.tflite")}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(CHAINS)))
def test_any_assignment_slices_into_an_exact_chain(data: st.DataObject, name: str) -> None:
    chain = CHAINS[name]
    assignment = data.draw(st.lists(st.integers(0, 2), min_size=len(chain), max_size=len(chain)))
    ranges = runs(assignment)
    cuts = cuts_from_ranges(chain, ranges, ["a", "b", "c"])
    subs = slice_model(load_model(MODELS / name), cuts)
    assert [(s.cut.first, s.cut.last) for s in subs] == [(f, last) for _, f, last in ranges]
    for prev, nxt in itertools.pairwise(subs):
        assert [t.name for t in prev.outputs] == [t.name for t in nxt.inputs]
    report = validate_models(
        load_model(MODELS / name),
        [(s.file_name, s.data) for s in subs],
        count=2,
    )
    require_pass(report, name)
    assert all(s.exact for s in report.outputs + report.boundaries)
