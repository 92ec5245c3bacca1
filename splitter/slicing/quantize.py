"""Quantise a float ONNX model to int8 for the int8 kernels, and measure what it costs.

:func:`quantize_int8` runs onnxruntime's static quantiser exactly as the QDQ importer
(:mod:`splitter.importers.onnx_qdq`) expects it: ``quant_pre_process`` (BatchNormalization
folded), then ``quantize_static`` in QDQ format, int8 activations and weights, per-channel
weights, MinMax calibration on the user's samples. Ops it
leaves in float (Softmax, Sigmoid, ...) run on the float kernels between ``dequantize`` and
``quantize``.

:func:`quantization_cost` runs the float and the int8 model with onnxruntime on the same
samples and compares their first output: ``max_abs = max |y_int8 - y_float|``,
``mean_abs = mean |y_int8 - y_float|`` over every element of every sample, and, for an output
of more than one element per sample, the top-1 agreement ``mean_i [argmax y_int8,i ==
argmax y_float,i]`` (the fraction of samples whose predicted class is unchanged).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from splitter.errors import InputFileError
from splitter.inputs import MODEL_MAX_BYTES, read_input_file, read_npy

#: The one quantisation scheme splitter runs (``--quantize``).
SCHEMES = ("int8",)
#: Operators that mark a model as already quantised.
_QUANT_OPS = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger"}
)


def quantize_int8(model: str | Path, calibration: str | Path, out: str | Path) -> Path:
    """Write ``out``: ``model`` through ``quantize_static`` (QDQ, QInt8 activations and weights,
    per-channel weights) calibrated on the samples of ``calibration`` (``.npy``: one input
    array or a stack of them). Raises :class:`InputFileError` on a model that is not a float
    ONNX model with one float input, or samples that do not fit its input."""
    proto = _float_model(Path(model))
    name, shape = _single_input(proto, Path(model))
    samples = calibration_samples(calibration, name, shape)
    with tempfile.TemporaryDirectory(prefix="splitter-quantize-") as tmp:
        pre = Path(tmp) / "preprocessed.onnx"
        _pre_process(Path(model), pre)
        _run_quantize_static(pre, Path(out), name, samples)
    return Path(out)


def _float_model(path: Path) -> Any:
    """The ONNX proto of ``path``, refused when it is not a float ONNX model."""
    import onnx

    if path.suffix.lower() != ".onnx":
        raise InputFileError(
            f"{path}: --quantize int8 takes a float ONNX model; a .tflite model is quantised by "
            "the TFLite converter (give splitter the int8 .tflite)"
        )
    proto = onnx.load_from_string(read_input_file(path, "model", MODEL_MAX_BYTES))
    found = sorted({n.op_type for n in proto.graph.node} & _QUANT_OPS)
    if found:
        raise InputFileError(
            f"{path}: the model is already quantised ({', '.join(found)}); compile it without "
            "--quantize"
        )
    return proto


def _single_input(proto: Any, path: Path) -> tuple[str, tuple[int | None, ...]]:
    """Name and shape (``None``: a dynamic dimension) of the one float graph input."""
    from onnx import TensorProto

    inits = {i.name for i in proto.graph.initializer}
    inputs = [v for v in proto.graph.input if v.name not in inits]
    if len(inputs) != 1:
        raise InputFileError(
            f"{path}: --quantize int8 calibrates a model with one graph input, this one has "
            f"{len(inputs)}; quantise it with onnxruntime.quantization.quantize_static yourself"
        )
    t = inputs[0].type.tensor_type
    if t.elem_type != TensorProto.FLOAT:
        raise InputFileError(
            f"{path}: input '{inputs[0].name}' is not float32; --quantize int8 takes a float model"
        )
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return inputs[0].name, shape


def calibration_samples(
    path: str | Path, name: str, shape: Sequence[int | None]
) -> list[np.ndarray]:
    """The samples of a calibration ``.npy``: one float32 array of the input's shape, or a stack
    ``(N, *shape)`` (or ``(N, *shape[1:])`` for a batch-1 input); each returned with the batch
    dimension."""
    array = read_npy(path)
    if array.dtype != np.float32:
        raise InputFileError(
            f"{path}: calibration data for input '{name}' must be float32, the file has "
            f"{array.dtype}; save it with array.astype('float32')"
        )

    def fits(s: Sequence[int]) -> bool:
        return len(s) == len(shape) and all(
            d is None or d == n for d, n in zip(shape, s, strict=True)
        )

    if fits(array.shape):
        return [array]
    if array.ndim == len(shape) + 1 and fits(array.shape[1:]) and len(array):
        return list(array)
    if shape and shape[0] == 1 and fits((1, *array.shape[1:])) and len(array):
        return [a[None, ...] for a in array]
    want = "x".join("?" if d is None else str(d) for d in shape)
    raise InputFileError(
        f"{path}: calibration data for input '{name}' needs shape {want} (or a stack N x {want}), "
        f"the file has {'x'.join(map(str, array.shape)) or 'a scalar'}; reshape the array"
    )


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """onnxruntime's quantiser logs pre-processing advice on the root logger; keep it off the
    user's terminal (splitter's own messages say what happened)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _pre_process(model: Path, out: Path) -> None:
    """onnxruntime's ``quant_pre_process`` (what its quantiser asks for first): its basic graph
    optimisations, which fold BatchNormalization into the preceding Conv (a BatchNormalization
    left between QDQ pairs would run in float), and ONNX shape inference. Symbolic shape
    inference is skipped: it needs sympy, and the models splitter plans have static shapes."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with _quiet_root_logger():
        quant_pre_process(str(model), str(out), skip_symbolic_shape=True)


def _run_quantize_static(model: Path, out: Path, name: str, samples: Sequence[np.ndarray]) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self.it, None)
            return None if x is None else {name: x}

    with _quiet_root_logger():
        quantize_static(
            str(model),
            str(out),
            _Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )


def quantization_cost(
    float_model: str | Path, int8_model: str | Path, samples: Sequence[np.ndarray], source: str
) -> dict[str, Any]:
    """The int8 model's first output against the float model's on ``samples`` (module
    docstring formulas); ``source`` says where the samples came from."""
    from splitter.slicing.validate import OnnxRunner

    ref, q = OnnxRunner(Path(float_model)), OnnxRunner(Path(int8_model))
    name = ref.inputs[0].name
    out = ref.outputs[0].name
    ys = [ref.run({name: x})[out] for x in samples]
    yq = [q.run({name: x})[out] for x in samples]
    pairs = list(zip(yq, ys, strict=True))
    diff = np.concatenate([np.abs(a.astype(np.float64) - b).ravel() for a, b in pairs])
    cost: dict[str, Any] = {
        "scheme": "int8",
        "method": "onnxruntime.quantization.quantize_static (QDQ, QInt8, per-channel)",
        "against": "the float model",
        "output": out,
        "samples": len(samples),
        "source": source,
        "max_abs": float(diff.max()),
        "mean_abs": float(diff.mean()),
    }
    if ys[0].size > 1:
        same = [int(np.argmax(a)) == int(np.argmax(b)) for a, b in pairs]
        cost["top1_agreement"] = float(np.mean(same))
    return cost


def cost_summary(cost: Mapping[str, Any]) -> str:
    """One line of ``compile``'s output."""
    top1 = cost.get("top1_agreement")
    agree = "" if top1 is None else f"top-1 agreement {100 * top1:.1f} %, "
    return (
        f"int8 quantisation against the float model on {cost['samples']} samples "
        f"({cost['source']}): {agree}output '{cost['output']}' max-abs {cost['max_abs']:.3g}, "
        f"mean-abs {cost['mean_abs']:.3g}"
    )
