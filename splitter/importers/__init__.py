"""Importers: ONNX, TFLite and layer profiles (CSV/JSON) to a :class:`~splitter.ir.Chain`.

:func:`load_chain` is the one entry point the CLI and the rest of the library use. The input
format is chosen from the file suffix; ``FILE.json#name`` selects one profile of a multi-profile
JSON such as the thesis's ``thesis_profiles.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from splitter.errors import InputFileError
from splitter.ir import Chain, Graph

MODEL_SUFFIXES = (".onnx", ".tflite")
PROFILE_SUFFIXES = (".csv", ".json")


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
    raise InputFileError(
        f"{p}: unknown model format '{suffix}'; give an .onnx or .tflite model "
        "(or a .csv/.json layer profile)"
    )


def load_chain(
    path: str | Path,
    *,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    activation_bytes: int | None = None,
) -> Chain:
    """Import a model or a layer profile as a costed :class:`Chain` (layer 0 = input layer).

    ``activation_bytes`` overrides the bytes per activation element (e.g. 1 for 8-bit
    activations) in RAM_j and OUT_j; weights keep their own dtype.
    """
    text = str(path)
    base = Path(text.split("#", 1)[0])
    if base.suffix.lower() in PROFILE_SUFFIXES:
        from splitter.importers.profile import load_profile

        return load_profile(text, activation_bytes=activation_bytes)
    from splitter.graph.chain import build_chain

    graph = load_graph(base, input_shapes=input_shapes)
    return build_chain(graph, activation_bytes=activation_bytes)
