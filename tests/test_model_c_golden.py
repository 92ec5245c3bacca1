"""Golden kernel calls of ``model.c`` for four models (float NCHW, float NHWC, int8).

The weights arrays are reduced to their declaration line and one SHA-256 of their text, so the
golden files show every kernel call and parameter record the emitters write and stay small.
``SPLITTER_REGEN_GOLDEN=1`` rewrites them; review ``git diff tests/test_firmware_golden``.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from splitter.codegen.model_c import generate_device_c
from splitter.importers import load_chain

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
GOLDEN = Path(__file__).resolve().parent / "test_firmware_golden"
MODELS = ("tiny_cnn.onnx", "kws_ds_cnn.onnx", "tiny_cnn_float.tflite", "tiny_cnn_int8.tflite")
_ARRAY = re.compile(r"^(static const \w+ \w+\[\d+\] WEIGHTS = \{)\n(.*?)\n\};\n", re.M | re.S)


def summarised(source: str) -> str:
    """``source`` with each weights array's values replaced by the SHA-256 of their text."""

    def digest(m: re.Match[str]) -> str:
        return f"{m.group(1)} /* sha256 {hashlib.sha256(m.group(2).encode()).hexdigest()} */ }};\n"

    return _ARRAY.sub(digest, source)


@pytest.mark.parametrize("model", MODELS)
def test_model_c_golden(model: str) -> None:
    chain = load_chain(MODELS_DIR / model)
    n = len(chain.layers)
    gen = generate_device_c(chain, [(0, 0, n // 2), (1, n // 2 + 1, n - 1)], "d0")
    got = summarised(gen.files["model.c"])
    golden = GOLDEN / f"model_{model.replace('.', '_')}.c"
    if os.environ.get("SPLITTER_REGEN_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text(), f"{golden.name} changed; review, then SPLITTER_REGEN_GOLDEN=1"
