"""The loaded TFLite model carries the user's ``--input-shape``: the flatbuffer is rewritten
(with the slicer's writer) when the override changes a stored shape, kept byte for byte when it
does not, and sub-models of the rewritten model validate against the file."""

from __future__ import annotations

from pathlib import Path

from test_tflite_support import MODELS

from splitter.importers import load_chain, load_model
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.tflite_slice import slice_tflite
from splitter.slicing.validate import TfliteRunner, require_pass, validate_models

SINE = MODELS / "sine_float.tflite"  # input shape [1, 1], shape_signature [-1, 1]


def _input_name(path: Path) -> str:
    return load_model(path).graph.inputs[0]


def test_override_equal_to_stored_shape_keeps_the_bytes() -> None:
    loaded = load_model(SINE, input_shapes={_input_name(SINE): (1, 1)})
    assert loaded.data == SINE.read_bytes()


def test_batch_override_is_written_into_the_flatbuffer() -> None:
    name = _input_name(SINE)
    loaded = load_model(SINE, input_shapes={name: (4, 1)})
    assert loaded.data != SINE.read_bytes()
    runner = TfliteRunner(loaded.data)  # LiteRT allocates the stored shapes, no resize
    assert [t.shape for t in runner.inputs] == [(4, 1)]
    assert [t.shape for t in runner.outputs] == [(4, 1)]
    details = runner.interpreter.get_tensor_details()
    stored = {str(d["name"]): tuple(int(x) for x in d["shape"]) for d in details}
    for spec in loaded.graph.tensors.values():  # every computed tensor as the graph has it
        if spec.name in stored:
            assert stored[spec.name] == spec.shape, spec.name
    signature = runner.interpreter.get_input_details()[0]["shape_signature"]
    assert signature.tolist() == [-1, 1]  # the file still says which dim may vary


def test_submodels_of_an_overridden_model_validate_against_the_file() -> None:
    shapes = {_input_name(SINE): (4, 1)}
    loaded = load_model(SINE, input_shapes=shapes)
    chain = load_chain(SINE, input_shapes=shapes)
    ranges = [(0, 0, 1), (1, 2, len(chain) - 1)]
    subs = slice_tflite(loaded, cuts_from_ranges(chain, ranges, ["a", "b"]))
    assert [t.shape for t in subs[1].inputs] == [t.shape for t in subs[0].outputs]
    assert subs[0].outputs[0].shape[0] == 4  # the cut tensor has the batch of the override
    report = validate_models(loaded, [(s.file_name, s.data) for s in subs])
    require_pass(report, SINE)
    assert report.normalisation and all(s.max_abs == 0.0 for s in report.normalisation)
