"""Slicing: cut the loaded model where the plan says, and prove the cut right.

Every function takes the :class:`~splitter.importers.LoadedModel` the importer returned (the
user's input shapes applied, ONNX constants folded into initializers), never a path.

* :mod:`splitter.slicing.boundaries`: :class:`~splitter.slicing.boundaries.Cut` (a plan's
  sub-model in tensor-name terms) and :class:`~splitter.slicing.boundaries.SlicedModel` (a
  sub-model file's bytes and its I/O), built by ``cuts_from_manifest(manifest)``;
* :mod:`splitter.slicing.onnx_slice`: ``slice_onnx(model, cuts)`` (onnx.utils.Extractor plus
  repairs, ``check_model(full_check=True)``);
* :mod:`splitter.slicing.tflite_slice`: ``slice_tflite(model, cuts)`` (flatbuffers object API);
* :mod:`splitter.slicing.validate`: ``validate_models(original, submodels)`` runs
  the normalised original and the chain (onnxruntime / LiteRT), and once the normalised model
  against the file it came from (so the importer's folding and shape overrides are checked too);
  ``require_pass`` raises :class:`~splitter.errors.ValidationError` on any difference beyond the
  tolerance.

Slicers return bytes; writing files is :mod:`splitter.outputs`' job (atomic output directory).
"""
