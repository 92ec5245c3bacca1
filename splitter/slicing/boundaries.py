"""Where a plan cuts the original model: one :class:`Cut` per sub-model.

A sub-model ``first..last`` (chain layer indices, inclusive) reads the tensor that crosses into
its first layer and writes the tensor its last layer produces. In the chain's terms
(:mod:`splitter.ir`): the input is ``layers[first].input`` (for ``first == 0`` the graph input,
which is ``layers[0].output``) and the output is ``layers[last].output``. Both are original
tensor names, so the slicers can cut the original file without knowing the chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from splitter.ir import Chain, TensorSpec
from splitter.manifest import PlanManifest, safe_name, submodel_boundaries, submodel_io

__all__ = [
    "Cut",
    "SlicedModel",
    "cuts_from_manifest",
    "cuts_from_ranges",
    "safe_name",
    "submodel_io",
]


@dataclass(frozen=True)
class Cut:
    """One sub-model of a plan, in the terms a slicer needs.

    ``inputs``/``outputs`` are the tensors crossing its boundaries (original model names);
    ``file_stem`` is ``NN_<device>`` with ``NN`` the two-digit sub-model index.
    """

    index: int
    device: str
    device_index: int
    first: int
    last: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def input_names(self) -> list[str]:
        """Names of the tensors entering the sub-model."""
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        """Names of the tensors leaving the sub-model."""
        return [t.name for t in self.outputs]

    @property
    def file_stem(self) -> str:
        """``NN_<device>``: the sub-model index (two digits) and a file-safe device name."""
        return f"{self.index:02d}_{safe_name(self.device)}"

    def metadata(self) -> dict[str, str]:
        """Plan facts stored in the sub-model file's metadata (``splitter.*`` keys)."""
        return {
            "splitter.submodel_index": str(self.index),
            "splitter.device": self.device,
            "splitter.device_index": str(self.device_index),
            "splitter.first_layer": str(self.first),
            "splitter.last_layer": str(self.last),
            "splitter.inputs": ",".join(self.input_names),
            "splitter.outputs": ",".join(self.output_names),
        }


def cuts_from_manifest(manifest: PlanManifest) -> list[Cut]:
    """One :class:`Cut` per sub-model of the plan manifest (its boundary tensors included)."""
    return [
        Cut(s.index, s.device, s.device_index, s.first, s.last, s.inputs, s.outputs)
        for s in manifest.submodels
    ]


def cuts_from_ranges(
    chain: Chain, ranges: Sequence[tuple[int, int, int]], device_names: Sequence[str]
) -> list[Cut]:
    """Cuts for ``(device_index, first, last)`` runs covering the chain in order."""
    cuts = []
    for index, (device_index, first, last) in enumerate(ranges):
        entering, leaving = submodel_boundaries(chain, first, last)
        cuts.append(
            Cut(
                index=index,
                device=device_names[device_index],
                device_index=device_index,
                first=first,
                last=last,
                inputs=entering,
                outputs=leaving,
            )
        )
    return cuts


@dataclass(frozen=True, eq=False)
class SlicedModel:
    """One sub-model file's content, before it is written: the serialised model and its I/O.

    ``inputs``/``outputs`` are read back from the sub-model itself (name, shape, dtype, quant),
    so a report or ``plan.json`` states what the file really exposes.
    """

    cut: Cut
    data: bytes
    suffix: str  # ".onnx" or ".tflite"
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: ops of the original model kept in this sub-model (node names / operator indices)
    op_count: int = 0

    @property
    def file_name(self) -> str:
        """``NN_<device>.onnx`` or ``NN_<device>.tflite``."""
        return self.cut.file_stem + self.suffix
