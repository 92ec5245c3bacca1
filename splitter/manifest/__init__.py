"""The plan manifest: the one record every stage after planning reads (``plan.json``).

* :mod:`splitter.manifest.records`: the frozen dataclasses (:class:`PlanManifest` and its
  entries), the constants and the naming helpers;
* :mod:`splitter.manifest.codec`: their JSON form, derived from the dataclass fields, and
  :func:`read_manifest`;
* :mod:`splitter.manifest.checks`: the plan's invariants and ``wiring.json``'s schema
  (:func:`read_wiring`).

Every public name is re-exported here: ``from splitter.manifest import PlanManifest``.
"""

from __future__ import annotations

from splitter.manifest.checks import read_wiring
from splitter.manifest.codec import read_manifest, tensor_dict
from splitter.manifest.records import (
    HOST,
    MANIFEST_FILE,
    SCHEMA,
    WIRING_FILE,
    DeviceEnergy,
    DeviceEntry,
    Energy,
    Headline,
    HostIO,
    LayerSplitEntry,
    LinkBaud,
    ManifestError,
    ModelInfo,
    PlanManifest,
    SegmentEntry,
    Segments,
    SubModelEntry,
    Transfer,
    file_suffix,
    finite_or_none,
    input_shapes_tuple,
    model_format,
    safe_name,
    submodel_boundaries,
    submodel_file,
    submodel_io,
    tensor_bytes,
)

__all__ = [
    "HOST",
    "MANIFEST_FILE",
    "SCHEMA",
    "WIRING_FILE",
    "DeviceEnergy",
    "DeviceEntry",
    "Energy",
    "Headline",
    "HostIO",
    "LayerSplitEntry",
    "LinkBaud",
    "ManifestError",
    "ModelInfo",
    "PlanManifest",
    "SegmentEntry",
    "Segments",
    "SubModelEntry",
    "Transfer",
    "file_suffix",
    "finite_or_none",
    "input_shapes_tuple",
    "model_format",
    "read_manifest",
    "read_wiring",
    "safe_name",
    "submodel_boundaries",
    "submodel_file",
    "submodel_io",
    "tensor_bytes",
    "tensor_dict",
]
