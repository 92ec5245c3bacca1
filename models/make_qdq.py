"""Write ``tiny_cnn_qdq.onnx``: ``tiny_cnn.onnx`` quantised by splitter's ``--quantize int8``.

``splitter.slicing.quantize.quantize_int8`` runs onnxruntime's ``quant_pre_process`` and
``quantize_static`` (QDQ format, QInt8 activations and weights, per-channel weights, MinMax
calibration) on 16 seeded N(0, 1) inputs (not kept: ``numpy.random.default_rng(0)``).
onnxruntime leaves the final Softmax in float between a DequantizeLinear and a QuantizeLinear;
splitter runs it on the float kernel. Run from the repository root: ``python models/make_qdq.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from splitter.slicing.quantize import quantize_int8

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Calibrate on 16 seeded standard-normal 1x1x28x28 inputs and write the QDQ model."""
    x = np.random.default_rng(0).standard_normal((16, 1, 1, 28, 28)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.npy"
        np.save(cal, x)
        quantize_int8(HERE / "tiny_cnn.onnx", cal, HERE / "tiny_cnn_qdq.onnx")


if __name__ == "__main__":
    main()
