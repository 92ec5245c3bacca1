"""Importers: ONNX, TFLite and layer profiles (CSV/JSON) to a :class:`~splitter.ir.Chain`.

:func:`load_model` reads a model file once: it returns a :class:`LoadedModel`, the normalised
model (the user's ``--input-shape`` overrides applied, shapes inferred, constants folded) with its
:class:`~splitter.ir.Graph`. Slicing, validation, code generation and build take that object,
never the path, so no later stage re-reads the file without the user's options.
:func:`load_chain` is the entry point for a costed chain (models and layer profiles). The input
format is chosen from the file suffix; ``FILE.json#name`` selects one profile of a multi-profile
JSON such as the thesis's ``thesis_profiles.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitter.errors import InputFileError
from splitter.ir import Chain, Graph

MODEL_SUFFIXES = (".onnx", ".tflite")
PROFILE_SUFFIXES = (".csv", ".json")


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model file read once: its normalised serialised form and its canonical graph.

    ``data`` is the ONNX ``ModelProto`` after the user's input-shape overrides, with the nodes
    the importer folded replaced by initializers and shapes inferred (serialised), or the TFLite
    flatbuffer with the overridden and propagated shapes written into its tensors (the file's
    bytes when they already match). Tensor names are the file's, so the graph's names hold in
    it. ``graph`` is what the importer made of it (no-ops removed, activations fused).
    """

    path: Path
    format: str  # "onnx" | "tflite"
    data: bytes
    graph: Graph
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def suffix(self) -> str:
        """``.onnx`` or ``.tflite``: the suffix of the model's (and its sub-models') files."""
        return f".{self.format}"

    def onnx_model(self) -> Any:
        """The normalised ONNX ``ModelProto`` (parsed from :attr:`data`)."""
        import onnx

        return onnx.load_model_from_string(self.data)


def load_model(
    path: str | Path, *, input_shapes: Mapping[str, tuple[int, ...]] | None = None
) -> LoadedModel:
    """Read an ONNX or TFLite model once (see :class:`LoadedModel`)."""
    p = Path(path)
    suffix = p.suffix.lower()
    shapes = dict(input_shapes or {})
    if suffix == ".onnx":
        from splitter.importers.onnx_import import import_onnx

        proto, graph = import_onnx(p, input_shapes=shapes)
        return LoadedModel(p, "onnx", proto.SerializeToString(), graph, shapes)
    if suffix == ".tflite":
        from splitter.importers.tflite_import import import_tflite

        data, graph = import_tflite(p, input_shapes=shapes)
        return LoadedModel(p, "tflite", data, graph, shapes)
    raise _unknown_format(p)


def load_graph(
    path: str | Path, *, input_shapes: Mapping[str, tuple[int, ...]] | None = None
) -> Graph:
    """Import an ONNX or TFLite model as a canonical :class:`Graph`."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".onnx":
        from splitter.importers.onnx_import import load_onnx

        return load_onnx(p, input_shapes=input_shapes)
    if suffix == ".tflite":
        from splitter.importers.tflite_import import load_tflite

        return load_tflite(p, input_shapes=input_shapes)
    raise _unknown_format(p)


def _unknown_format(p: Path) -> InputFileError:
    return InputFileError(
        f"{p}: unknown model format '{p.suffix.lower()}'; give an .onnx or .tflite model "
        "(or a .csv/.json layer profile)"
    )


def load_chain(
    path: str | Path,
    *,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    activation_bytes: int | None = None,
    granularity: str = "supernode",
) -> Chain:
    """Import a model or a layer profile as a costed :class:`Chain` (layer 0 = input layer).

    ``activation_bytes`` overrides the bytes per activation element (e.g. 1 for 8-bit
    activations) in RAM_j and OUT_j; weights keep their own dtype. ``granularity`` is
    ``"supernode"`` or ``"op"`` (:func:`splitter.graph.chain.build_chain`); a layer profile is
    already a chain and ignores it.
    """
    text = str(path)
    base = Path(text.split("#", 1)[0])
    if base.suffix.lower() in PROFILE_SUFFIXES:
        from splitter.importers.profile import load_profile

        return load_profile(text, activation_bytes=activation_bytes)
    from splitter.graph.chain import build_chain

    graph = load_graph(base, input_shapes=input_shapes)
    return build_chain(graph, activation_bytes=activation_bytes, granularity=granularity)
